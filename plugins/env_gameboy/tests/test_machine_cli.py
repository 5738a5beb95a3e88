"""``gbx gameboy run/conformance`` and ``gbx bench emulator`` through click, plus the hooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import click
import pytest
from click.testing import CliRunner

from gbx_gameboy import conformance as conf
from gbx_gameboy import plugin
from gbx_gameboy.bench import emulator_bench
from gbx_gameboy.cli import gameboy
from gbx_gameboy.microrom import micro_rom

ROOT = conf.testroms_dir()
needs_roms = pytest.mark.skipif(not ROOT.is_dir(), reason=f"test ROMs not found at {ROOT}")


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@needs_roms
def test_run_prints_serial_output() -> None:
    rom = ROOT / "blargg/cpu_instrs/individual/06-ld r,r.gb"
    res = CliRunner().invoke(gameboy, ["run", str(rom), "--serial", "--frames", "120"])
    assert res.exit_code == 0, res.output
    assert "Passed" in res.output


def test_run_prints_registers_as_json(tmp_path) -> None:
    path = tmp_path / "m.gb"
    path.write_bytes(micro_rom("    ld a, $12\n    ld b, $34\n    DONE"))
    res = CliRunner().invoke(gameboy, ["run", str(path), "--regs", "--frames", "2", "--envs", "2"])
    assert res.exit_code == 0, res.output
    regs = json.loads(_last_line(res.output))
    assert regs["b"] == 0x34 and regs["frames"] == 2 and regs["locked_envs"] == 0


def test_bad_rom_is_a_one_line_error_with_exit_2(tmp_path) -> None:
    runner = CliRunner()
    res = runner.invoke(gameboy, ["run", str(tmp_path / "missing.gb")])
    assert res.exit_code == 2
    assert "not found" in res.output and len(res.output.strip().splitlines()) == 1
    bad = tmp_path / "bad.gb"
    bad.write_bytes(b"\x00" * 0x8000)
    res = runner.invoke(gameboy, ["run", str(bad)])
    assert res.exit_code == 2 and "header checksum" in res.output


@needs_roms
def test_conformance_command_json() -> None:
    res = CliRunner().invoke(gameboy, ["conformance", "--json", "--fast", "--device", "cpu",
                                       "timer/tim00.gb"])
    assert res.exit_code == 0, res.output
    rows = json.loads(_last_line(res.output))
    assert rows == [{
        "rom": "mooneye/acceptance/timer/tim00", "protocol": "FIB", "slow": False,
        "cpu": {"result": "pass", "frames": rows[0]["cpu"]["frames"],
                "detail": "Fibonacci registers"}, "cpu_kernel": "cpu",
        "cuda": {"result": "not run", "frames": 0, "detail": "not asked for (--device cpu)"},
    }]
    bad = CliRunner().invoke(gameboy, ["conformance", "--device", "gpu", "tim00"])
    assert bad.exit_code == 2 and "--device must be all, cpu, cuda or cuda:N" in bad.output


def test_bench_prints_one_json_record() -> None:
    res = CliRunner().invoke(
        emulator_bench, ["--envs", "2", "--frames", "72", "--warmup-steps", "1"]
    )
    assert res.exit_code == 0, res.output
    rec = json.loads(_last_line(res.output))
    assert rec["envs"] == 2 and rec["frames_per_s"] > 0 and rec["instructions_per_s"] > 0
    assert {"compile_s", "run_s", "warp", "torch", "device", "threads", "loadavg_1m"} <= rec.keys()
    assert rec["process_cpu_s"] > 0 and rec["frames_per_cpu_s"] > 0
    assert rec["kernel"] == "cpu"  # the CPU device's own variant of the run kernel
    assert rec["block_threads"] is None  # a GPU launch's figure
    # One rate per timed step; the steady rate covers the second half of them.
    assert rec["warmup_steps"] == 1 and len(rec["step_frames_per_s"]) == 3
    # the warm-up step's own rate, measured as the timed ones
    assert len(rec["warmup_step_frames_per_s"]) == 1 and rec["warmup_step_frames_per_s"][0] > 0
    half = rec["step_frames_per_s"][1:]
    assert min(half) * 0.99 <= rec["steady_frames_per_s"] <= max(half) * 1.01
    # per env beside the totals: the batch's rate shared by its 2 envs
    assert rec["frames_per_s_per_env"] == pytest.approx(rec["frames_per_s"] / 2)
    assert rec["steady_frames_per_s_per_env"] == pytest.approx(rec["steady_frames_per_s"] / 2)


def test_bench_envs_list_prints_one_record_per_size() -> None:
    res = CliRunner().invoke(
        emulator_bench, ["--envs", "1,3", "--frames", "24", "--warmup-steps", "0"]
    )
    assert res.exit_code == 0, res.output
    recs = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert [r["envs"] for r in recs] == [1, 3]
    for r in recs:
        assert r["frames_per_env"] == 24 and r["frames_per_s"] > 0
        assert len(r["step_frames_per_s"]) == 1 and r["steady_frames_per_s"] > 0


def test_bench_kernel_option() -> None:
    res = CliRunner().invoke(emulator_bench, ["--envs", "1", "--frames", "24", "--warmup-steps",
                                              "0", "--kernel", "cuda"])
    assert res.exit_code == 0, res.output
    assert json.loads(_last_line(res.output))["kernel"] == "cuda"


def test_bench_warms_a_measuring_batch_up_through_its_first_rounds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # --kernel measure times both variants; the first two rounds are the batch's start-up,
    # so the warm-up runs on through them and the record says how many warm-up steps ran
    # and what each variant measured.
    from gbx_gameboy.variant_timing import WARM_ROUNDS

    res = CliRunner().invoke(emulator_bench, ["--envs", "2", "--frames", "24", "--warmup-steps",
                                              "0", "--kernel", "measure", "--no-game"])
    assert res.exit_code == 0, res.output
    r = json.loads(_last_line(res.output))
    # without a game there is no boot or START launch: rounds at steps 2-7 and 12-17
    assert WARM_ROUNDS == 2 and r["warmup_steps"] == 18
    # every warm-up step has its rate, those of the variant rounds too
    assert len(r["warmup_step_frames_per_s"]) == 18
    assert min(r["warmup_step_frames_per_s"]) > 0
    assert set(r["variant_s_per_frame"]) == {"cpu", "cuda"} and r["kernel"] in ("cpu", "cuda")
    # With rounds back to back from launch 12 (every 6 launches), a warm-up of 20 steps
    # ends inside the round of launches 18-23 and runs on through it; the timed steps
    # (launches 24-33) are held, so the batch's clock starts no round among them.
    from gbx_gameboy import machine, variant_timing

    clocks: list[variant_timing.VariantClock] = []

    def clock(*args: Any, **kwargs: Any) -> variant_timing.VariantClock:
        clocks.append(variant_timing.VariantClock(*args, early_gaps=(10,), retime_every=6))
        return clocks[-1]

    monkeypatch.setattr(machine, "VariantClock", clock)
    res = CliRunner().invoke(emulator_bench, ["--envs", "1", "--frames", "240", "--warmup-steps",
                                              "20", "--kernel", "measure", "--no-game"])
    assert res.exit_code == 0, res.output
    r = json.loads(_last_line(res.output))
    assert r["warmup_steps"] == 24 and len(r["step_frames_per_s"]) == 10
    assert clocks[0].rounds == 3 and not clocks[0].timing and not clocks[0].held
    plain = CliRunner().invoke(emulator_bench, ["--envs", "2", "--frames", "24",
                                                "--warmup-steps", "0", "--no-game"])
    r = json.loads(_last_line(plain.output))
    assert r["warmup_steps"] == 0 and r["variant_s_per_frame"] is None
    assert r["warmup_step_frames_per_s"] == []


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--block-threads", "3", "must be one of 1, 2, 4, 8, 16, 32, got 3"),
    ("--block-threads", "8", "on the CPU device a batch is split over worker threads"),
    ("--block-warps", "9", "9 is not in the range 1<=x<=8"),
    ("--block-warps", "2", "on the CPU device a batch is split over worker threads"),
])
def test_bench_gpu_launch_options_are_checked(option: str, value: str, message: str) -> None:
    res = CliRunner().invoke(emulator_bench, ["--envs", "1", option, value])
    assert res.exit_code == 2 and option in res.output and message in res.output


def test_bench_without_drawing_times_the_same_emulation() -> None:
    args = ["--envs", "2", "--frames", "48", "--warmup-steps", "1"]
    records = {}
    for flag in ("--draw", "--no-draw"):
        res = CliRunner().invoke(emulator_bench, [*args, flag])
        assert res.exit_code == 0, res.output
        records[flag] = json.loads(_last_line(res.output))
    assert records["--draw"]["draw"] is True and records["--no-draw"]["draw"] is False
    # drawing reads the emulated state and changes none of it
    assert records["--draw"]["instructions"] == records["--no-draw"]["instructions"] > 0


@pytest.mark.parametrize("bad", ["0", "4,x", ",", "-2"])
def test_bench_envs_list_refuses_bad_sizes(bad: str) -> None:
    res = CliRunner().invoke(emulator_bench, ["--envs", bad])
    assert res.exit_code == 2 and "--envs" in res.output and "1,64,1024" in res.output


def _fresh_python(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a fresh interpreter (Warp not yet initialised), capturing stdout and stderr."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, **(env or {})},
    )


def test_bench_stdout_is_exactly_one_json_line_in_a_fresh_interpreter() -> None:
    # Warp initialises inside the command here, so its banner would land on stdout.
    proc = _fresh_python("-m", "gbx", "bench", "emulator", "--envs", "2", "--frames", "24")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected one JSON line on stdout, got:\n{proc.stdout}"
    rec = json.loads(lines[0])
    assert rec["bench"] == "emulator" and rec["envs"] == 2 and rec["frames_per_env"] == 24


@pytest.mark.parametrize("module", ["render", "snapshot", "kstate"])
def test_any_warp_module_imported_first_keeps_warp_init_quiet(module: str) -> None:
    # Whichever module of the package imports Warp first must silence it before wp.init().
    code = f"import gbx_gameboy.{module}, warp; warp.init(); print('ok')"
    proc = _fresh_python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"


def test_plugin_hooks_register_the_command_group_and_benchmark() -> None:
    cli = click.Group()
    plugin.register_commands(cli)
    assert "gameboy" in cli.commands
    got = {}
    plugin.register_benchmarks(lambda name, cmd: got.setdefault(name, cmd))
    assert got["emulator"] is emulator_bench


@pytest.mark.slow
def test_phase_clocks_build_counts_every_instruction_and_splits_the_time() -> None:
    """GBX_GAMEBOY_PHASE_CLOCKS=1 builds the counting kernel; the bench reports its summary."""
    proc = _fresh_python(
        "-m", "gbx", "bench", "emulator", "--envs", "2", "--frames", "48",
        "--warmup-steps", "1", env={"GBX_GAMEBOY_PHASE_CLOCKS": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    clocks = rec["phase_clocks"]
    assert clocks["fetches"] == rec["instructions"] > 0
    shares = clocks["phase_share"]
    assert set(shares) == {"catch_up", "interrupts_halt", "fetch", "reads", "register_work",
                           "writes"}
    assert abs(sum(shares.values()) - 1.0) < 1e-3 and shares["fetch"] > 0
    assert clocks["live_lanes_per_fetch"] == 1.0  # one env per CPU task


@pytest.mark.parametrize(("args", "message"), [
    (["--frames", "-5"], "--frames must be >= 1, got -5"),
    (["--cycles", "-1"], "--cycles must be >= 1, got -1"),
    (["--envs", "10000000"], "lower --envs"),
])
def test_bad_counts_and_a_batch_too_big_are_one_line_exit_2_before_allocating(
        tmp_path, monkeypatch, args, message) -> None:
    from gbx.cli import build_cli
    from gbx.plugins import load_plugins
    from gbx_gameboy import machine

    def no_alloc(*_a, **_k):
        raise AssertionError("the batch must not be built")

    monkeypatch.setattr(machine.GameBoyBatch, "__init__", no_alloc)
    path = tmp_path / "m.gb"
    path.write_bytes(micro_rom("    DONE"))
    res = CliRunner().invoke(build_cli(load_plugins()), ["gameboy", "run", str(path), *args])
    assert res.exit_code == 2 and message in res.output, res.output
    assert res.output.count("\n") == 1


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without GPU")
def test_cuda_without_a_gpu_is_one_line_exit_2(tmp_path) -> None:
    from gbx.cli import build_cli
    from gbx.plugins import load_plugins

    path = tmp_path / "m.gb"
    path.write_bytes(micro_rom("    DONE"))
    res = CliRunner().invoke(build_cli(load_plugins()),
                             ["gameboy", "run", str(path), "--device", "cuda"])
    assert res.exit_code == 2 and "CUDA is not available" in res.output, res.output
    assert res.output.count("\n") == 1


def test_header_flag_combinations_run_or_fail_in_one_line(tmp_path) -> None:
    """Every cartridge type the header may name, with RAM sizes and a PyBoy state in
    VBlank: `gbx gameboy run` runs it (exit 0) or refuses it in one line (exit 2)."""
    from gbx_gameboy import pyboy_state as ps
    from gbx_gameboy.cartridge import CART_TYPES, parse_cartridge
    from gbx_gameboy.fuzz_targets import _base_rom, _with_header

    runner = CliRunner()
    codes = set()
    for cart_type in [*sorted(CART_TYPES), 0x04, 0xFF]:
        for ram_code in (0, 2, 5, 7):
            rom = tmp_path / "x.gb"
            rom.write_bytes(_with_header(_base_rom(), cart_type, ram_code))
            args = ["run", str(rom), "--frames", "1", "--regs"]
            if cart_type in CART_TYPES and ram_code != 7:
                cart = parse_cartridge(rom)
                fields = ps.blank_fields(cart)
                fields.update(LY=144, STAT=0x81, LCDC=0x91, lcd_clock_target=2**64 - 1)
                state = tmp_path / "x.state"
                state.write_bytes(ps.encode(fields, cart))
                args += ["--state", str(state)]
            res = runner.invoke(gameboy, args)
            assert res.exit_code in (0, 2), (hex(cart_type), ram_code, res.output)
            if res.exit_code == 2:
                assert len(res.output.strip().splitlines()) == 1, res.output
            codes.add(res.exit_code)
    assert codes == {0, 2}
