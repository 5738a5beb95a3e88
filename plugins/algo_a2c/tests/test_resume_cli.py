"""Kill a CLI training run with SIGKILL after a checkpoint, resume it, compare the records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WINDOW = 8 * 5  # num_envs x update_every
ARGS = [
    "--algo", "a2c", "--env", "toy", "--device", "cpu", "--seed", "3", "--observer", "print",
    "--steps", str(12 * WINDOW),
    "--set", "algo.num_envs=8", "--set", "algo.update_every=5", "--set", "algo.log_every=2",
    "--set", "algo.checkpoint_every=4",
    "--set", "algo.model_options={channels=[8,16,16], hidden=32}",
    "--set", "env.max_steps=10",
]
# Fields that legitimately differ between two runs of the same computation.
VOLATILE = {"sps", "ups", "wall_time_s"}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(GBX_PLUGINS="a2c", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def _gbx(*args: str) -> list[str]:
    return [sys.executable, "-m", "gbx", *args]


def _records(stdout: str) -> dict[int, str]:
    """Train records printed by the ``print`` observer, keyed by step, volatile fields dropped."""
    out: dict[int, str] = {}
    for line in stdout.splitlines():
        parts = line.split("] ", 1)
        if len(parts) != 2 or not parts[1].startswith("step="):
            continue
        fields = dict(kv.split("=", 1) for kv in parts[1].split(" ") if "=" in kv)
        out[int(fields["step"])] = " ".join(
            f"{k}={v}" for k, v in fields.items() if k not in VOLATILE
        )
    return out


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path: Path) -> None:
    full = subprocess.run(
        _gbx("run", *ARGS, "--run-dir", str(tmp_path / "full")),
        capture_output=True, text=True, env=_env(), timeout=300, check=True,
    )
    reference = _records(full.stdout)
    assert len(reference) == 6

    killed_dir = tmp_path / "killed"
    proc = subprocess.Popen(
        _gbx("run", *ARGS, "--run-dir", str(killed_dir)),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env(),
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        if " checkpoint step=" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    latest = (killed_dir / "checkpoints" / "latest").read_text().strip()
    ckpt_step = int(latest.removeprefix("ckpt_").removesuffix(".pt"))
    assert 0 < ckpt_step < 12 * WINDOW

    resumed = subprocess.run(
        _gbx("run", "--resume", str(killed_dir), "--observer", "print"),
        capture_output=True, text=True, env=_env(), timeout=300, check=True,
    )
    after = _records(resumed.stdout)
    expected = {s: r for s, r in reference.items() if s > ckpt_step}
    assert after and set(after) == set(expected)
    assert after == expected
