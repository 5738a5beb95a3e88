"""``gbx bench train`` (a core built-in) through the CLI, on the counting test algorithm."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gbx.bench_train import throughput, train_bench
from gbx.plugins import PluginHost, set_host


@pytest.fixture
def bench_host(host: PluginHost):  # type: ignore[no-untyped-def]
    set_host(host)
    yield host
    set_host(None)


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(train_bench, list(args))
    return result.exit_code, result.output


def test_bench_train_is_a_core_builtin(host: PluginHost) -> None:
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
