"""ptxas's resource figures of a kernel's PTX (kernel_digest.run_ptxas and
``gbx gameboy kernel-digest --ptxas``): parsed from ptxas -v, and measured on real PTX
where the CUDA toolkit's ptxas is installed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from gbx_gameboy.cli import gameboy
from gbx_gameboy.kernel_digest import (
    canonical_ptx,
    find_cuda_tool,
    find_ptxas,
    parse_ptxas,
    run_ptxas,
    sha256_of_ptx,
    short_name,
)
from gbx_gameboy.warp_setup import wp

needs_ptxas = pytest.mark.skipif(find_ptxas() is None,
                                 reason="ptxas (CUDA toolkit) not on PATH or under CUDA_HOME")

RD_CALL = "_ZN52_INTERNAL_00000000_21_wp_gbx_gameboy_cpu_cu_69bc1cfd9rd_call_0Eyiii"
SAMPLE = f"""\
ptxas info    : 154 bytes gmem
ptxas info    : Compiling entry function 'run_kernel_cuda_kernel_forward' for 'sm_90'
ptxas info    : Function properties for run_kernel_cuda_kernel_forward
    872 bytes stack frame, 620 bytes spill stores, 788 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 872 bytes cumulative stack size
ptxas info    : Function properties for {RD_CALL}
    0 bytes stack frame, 204 bytes spill stores, 200 bytes spill loads
"""


PTX_HEAD = """\
.version 9.4
.target sm_90
.address_size 64

"""
PTX_FUNC = """\
.func _Z6helperi(
	.param .b32 _Z6helperi_param_0
)
{
	ld.param.u32 	%r1, [_Z6helperi_param_0];
	@%p1 bra 	$L__BB{n}_2;
$L__BB{n}_2:
	ret;
}
"""
PTX_ENTRY = """\
	// .globl	{name}
