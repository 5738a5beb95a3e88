"""A profiled kernel's instructions added up per Python line (sass_lines and
``gbx gameboy sass-lines``): the readers and the sums on small inputs, and the command on
the real run kernel where ptxas and nvdisasm are installed."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gbx_gameboy import sass_lines as sl
from gbx_gameboy.cli import gameboy
from gbx_gameboy.kernel_digest import find_cuda_tool, find_ptxas

FILES = frozenset({"cpu.py", "memory.py"})

# nvdisasm -c -gi: the source chain (innermost first) before an instruction whose place
# changes; the entry's section holds its out-of-line callees too.
SASS = """\
.text.other_kernel:
        /*0000*/                   EXIT ;
.text.run_kernel_cuda_kernel_forward:
	//## File "/x/warp/native/builtin.h", line 643 inlined at "/x/gbx_gameboy/cpu.py", line 900
	//## File "/x/gbx_gameboy/cpu.py", line 900
        /*0000*/                   IADD3 R1, R2, R3, RZ ;
        /*0010*/              @P0  BRA `(.L_x_1) ;
	//## File "/x/gbx_gameboy/memory.py", line 12 inlined at "/x/gbx_gameboy/cpu.py", line 905
	//## File "/x/gbx_gameboy/cpu.py", line 905
        /*0020*/                   LDL R4, [R1+0x8] ;
$run_kernel_cuda_kernel_forward$helper:
	//## File "/x/gbx_gameboy/memory.py", line 30
        /*0030*/                   RET.REL.NODEC R20 `(run_kernel_cuda_kernel_forward) ;
.text.after:
        /*0000*/                   EXIT ;
