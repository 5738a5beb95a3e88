"""``gbx bench train`` through the CLI, on the counting test algorithm."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gbx.plugins import PluginHost, set_host
from gbx_bench import train as bench_train
from gbx_bench.train import memory_drift, throughput, train_bench


@pytest.fixture
def bench_host(host: PluginHost):  # type: ignore[no-untyped-def]
    set_host(host)
    yield host
    set_host(None)


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(train_bench, list(args))
    return result.exit_code, result.output


def test_bench_train_is_registered_by_the_bench_plugin(host: PluginHost) -> None:
    spec = host.registry.benchmarks["train"]
    assert spec.command is train_bench


def test_bench_train_prints_one_record_with_config_versions_and_device(bench_host) -> None:
    code, output = _invoke("--algo", "counter", "--env", "toy", "--device", "cpu",
                           "--envs", "4", "--steps", "128", "--set", "algo.chunk=8")
    assert code == 0, output
    lines = [ln for ln in output.splitlines() if ln.startswith("{")]
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["bench"] == "train" and rec["algo"] == "counter" and rec["env"] == "toy"
    assert rec["device"] == "cpu" and rec["device_name"]
    # 4 envs x 8 steps per record: 4 records reach the 128-step budget.
    assert rec["env_steps"] == 128 and rec["updates"] == 4
    assert rec["env_steps_per_s"] > 0 and rec["updates_per_s"] > 0
    assert rec["steady_env_steps_per_s"] > 0 and rec["steady_updates_per_s"] > 0
    assert rec["config"]["algo"]["num_envs"] == 4 and rec["config"]["algo"]["chunk"] == 8
    assert rec["config"]["run"]["steps"] == 128 and "run_dir" not in rec["config"]["run"]
    assert rec["versions"]["torch"] and rec["versions"]["gbx"]
    assert rec["overrides"] == ["algo.num_envs=4", "algo.chunk=8"]


def test_bench_train_names_a_bad_override(bench_host) -> None:
    code, output = _invoke("--algo", "counter", "--device", "cpu", "--steps", "64",
                           "--set", "algo.no_such_knob=1")
    assert code != 0 and "no_such_knob" in output


def test_throughput_separates_steady_state() -> None:
    records = [(10.0, {"env_steps": 100}), (11.0, {"env_steps": 200}),
               (13.0, {"step": 400})]
    out = throughput(records, seconds=5.0)
    assert out["env_steps"] == 400 and out["updates"] == 3
    assert out["env_steps_per_s"] == pytest.approx(80.0)
    assert out["updates_per_s"] == pytest.approx(0.6)
    assert out["steady_env_steps_per_s"] == pytest.approx(100.0)
    assert out["steady_updates_per_s"] == pytest.approx(2 / 3)
    assert "steady_env_steps_per_s" not in throughput(records[:1], seconds=1.0)


def test_memory_drift_measures_growth_after_warmup() -> None:
    records = [(float(i), {"env_steps": 100 * (i + 1)}) for i in range(10)]
    memory = [500, 900, 1000, 1000, 1004, 1000, 1001, 1000, 1000, 1002]
    out = memory_drift(records, memory, warmup_frac=0.2)
    # Two warm-up samples (500, 900) are left out; the baseline is the third sample.
    assert out["samples"] == 10 and out["warmup_samples"] == 2
    assert out["baseline_bytes"] == 1000 and out["max_bytes"] == 1004
    assert out["max_delta_bytes"] == 4
    assert out["series"][0] == [100, 0.0, 500] and len(out["series"]) == 10
    assert len(memory_drift(records, memory, 0.2, points=3)["series"]) == 3


def test_bench_train_minutes_stops_on_the_clock_and_reports_memory(bench_host) -> None:
    # No --steps: the wall-clock budget alone ends the run (after its first record).
    code, output = _invoke("--algo", "counter", "--env", "toy", "--device", "cpu",
                           "--envs", "2", "--minutes", "0.0001", "--set", "algo.chunk=4",
                           "--max-mem-delta", "4096")
    assert code == 0, output
    rec = json.loads([ln for ln in output.splitlines() if ln.startswith("{")][0])
    assert rec["updates"] >= 1 and rec["env_steps"] == 8 * rec["updates"]
    assert rec["memory"]["samples"] == rec["updates"] and rec["memory"]["max_bytes"] > 0


def test_bench_train_max_mem_delta_fails_when_memory_grows(bench_host, monkeypatch) -> None:
    grown = iter(range(0, 10**12, 64 * 2**20))  # 64 MB more at every record
    monkeypatch.setattr(bench_train, "process_memory", lambda device: next(grown))
    code, output = _invoke("--algo", "counter", "--env", "toy", "--device", "cpu",
                           "--envs", "2", "--steps", "64", "--set", "algo.chunk=4",
                           "--warmup-frac", "0.25", "--max-mem-delta", "1")
    assert code != 0 and "over --max-mem-delta 1 MB" in output