.visible .entry {name}(
	.param .u32 {name}_param_0
)
{{
	.local .align 4 .b8 	__local_depot{n}[8];
	mov.u64 	%SPL, __local_depot{n};
	setp.eq.s32 	%p1, %r1, {k};
	@%p1 bra 	$L__BB{n}_1;
$L__BB{n}_1:
	ret;
}}
"""


def _ptx(order: tuple[str, ...], k: int = 0) -> str:
    """PTX of three functions in ``order``; NVVM numbers each function's block labels by
    its place, so they change with the order too."""
    parts = {"helper": lambda n: PTX_FUNC.replace("{n}", str(n)),
             "run": lambda n: PTX_ENTRY.format(name="run_kernel", k=k, n=n),
             "store": lambda n: PTX_ENTRY.format(name="store_gb", k=1, n=n)}
    return PTX_HEAD + "".join(parts[p](n) for n, p in enumerate(order)) + "\0"


def test_canonical_ptx_ignores_the_order_of_kernels_and_their_numbers() -> None:
    # Warp hands a module's kernels to NVRTC in an order that can change with any edit
    # of the Python source: the same code in another order has the same digest.
    one = _ptx(("helper", "run", "store"))
    other = _ptx(("store", "helper", "run"))
    assert one != other
    assert canonical_ptx(one) == canonical_ptx(other)
    assert sha256_of_ptx(one) == sha256_of_ptx(other)
    # ... and a change of one instruction changes it
    assert sha256_of_ptx(_ptx(("helper", "run", "store"), k=5)) != sha256_of_ptx(one)
    # every definition is kept, with its .globl comment
    text = canonical_ptx(one)
    assert text.startswith(".version 9.4")
    assert text.count(".visible .entry") == 2 and text.count("// .globl") == 2
    assert "\t// .globl\tstore_gb\n.visible .entry store_gb(" in text


def test_parse_ptxas_reads_each_function() -> None:
    found = parse_ptxas(SAMPLE)
    run = found["run_kernel_cuda_kernel_forward"]
    assert (run.registers, run.stack_frame, run.spill_stores, run.spill_loads) == (
        255, 872, 620, 788)
    rd = found["rd_call"]
    assert (rd.registers, rd.stack_frame, rd.spill_stores, rd.spill_loads) == (
        None, 0, 204, 200)


def test_short_name_of_warp_device_functions() -> None:
    assert short_name("_ZN52_INTERNAL_00000000_21_wp_gbx_gameboy_cpu_cu_69bc1cfd13oam_bug_idu"
                      "_0Eyiiii") == "oam_bug_idu"
    assert short_name("store_gb_cuda_kernel_forward") == "store_gb_cuda_kernel_forward"


@wp.kernel
def _plain(out: wp.array(dtype=wp.int32)):
    out[wp.tid()] = wp.tid() * 3


@wp.kernel
def _local_array(out: wp.array(dtype=wp.int32), k: int):
    # a vector indexed by a run-time value lives in local memory: a stack frame
    v = wp.vector(dtype=wp.int32, length=16)
    for i in range(16):
        v[i] = out[i] + i
    out[0] = v[(wp.tid() + k) & 15]


@needs_ptxas
def test_run_ptxas_measures_real_ptx() -> None:
    wp.init()
    with tempfile.TemporaryDirectory() as tmp:
        paths = wp.compile_aot_module(_plain.module, arch=90, module_dir=tmp, use_ptx=True,
                                      strip_hash=True)
        ptx = Path(next(str(p) for p in paths if str(p).endswith(".ptx"))).read_text()
    report = run_ptxas(ptx)
    plain = report.functions["_plain_cuda_kernel_forward"]
    local = report.functions["_local_array_cuda_kernel_forward"]
    assert plain.registers is not None and 1 <= plain.registers <= 255
    assert plain.stack_frame == 0
    assert local.stack_frame >= 64  # 16 int32
    assert report.ptxas_version[0].isdigit()


def test_ptxas_option_without_ptxas_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    res = CliRunner().invoke(gameboy, ["kernel-digest", "--ptxas"])
    assert res.exit_code == 2
    assert "ptxas not found" in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.slow
@needs_ptxas
def test_kernel_digest_ptxas_reports_the_run_kernel(tmp_path: Path) -> None:
    out = tmp_path / "run.ptx"
    res = CliRunner().invoke(gameboy, ["kernel-digest", "--ptxas", "--ptx-out", str(out)])
    assert res.exit_code in (0, 1), res.output
    record = json.loads(res.output.strip().splitlines()[-1])
    run = record["run_kernel"]
    assert 1 <= run["registers"] <= 255
    assert run["stack_frame"] >= 0 and run["spill_loads"] >= 0
    if find_cuda_tool("nvdisasm"):
        path = run["loop_path"]
        assert path["instructions"] > 100 and path["local_loads"] <= path["instructions"]
    assert "run_kernel_cuda_kernel_forward" in out.read_text()
    # the CPU variant compiled for the same GPU: its own entry's figures, no loop path
    host = record["run_kernel_host"]
    assert 1 <= host["registers"] <= 255 and host["spill_loads"] >= 0
    assert host["loop_path"] is None


def test_cuda_tools_are_found_in_nvidia_pip_wheels(tmp_path: Path, monkeypatch) -> None:
    """Off PATH and without CUDA_HOME, ptxas and nvdisasm from NVIDIA's pip wheels
    (site-packages/nvidia/<part>/bin/) are found on the import path; a file that is not
    executable is not a tool."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    site = tmp_path / "site-packages"
    tool = site / "nvidia" / "cu13" / "bin" / "nvdisasm"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    assert find_cuda_tool("nvdisasm", [str(tmp_path / "other"), str(site)]) is None
    tool.chmod(0o755)
    assert find_cuda_tool("nvdisasm", [str(tmp_path / "other"), str(site)]) == str(tool)
    assert find_cuda_tool("ptxas", [str(site)]) is None