"""


def _csv(rows: list[tuple[str, int, int]]) -> str:
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["Kernel Name", "run_kernel_cuda_kernel_forward"])
    w.writerow(["Address", "Source", "Warp Stall Sampling (All Samples)",
                "Instructions Executed"])
    for i, (text, samples, executed) in enumerate(rows):
        w.writerow([hex(0x1000 + 16 * i), f"      {text}", samples, executed])
    return out.getvalue()


PROFILE = [("IADD3 R1, R2, R3, RZ", 5, 100), ("@P0   BRA 0x1030", 1, 100),
           ("LDL R4, [R1+0x8]", 4, 60), ("RET.REL.NODEC R20 0x1000", 0, 60)]


def test_read_sass_lines_keeps_each_instructions_chain() -> None:
    built = sl.read_sass_lines(SASS, "run_kernel_cuda_kernel_forward")
    assert [sl.opcode(b.text) for b in built] == ["IADD3", "BRA", "LDL", "RET.REL.NODEC"]
    assert built[0].chain == ("builtin.h:643", "cpu.py:900") == built[1].chain
    assert built[2].chain == ("memory.py:12", "cpu.py:905")
    assert built[3].chain == ("memory.py:30",)
    with pytest.raises(ValueError, match="no instructions of missing"):
        sl.read_sass_lines(SASS, "missing")


def test_read_ncu_source_csv_reads_counts_and_refuses_other_files() -> None:
    rows = sl.read_ncu_source_csv(_csv(PROFILE))
    assert [(r.text, r.samples, r.executed) for r in rows] == [
        (t, s, e) for t, s, e in PROFILE]
    with pytest.raises(ValueError, match="--print-source sass"):
        sl.read_ncu_source_csv("a,b\n1,2\n")


def test_line_costs_charge_the_outer_or_the_inner_line() -> None:
    built = sl.read_sass_lines(SASS, "run_kernel_cuda_kernel_forward")
    profiled = sl.read_ncu_source_csv(_csv(PROFILE))
    outer, matched = sl.line_costs(built, profiled, FILES, "outer")
    assert matched == 4
    assert [(c.line, c.executed, c.samples, c.local) for c in outer] == [
        ("cpu.py:900", 200, 6, 0), ("cpu.py:905", 60, 4, 60), ("memory.py:30", 60, 0, 0)]
    inner, _ = sl.line_costs(built, profiled, FILES, "inner")
    assert {c.line: c.executed for c in inner} == {
        "cpu.py:900": 200, "memory.py:12": 60, "memory.py:30": 60}
    with pytest.raises(ValueError, match="outer or inner"):
        sl.line_costs(built, profiled, FILES, "middle")


def test_thread_counts_give_active_threads_per_line_and_the_sparse_share() -> None:
    # With the thread-level column: how many threads of a warp ran each line's
    # instructions, and the share of warp instructions run for at most 8 threads.
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["Kernel Name", "run_kernel_cuda_kernel_forward"])
    w.writerow(["Address", "Source", "Instructions Executed", "Thread Instructions Executed"])
    for i, (text, executed, threads) in enumerate([
            ("IADD3 R1, R2, R3, RZ", 100, 3200), ("@P0   BRA 0x1030", 100, 3200),
            ("LDL R4, [R1+0x8]", 60, 240), ("RET.REL.NODEC R20 0x1000", 60, 480)]):
        w.writerow([hex(0x1000 + 16 * i), text, executed, threads])
    profiled = sl.read_ncu_source_csv(out.getvalue())
    assert [p.threads for p in profiled] == [3200, 3200, 240, 480]
    built = sl.read_sass_lines(SASS, "run_kernel_cuda_kernel_forward")
    costs, _ = sl.line_costs(built, profiled, FILES)
    assert {c.line: c.threads / c.executed for c in costs} == {
        "cpu.py:900": 32, "cpu.py:905": 4, "memory.py:30": 8}
    assert sl.sparse_share(profiled, 8) == pytest.approx(120 / 320)
    assert sl.sparse_share(profiled, 4) == pytest.approx(60 / 320)
    # a page without the column: no thread counts, no share
    assert sl.sparse_share(sl.read_ncu_source_csv(_csv(PROFILE)), 8) == 0.0


def test_line_costs_line_up_a_profile_assembled_a_little_differently() -> None:
    built = sl.read_sass_lines(SASS, "run_kernel_cuda_kernel_forward")
    # one instruction more on the profiled GPU: it matches nothing, the rest still do
    profiled = sl.read_ncu_source_csv(_csv(PROFILE[:2] + [("NOP", 2, 7)] + PROFILE[2:]))
    costs, matched = sl.line_costs(built, profiled, FILES)
    assert matched == 4
    assert {c.line: c.executed for c in costs} == {
        "cpu.py:900": 200, "?": 7, "cpu.py:905": 60, "memory.py:30": 60}


def test_sass_lines_command_refuses_bad_input(tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    res = CliRunner().invoke(gameboy, ["sass-lines", str(bad)])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "--print-source sass" in res.output
    good = tmp_path / "good.csv"
    good.write_text(_csv(PROFILE))
    monkeypatch.setattr("gbx_gameboy.kernel_digest.find_ptxas", lambda: None)
    res = CliRunner().invoke(gameboy, ["sass-lines", str(good)])
    assert res.exit_code == 2 and "ptxas and nvdisasm not found" in res.output


@pytest.mark.skipif(find_ptxas() is None or find_cuda_tool("nvdisasm") is None,
                    reason="ptxas and nvdisasm (CUDA toolkit or NVIDIA's pip wheels) not found")
def test_sass_lines_command_on_the_cpu_variant(tmp_path: Path) -> None:
    # A profile in which every instruction of the real build ran once per unit: every one
    # matches, and the run loop's own lines carry them.
    from gbx_gameboy import kernel_digest as kd

    built = sl.read_sass_lines(kd.sass_with_lines(kd.cuda_ptx(variant="cpu", lineinfo=True)),
                               kd.RUN_KERNEL_HOST_ENTRY)
    import gzip

    profile = tmp_path / "profile.csv.gz"  # kept compressed, read as it is
    profile.write_bytes(gzip.compress(_csv([(b.text, 1, 3) for b in built]).encode()))
    res = CliRunner().invoke(gameboy, ["sass-lines", str(profile), "--per", "3", "--top",
                                       "100000", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert out["instructions"] == out["matched"] == len(built)
    assert out["executed"] == pytest.approx(len(built))
    assert out["threads"] == 0 and out["sparse_share"] == 0.0  # no thread-level column
    lines = out["lines"]
    assert lines[0]["executed"] >= lines[-1]["executed"]
    assert sum(r["executed"] for r in lines) == pytest.approx(len(built))
    # most statements of the run kernel's own body carry instructions
    import inspect

    from gbx_gameboy.cpu import run_kernel

    body, first = inspect.getsourcelines(run_kernel.func)
    own = {f"cpu.py:{first + i}" for i in range(len(body))}
    charged = {r["line"] for r in lines if r["line"] in own and r["source"]}
    assert len(charged) > 200
