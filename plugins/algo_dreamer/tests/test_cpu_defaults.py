"""The README's DreamerV3 command with the CPU defaults learns the toy task: greedy success
at least 0.9 and above the random baseline in the run's own final evaluation, with its
evaluation records, rollout GIF and a checkpoint that does not hold the replay; for seed 0
(the README's command as written) and seed 1.

Slow (minutes each on two cores); wall time, resident memory and checkpoint size are
recorded in docs/benchmarks.md (with seed 2), not asserted here."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

# the README's command (with --run-dir); keep the two in step
README_COMMAND = ["run", "--algo", "dreamer_v3", "--env", "toy", "--device", "cpu",
                  "--steps", "4096", "--observer", "jsonl,gif"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_the_readme_command_learns_the_toy_task_on_the_cpu(seed: int, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    start = time.perf_counter()
    seeded = ["--seed", str(seed)] if seed else []  # seed 0: the command as the README has it
    proc = subprocess.run([sys.executable, "-m", "gbx", *README_COMMAND, *seeded, "--run-dir",
                           str(run_dir)], capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in (run_dir / "train_log.jsonl").open()]
    evals = [r["eval"] for r in records if "eval" in r]
    final = evals[-1]
    assert final["final"] and final["episodes"] == 8 and final["greedy"]
    gifs = list((run_dir / "media").glob("eval_*/rollout.gif"))
    assert gifs and gifs[0].stat().st_size > 0
    config = json.loads((run_dir / "config.json").read_text())["algo"]
    assert (config["size"], config["gamma"], config["cpu_threads"]) == ("tiny", 0.95, 1)
    assert not config["checkpoint_replay"]
    checkpoints = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))
    size = checkpoints[-1].stat().st_size
    assert size < 16 * 2**20  # models and optimisers only: no replay
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    assert rss < 2 * 2**30
    print(f"\ndreamer_v3 CPU defaults, seed {seed}: {seconds:.0f} s, max RSS "
          f"{rss / 2**20:.0f} MiB, checkpoint {size / 2**20:.2f} MiB, greedy success "
          f"{final['success_rate']:.2f} (random {final['random_success_rate']:.2f})")
    assert final["success_rate"] >= 0.9, final
    assert final["success_rate"] > final["random_success_rate"], final
