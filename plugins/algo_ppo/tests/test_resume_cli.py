"""Kill a CLI training run with SIGKILL after a checkpoint, resume it, compare the records."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbx.testing import check_sigkill_resume

TOTAL = 6 * 8 * 16  # six updates of num_envs x rollout_steps
ARGS = [
    "--algo", "ppo", "--env", "toy", "--device", "cpu", "--seed", "3", "--observer", "print",
    "--steps", str(TOTAL),
    "--set", "algo.num_envs=8", "--set", "algo.rollout_steps=16", "--set", "algo.minibatches=2",
    "--set", "algo.update_epochs=2", "--set", "run.checkpoint_every=256",
    "--set", "algo.model_options={channels=[8,16,16], hidden=32}",
    "--set", "env.max_steps=10",
]


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path: Path) -> None:
    check_sigkill_resume(ARGS, tmp_path, plugins="ppo", total_steps=TOTAL, expected_records=6)
