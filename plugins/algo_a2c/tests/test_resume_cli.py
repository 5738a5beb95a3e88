"""Kill a CLI training run with SIGKILL after a checkpoint, resume it, compare the records."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbx.testing import check_sigkill_resume

WINDOW = 8 * 5  # num_envs x update_every
TOTAL = 12 * WINDOW
ARGS = [
    "--algo", "a2c", "--env", "toy", "--device", "cpu", "--seed", "3", "--observer", "print",
    "--steps", str(TOTAL),
    "--set", "algo.num_envs=8", "--set", "algo.update_every=5", "--set", "algo.log_every=2",
    "--set", "run.checkpoint_every=160",
    "--set", "run.eval_every=200", "--set", "run.eval_episodes=2",
    "--set", "algo.model_options={channels=[8,16,16], hidden=32}",
    "--set", "env.max_steps=10",
]


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path: Path) -> None:
    check_sigkill_resume(ARGS, tmp_path, plugins="a2c", total_steps=TOTAL, expected_records=6)
