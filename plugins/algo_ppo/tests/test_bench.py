"""``gbx bench train`` (the bench plugin's) measures PPO end to end through the run loop."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gbx.plugins import load_plugins, set_host
from gbx_bench.train import train_bench


def test_train_bench_prints_one_json_record() -> None:
    set_host(load_plugins(environ={"GBX_PLUGINS": "ppo"}))
    try:
        result = CliRunner().invoke(
            train_bench,
            ["--algo", "ppo", "--env", "toy", "--device", "cpu", "--steps", "384",
             "--envs", "8", "--set", "algo.rollout_steps=16",
             "--set", "algo.minibatches=2", "--set", "algo.update_epochs=1",
             "--set", "algo.model_options={channels=[8,16,16], hidden=16}"],
            catch_exceptions=False,
        )
    finally:
        set_host(None)
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("{")]
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["bench"] == "train" and rec["algo"] == "ppo" and rec["device"] == "cpu"
    assert rec["env_steps"] == 384 and rec["updates"] == 3
    assert rec["env_steps_per_s"] > 0 and rec["updates_per_s"] > 0
    assert rec["steady_env_steps_per_s"] > 0
    assert rec["config"]["algo"]["num_envs"] == 8
