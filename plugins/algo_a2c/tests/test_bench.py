"""``gbx bench a2c-memory`` on the CPU with small env counts."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gbx import memory
from gbx.plugins import load_plugins, set_host
from gbx_algo_a2c.bench import memory_bench
from gbx_bench.train import train_bench

SMALL = "algo.model_options={channels=[8,16,16], hidden=16}"


def _invoke(*args: str) -> list[dict]:
    set_host(load_plugins(environ={"GBX_PLUGINS": "a2c"}))
    try:
        result = CliRunner().invoke(memory_bench, list(args), catch_exceptions=False)
    finally:
        set_host(None)
    assert result.exit_code == 0, result.output
    return [json.loads(ln) for ln in result.output.splitlines() if ln.startswith("{")]


def test_memory_bench_prints_one_record_per_env_count() -> None:
    records = _invoke("--envs", "8,32", "--device", "cpu", "--windows", "1", "--set", SMALL)
    assert [r["num_envs"] for r in records] == [8, 32]
    for rec in records:
        assert rec["bench"] == "a2c-memory" and rec["device"] == "cpu"
        assert rec["obs_shape"] == [1, 72, 80] and rec["peak_kind"] == "process_max_rss"
        assert rec["env_steps_short"] == rec["num_envs"] * rec["update_every"]
        assert rec["env_steps_long"] == 4 * rec["env_steps_short"]
        assert rec["window_bytes"] < rec["estimate_bytes"]
        assert rec["peak_bytes_long"] >= rec["peak_bytes_short"] > 0
    # The window scales with N: 4x the envs, about 4x the bytes.
    ratio = records[1]["window_bytes"] / records[0]["window_bytes"]
    assert 3.9 < ratio < 4.1


def test_memory_bench_reports_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1_000_000)
    (rec,) = _invoke("--envs", "64", "--device", "cpu", "--set", SMALL)
    assert rec["num_envs"] == 64 and "lower algo.num_envs" in rec["refused"]


def test_memory_bench_rejects_bad_env_lists() -> None:
    result = CliRunner().invoke(memory_bench, ["--envs", "a,b"])
    assert result.exit_code == 2 and "comma-separated env counts" in result.output


def test_train_bench_measures_a2c() -> None:
    set_host(load_plugins(environ={"GBX_PLUGINS": "a2c"}))
    try:
        result = CliRunner().invoke(
            train_bench,
            ["--algo", "a2c", "--env", "toy", "--device", "cpu", "--envs", "8",
             "--steps", str(8 * 5 * 4), "--set", "algo.log_every=2", "--set", SMALL],
            catch_exceptions=False,
        )
    finally:
        set_host(None)
    assert result.exit_code == 0, result.output
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("{")]
    rec = json.loads(line)
    assert rec["algo"] == "a2c" and rec["config"]["algo"]["num_envs"] == 8
    # Four optimiser steps of 8 envs x 5 steps, one record every two.
    assert rec["env_steps"] == 160 and rec["updates"] == 2
    assert rec["env_steps_per_s"] > 0 and rec["steady_updates_per_s"] > 0
