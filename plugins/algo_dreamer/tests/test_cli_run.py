"""dreamer_v3 through the core run loop: `gbx run` with the run's evaluation and checkpoint
schedule, then `gbx eval` on its checkpoint."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gbx.cli import build_cli
from gbx.plugins import get_host

TINY = ["--set", "algo.size=tiny", "--set", "algo.num_envs=4", "--set", "algo.batch_size=4",
        "--set", "algo.batch_length=8", "--set", "algo.learning_starts=32",
        "--set", "algo.record_every=4", "--set", "algo.replay_capacity=512",
        "--set", "env.height=24", "--set", "env.width=32"]


def test_gbx_run_then_eval_on_the_toy_env(tmp_path):
    host = get_host()
    assert "dreamer_v3" in host.registry.algorithms
    cli = build_cli(host)
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(cli, ["run", "--algo", "dreamer_v3", "--env", "toy", "--device",
                                   "cpu", "--steps", "48", "--observer", "print",
                                   "--run-dir", str(run_dir), "--set", "run.eval_every=32",
                                   "--set", "run.eval_episodes=2",
                                   "--set", "run.checkpoint_every=32", *TINY])
    assert res.exit_code == 0, res.output
    assert "loss_model" in res.output
    lines = res.output.splitlines()
    # evaluated during the run (greedy, at the first record past 32 env steps), then at the end
    evals = [line for line in lines if "] eval step=" in line]
    assert len(evals) == 2, res.output
    assert "eval step=32 " in evals[0] and "greedy=True" in evals[0]
    assert "eval step=48 " in evals[1] and "final=True" in evals[1]
    checkpoints = [line.split("checkpoint step=")[1].split()[0] for line in lines
                   if "] checkpoint step=" in line]
    assert checkpoints == ["32", "48"]
    # the scheduled evaluation comes before the checkpoint of the same step
    assert lines.index(evals[0]) < next(i for i, x in enumerate(lines) if "checkpoint step=32" in x)
    res = CliRunner().invoke(cli, ["eval", "--checkpoint", str(run_dir), "--episodes", "2",
                                   "--device", "cpu"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["episodes"] == 2 and 0.0 <= summary["success_rate"] <= 1.0
    assert "random_success_rate" in summary
    res = CliRunner().invoke(cli, ["eval", "--checkpoint", str(run_dir), "--episodes", "2",
                                   "--device", "cpu", "--no-baseline"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert "success_rate" in summary and not any(k.startswith("random_") for k in summary)
