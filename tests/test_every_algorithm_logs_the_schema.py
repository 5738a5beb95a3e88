"""Real training runs of every first-party algorithm write logs the schema accepts.

Tiny configurations on the toy env; an algorithm whose plugin is not installed is
skipped. The log is read back with `gbx log validate`, as a user would, and every line
against the core's record schema (`gbx.records`): the common fields the run loop stamps
(`sps` included, which no algorithm computes) are on every record and evaluation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gbx_observers", reason="the observers plugin writes and validates logs")

# The run's schedule evaluates during every run (every 128 env steps), so eval lines of
# every algorithm are validated too.
SCHEDULE = ["run.eval_every=128", "run.eval_episodes=2"]
SETTINGS = {
    "ppo": ["algo.num_envs=8", "algo.rollout_steps=16", "algo.minibatches=2",
            "algo.model_options={channels=[8,16,16], hidden=32}"],
    "a2c": ["algo.num_envs=8", "algo.log_every=4",
            "algo.model_options={channels=[8,16,16], hidden=32}"],
    "dreamer_v3": ["algo.size=tiny", "algo.num_envs=4", "algo.batch_size=4",
                   "algo.batch_length=8", "algo.train_ratio=4.0", "algo.replay_capacity=512",
                   "algo.learning_starts=32", "algo.record_every=8"],
}


# DreamerV3's run takes ~8 s on two cores: it runs in the slow suite, the others in both.
@pytest.mark.parametrize("algo", [pytest.param(a, marks=pytest.mark.slow) if a == "dreamer_v3"
                                  else a for a in sorted(SETTINGS)])
def test_log_of_a_real_run_validates(algo: str, tmp_path: Path) -> None:
    from gbx.plugins import load_plugins

    if algo not in load_plugins().registry.algorithms:
        pytest.skip(f"algorithm {algo} is not installed")
    run_dir = tmp_path / algo
    cmd = [sys.executable, "-m", "gbx", "run", "--algo", algo, "--env", "toy", "--device",
           "cpu", "--steps", "256", "--run-dir", str(run_dir), "--observer", "jsonl"]
    for item in (*SETTINGS[algo], *SCHEDULE):
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
    assert summary["evals"] == 2  # the scheduled one at 128 env steps and the final one
    meta = json.loads(log.read_text().splitlines()[0])["meta"]
    assert meta["config"]["run"]["algo"] == algo and meta["env"]["env"] == "toy"
    _check_common_fields(log)
    _check_state_round_trips(run_dir)


def _check_common_fields(log: Path) -> None:
    from gbx.records import COMMON_FIELDS, SPS_FIELD, EvalLine, TrainRecord, parse

    lines = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    records = [x for x in lines if x.get("kind") == "train"]
    evals = [x["eval"] for x in lines if "eval" in x]
    assert records and len(records) + len(evals) == len(lines)
    for rec in records:
        parse(TrainRecord, rec)
        assert set(COMMON_FIELDS) <= set(rec) and rec[SPS_FIELD] > 0
    for ev in evals:
        parse(EvalLine, ev)
        assert set(COMMON_FIELDS) <= set(ev) and ev["kind"] == "eval"
    seqs = [x["seq"] for x in (*records, *evals)]
    assert sorted(seqs) == list(range(1, len(seqs) + 1))


def _check_state_round_trips(run_dir: Path) -> None:
    """The final checkpoint (safe format) restores into a fresh trainer, which saves it back."""
    import torch

    from gbx import checkpoint_file
    from gbx.plugins import load_plugins
    from gbx.saved import load_trainer

    loaded = load_trainer(run_dir, load_plugins(), device="cpu")
    trainer, payload = loaded.trainer, loaded.checkpoint.payload
    assert isinstance(payload["state"], dict) and loaded.run.device == torch.device("cpu")
    again = checkpoint_file.loads(checkpoint_file.dumps({**payload, "state": trainer.state_dict()}))
    assert again["state"].keys() == payload["state"].keys()
