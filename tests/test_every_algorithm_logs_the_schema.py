"""Real training runs of every first-party algorithm write logs the schema accepts.

Tiny configurations on the toy env; an algorithm whose plugin is not installed is
skipped. The log is read back with `gbx log validate`, as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gbx_observers", reason="the observers plugin writes and validates logs")

SETTINGS = {
    "ppo": ["algo.num_envs=8", "algo.rollout_steps=16", "algo.minibatches=2",
            "algo.eval_every=2", "algo.eval_episodes=2",
            "algo.model_options={channels=[8,16,16], hidden=32}"],
    "a2c": ["algo.num_envs=8", "algo.eval_every=8", "algo.eval_episodes=2", "algo.log_every=4",
            "algo.model_options={channels=[8,16,16], hidden=32}"],
    "dreamer_v3": ["algo.size=tiny", "algo.num_envs=4", "algo.batch_size=4",
                   "algo.batch_length=8", "algo.train_ratio=16.0", "algo.replay_capacity=512",
                   "algo.learning_starts=32", "algo.record_every=8"],
}


@pytest.mark.parametrize("algo", sorted(SETTINGS))
def test_log_of_a_real_run_validates(algo: str, tmp_path: Path) -> None:
    from gbx.plugins import load_plugins

    if algo not in load_plugins().registry.algorithms:
        pytest.skip(f"algorithm {algo} is not installed")
    run_dir = tmp_path / algo
    cmd = [sys.executable, "-m", "gbx", "run", "--algo", algo, "--env", "toy", "--device",
           "cpu", "--steps", "256", "--run-dir", str(run_dir), "--observer", "jsonl"]
    for item in SETTINGS[algo]:
        cmd += ["--set", item]
    # One torch thread: on a shared 2-core machine more threads oversubscribe it many times.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    log = run_dir / "train_log.jsonl"
    check = subprocess.run([sys.executable, "-m", "gbx", "log", "validate", str(log)],
                           capture_output=True, text=True, timeout=60)
    summary = json.loads(check.stdout)
    assert check.returncode == 0 and summary["ok"], summary
    assert summary["records"] >= 1 and summary["errors"] == 0
    meta = json.loads(log.read_text().splitlines()[0])["meta"]
    assert meta["config"]["run"]["algo"] == algo and meta["env"]["env"] == "toy"
    _check_state_round_trips(run_dir)


def _check_state_round_trips(run_dir: Path) -> None:
    """The final checkpoint (safe format) restores into a fresh trainer, which saves it back."""
    import torch

    from gbx import checkpoint_file
    from gbx.artifacts import load_checkpoint
    from gbx.config import from_dict
    from gbx.plugins import load_plugins
    from gbx.runner import Run, restore_trainer

    host = load_plugins()
    payload = load_checkpoint(run_dir)
    config = from_dict(payload["config"], host.registry)
    run = Run(config, host, run_dir=run_dir, run_id="check", device=torch.device("cpu"))
    trainer = host.registry.algorithms[config.run.algo].trainer_cls(config.algo, run)
    restore_trainer(trainer, payload["state"], str(run_dir))
    again = checkpoint_file.loads(checkpoint_file.dumps({**payload, "state": trainer.state_dict()}))
    assert again["state"].keys() == payload["state"].keys()
