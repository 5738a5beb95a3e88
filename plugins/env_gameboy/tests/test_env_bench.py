"""``gbx bench env`` prints one JSON record per batch size and checks memory growth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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
        n = r["num_envs"]
        assert r["env_steps_per_s_per_env"] == pytest.approx(r["env_steps_per_s"] / n, rel=1e-3)
        assert r["frames_per_s_per_env"] == pytest.approx(r["frames_per_s"] / n, rel=1e-3)
        assert r["reset_all_ms"] >= 0 and "rss" in r["mem_after_warmup"]
        assert r["kernel"] == "cpu" and r["block_threads"] is None  # the CPU device's
        # the warm-up step's own rate
        assert len(r["warmup_env_steps_per_s"]) == 1 and r["warmup_env_steps_per_s"][0] > 0


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


def test_backend_mode_refuses_what_the_task_decides_and_needs_the_backends_bench() -> None:
    import click

    alone = click.Group("bench", commands={"env": env_bench})  # no `backends` registered
    res = CliRunner().invoke(alone, ["env", "--backend", "gameboy,pyboy", "--envs", "2"])
    assert res.exit_code == 2 and "pip install -e plugins/env_pyboy" in res.output
    res = CliRunner().invoke(alone, ["env", "--backend", "gameboy", "--rom", "x.gb",
                                     "--stack-k", "4"])
    assert res.exit_code == 2 and "--rom, --stack-k cannot be combined with --backend" in res.output
    res = CliRunner().invoke(alone, ["env", "--task", "gbx-quest-1"])
    assert res.exit_code == 2 and "--task needs --backend" in res.output


def test_backend_mode_forwards_the_common_options() -> None:
    import click

    seen: dict[str, object] = {}

    @click.command("backends")
    @click.option("--env", "envs", default=None)
    @click.option("--task", default=None)
    @click.option("--backend", "backends", default="gameboy,pyboy")
    @click.option("--envs", "num_envs", default="64")
    @click.option("--device", default="auto")
    @click.option("--steps", default=20)
    @click.option("--warmup", default=3)
    @click.option("--cpu-threads", "cpu_threads", default="1,0")
    @click.option("--set", "overrides", multiple=True)
    def fake_backends(**kwargs: object) -> None:
        seen.update(kwargs)

    group = click.Group("bench", commands={"env": env_bench, "backends": fake_backends})
    res = CliRunner().invoke(group, ["env", "--backend", "gameboy,pyboy", "--envs", "8,16",
                                     "--device", "cpu", "--steps", "5", "--warmup", "2"])
    assert res.exit_code == 0, res.output
    assert seen == {"envs": None, "task": "gbx-quest-1", "backends": "gameboy,pyboy",
                    "num_envs": "8,16", "device": "cpu", "steps": 5, "warmup": 2,
                    "overrides": (), "cpu_threads": "1,0"}
    res = CliRunner().invoke(group, ["env", "--backend", "gameboy", "--threads", "2"])
    assert res.exit_code == 0, res.output
    assert seen["cpu_threads"] == "2"


def test_timed_steps_run_the_chosen_variant(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch that times both variants (here made to, with rounds back to back from
    # launch 12, every 6 launches): a warm-up of 20 steps ends inside the round of
    # launches 18-23 and runs on through it, and the timed steps (24-33) are held, so
    # the batch starts no round among them.
    from gbx_gameboy import env_bench as eb
    from gbx_gameboy import machine, variant_timing
    from gbx_gameboy.env import GameBoyConfig

    clocks: list[variant_timing.VariantClock] = []

    def clock(*args: object, **kwargs: object) -> variant_timing.VariantClock:
        clocks.append(variant_timing.VariantClock(*args, early_gaps=(10,),  # type: ignore[arg-type]
                                                  retime_every=6))
        return clocks[-1]

    real = machine.GameBoyBatch

    def measured(*args: object, **kwargs: object) -> machine.GameBoyBatch:
        kwargs.setdefault("kernel", "measure")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(machine, "VariantClock", clock)
    monkeypatch.setattr(machine, "GameBoyBatch", measured)
    cfg = GameBoyConfig(rom=str(write_env_test_rom(tmp_path)), frames_per_step=8)
    r = eb.measure(cfg, 2, "cpu", steps=10, warmup=20)
    assert r["warmup_steps"] == 24 and len(r["warmup_env_steps_per_s"]) == 24
    assert clocks[0].rounds == 3 and not clocks[0].timing and not clocks[0].held
