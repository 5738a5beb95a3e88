"""``gbx bench env`` prints one JSON record per batch size and checks memory growth."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from env_test_rom import write_env_test_rom

from gbx_gameboy.env_bench import env_bench
from gbx_gameboy.plugin import register_benchmarks


def test_bench_prints_json_records(tmp_path: Path) -> None:
    rom = write_env_test_rom(tmp_path)
    res = CliRunner().invoke(
        env_bench,
        ["--rom", str(rom), "--num-envs", "2,4", "--steps", "3", "--warmup", "1",
         "--device", "cpu", "--frames-per-step", "4", "--max-mem-delta", "512"],
    )
    assert res.exit_code == 0, res.output
    recs = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert [r["num_envs"] for r in recs] == [2, 4]
    for r in recs:
        assert r["env_steps_per_s"] > 0
        assert abs(r["frames_per_s"] - 4 * r["env_steps_per_s"]) <= 0.01 * r["frames_per_s"]
        assert r["reset_all_ms"] >= 0 and "rss" in r["mem_after_warmup"]


def test_bench_fails_on_memory_growth(tmp_path: Path) -> None:
    rom = write_env_test_rom(tmp_path)
    res = CliRunner().invoke(
        env_bench,
        ["--rom", str(rom), "--num-envs", "2", "--steps", "2", "--warmup", "1",
         "--device", "cpu", "--frames-per-step", "2", "--max-mem-delta", "-1"],
    )
    assert res.exit_code != 0 and "memory grew" in res.output


def test_registers_as_env() -> None:
    got = []
    register_benchmarks(lambda name, cmd: got.append((name, cmd)))
    assert ("env", env_bench) in got
