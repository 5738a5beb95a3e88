"""gbx.distributed: record merging, launch command, and real 2-rank gloo runs on the CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gbx import distributed as gdist
from gbx.artifacts import load_checkpoint
from gbx.cli import torchrun_command

HERE = Path(__file__).parent
WORKER = HERE / "dist_worker.py"


# ---------------------------------------------------------------------------- pure helpers
def test_merge_records_sums_counters_and_averages_the_rest() -> None:
    merged = gdist.merge_records([
        {"step": 64, "env_steps": 64, "sps": 100.0, "loss": 1.0, "name": "a",
         "ep_return": torch.tensor(2.0)},
        {"step": 64, "env_steps": 64, "sps": 300.0, "loss": 3.0, "name": "b"},
    ])
    assert merged["step"] == 128 and merged["env_steps"] == 128
    assert merged["sps"] == 400.0 and merged["loss"] == 2.0
    assert merged["name"] == "a"
    assert merged["ep_return"] == 2.0  # only rank 0 finished an episode: its value
    assert merged[gdist.REDUCED_KEY] == 2


def test_merge_records_keeps_counters_integers_and_weights_episode_stats() -> None:
    merged = gdist.merge_records([
        {"opt_steps": 12, "episodes": 3, "episode_return_mean": 1.0, "success_rate": 1.0,
         "action_hist": [1, 2, 3], "done_rate": 0.5},
        {"opt_steps": 12, "episodes": 1, "episode_return_mean": 5.0, "success_rate": 0.0,
         "action_hist": [4, 0, 1], "done_rate": 0.25},
    ])
    assert merged["opt_steps"] == 12 and isinstance(merged["opt_steps"], int)
    assert merged["episodes"] == 4
    assert merged["episode_return_mean"] == 2.0  # (3 * 1 + 1 * 5) / 4
    assert merged["success_rate"] == 0.75
    assert merged["action_hist"] == [5, 2, 4]
    assert merged["done_rate"] == 0.375


def test_single_process_helpers_are_no_ops() -> None:
    model = torch.nn.Linear(2, 1)
    assert gdist.wrap_model(model) is model
    assert gdist.unwrap_model(model) is model
    rec = {"step": 3, "loss": 0.5}
    assert gdist.reduce_record(rec) == rec
    assert gdist.broadcast_state({"a": 1}) == {"a": 1}
    assert gdist.any_rank(True) and not gdist.any_rank(False)
    assert gdist.info() == gdist.DistInfo()


def test_fingerprint_changes_with_parameters() -> None:
    model = torch.nn.Linear(2, 1)
    before = gdist.fingerprint({"m": model})
    with torch.no_grad():
        model.weight.add_(1.0)
    assert gdist.fingerprint({"m": model}) != before


def test_device_for_rank_refuses_a_fixed_gpu_for_several_ranks() -> None:
    assert gdist.device_for_rank("cpu", 1) == torch.device("cpu")
    with pytest.raises(gdist.GbxError, match="cuda:LOCAL_RANK"):
        gdist.device_for_rank("cuda:0", 1)


def test_torchrun_command_drops_gpus_flag() -> None:
    cmd = torchrun_command(["run", "--gpus", "4", "--algo", "ppo", "--gpus=4", "--env", "x"], 4)
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc-per-node=4" in cmd
    assert cmd[cmd.index("gbx") + 1:] == ["run", "--algo", "ppo", "--env", "x"]


# ---------------------------------------------------------------------------- 2 ranks, gloo
def _torchrun(args: list[str], env_extra: dict[str, str], timeout: float = 300):
    env = {**os.environ, "OMP_NUM_THREADS": "1", **env_extra}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node=2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                          check=False)


def _fingerprints(folder: Path) -> list[dict]:
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(2)]


def _dp_run(tmp_path: Path, name: str, *extra: str, mode: str = "ddp", steps: int = 40,
            device: str = "cpu", solve: str = "", tick_rank: str = ""):
    fp = tmp_path / f"fp_{name}"
    records = tmp_path / f"records_{name}.jsonl"
    env = {"GBX_DIST_FINGERPRINT_DIR": str(fp), "GBX_TEST_RECORDS": str(records),
           "GBX_TEST_MODE": mode, "GBX_TEST_SOLVE": solve, "GBX_TEST_TICK_RANK": tick_rank}
    run_dir = tmp_path / "run"
    args = [str(WORKER), "run", "--algo", "dpsgd", "--env", "toy", "--device", device,
            "--observer", "recordfile", *extra]
    args += ["--resume", str(run_dir)] if "--resume" in extra else []
    if "--resume" in extra:
        args.remove("--resume")
        args += ["--steps", str(steps)]
    else:
        args += ["--run-dir", str(run_dir), "--steps", str(steps)]
    proc = _torchrun(args, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = records.read_text().splitlines() if records.exists() else []
    return _fingerprints(fp), [json.loads(line) for line in lines], run_dir


def test_two_ranks_stay_identical_and_only_rank0_writes(tmp_path: Path) -> None:
    fps, records, run_dir = _dp_run(tmp_path, "a")
    assert fps[0]["seed"] != fps[1]["seed"]
    assert fps[0]["fingerprint"] == fps[1]["fingerprint"], fps
    # Records reach rank 0's observer once each, reduced over both ranks.
    assert [r["step"] for r in records] == [8, 16, 24, 32, 40]
    assert all(r["ranks"] == 2 and r["rank_id"] == 0.5 for r in records)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["distributed"]["world_size"] == 2 and meta["distributed"]["backend"] == "gloo"
    ckpt = load_checkpoint(run_dir)
    assert ckpt["step"] == 40
    # Resume: both ranks continue from rank 0's checkpoint and stay identical.
    fps2, records2, _ = _dp_run(tmp_path, "c", "--resume", steps=56)
    assert [r["step"] for r in records2] == [48, 56]
    assert fps2[0]["fingerprint"] == fps2[1]["fingerprint"]
    assert fps2[0]["fingerprint"] != fps[0]["fingerprint"]


@pytest.mark.slow  # two ranks twice (averaged and a control): ~13 s
def test_average_gradients_keeps_ranks_equal_and_control_drifts(tmp_path: Path) -> None:
    fps, _, _ = _dp_run(tmp_path / "avg", "avg", mode="average")
    assert fps[0]["fingerprint"] == fps[1]["fingerprint"]
    # Negative control: without gradient averaging the ranks' models drift apart.
    apart, _, _ = _dp_run(tmp_path / "none", "none", mode="none")
    assert apart[0]["fingerprint"] != apart[1]["fingerprint"]


@pytest.mark.slow  # two ranks: ~7 s
def test_an_evaluation_solved_on_one_rank_stops_every_rank_at_that_step(tmp_path: Path) -> None:
    """run.stop_at_success: rank 1's evaluation at the job's step 24 (its own 12 env
    steps) reaches it, rank 0's does not; both stop after that update, rank 0 writes the
    step-24 checkpoint, and the summary says "solved"."""
    fps, records, run_dir = _dp_run(tmp_path, "s", "--set", "run.eval_every=8",
                                    "--set", "run.stop_at_success=0.5", steps=400,
                                    solve="1:12")
    assert [r["step"] for r in records] == [8, 16, 24]
    assert fps[0]["step"] == fps[1]["step"] == 24
    assert fps[0]["fingerprint"] == fps[1]["fingerprint"]
    assert load_checkpoint(run_dir)["step"] == 24
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "solved" and summary["exit_code"] == 0


@pytest.mark.slow  # two ranks: ~7 s
def test_a_time_limit_reached_on_one_rank_stops_every_rank_at_that_step(tmp_path: Path) -> None:
    """run.max_seconds: rank 1's clock passes it within a few records, rank 0's does not;
    both stop after the same update, and the summary says "time_limit" (exit 0), not a
    signal."""
    fps, records, run_dir = _dp_run(tmp_path, "t", "--set", "run.max_seconds=5", steps=400,
                                    tick_rank="1")
    assert fps[0]["step"] == fps[1]["step"] == records[-1]["step"] < 400
    assert fps[0]["fingerprint"] == fps[1]["fingerprint"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "time_limit" and summary["exit_code"] == 0


SMALL_CNN = "algo.model_options={channels=[8,16,16], hidden=32}"
ALGO_RUNS = {
    "ppo": ("gbx_algo_ppo", 256, ["--set", "algo.num_envs=8", "--set", "algo.rollout_steps=16",
                                  "--set", "algo.minibatches=2", "--set", "algo.update_epochs=2",
                                  "--set", "run.eval_every=0", "--set", SMALL_CNN]),
    "a2c": ("gbx_algo_a2c", 160, ["--set", "algo.num_envs=8", "--set", "algo.update_every=5",
                                  "--set", "algo.log_every=2", "--set", "run.eval_every=0",
                                  "--set", SMALL_CNN]),
    "dreamer_v3": ("gbx_algo_dreamer", 96, [
        "--set", "algo.size=tiny", "--set", "algo.num_envs=4", "--set", "algo.batch_size=4",
        "--set", "algo.batch_length=8", "--set", "algo.learning_starts=32",
        "--set", "algo.record_every=4", "--set", "algo.replay_capacity=512",
        "--set", "env.height=24", "--set", "env.width=32"]),
}


# PPO in the fast suite; A2C and DreamerV3 go through the same launcher in the slow one.
@pytest.mark.parametrize("algo", [pytest.param(a, marks=() if a == "ppo" else pytest.mark.slow)
                                  for a in sorted(ALGO_RUNS)])
def test_algorithm_two_ranks_through_gbx_run(algo: str, tmp_path: Path) -> None:
    """``torchrun --nproc-per-node 2 -m gbx run --algo ALGO --env toy --device cpu``."""
    package, steps, sets = ALGO_RUNS[algo]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"needs the {algo} plugin ({package})")
    fp = tmp_path / "fp"
    run_dir = tmp_path / "run"
    args = ["-m", "gbx", "run", "--algo", algo, "--env", "toy", "--device", "cpu",
            "--steps", str(steps), "--run-dir", str(run_dir), "--observer", "print", *sets]
    proc = _torchrun(args, {"GBX_DIST_FINGERPRINT_DIR": str(fp)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    fps = _fingerprints(fp)
    assert fps[0]["seed"] != fps[1]["seed"]
    assert fps[0]["modules"] and fps[0]["fingerprint"] == fps[1]["fingerprint"], fps
    assert load_checkpoint(run_dir)["step"] == fps[0]["step"] > 0


two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


@pytest.mark.cuda
@two_gpus
def test_two_gpu_ranks_over_nccl(tmp_path: Path) -> None:
    fps, records, run_dir = _dp_run(tmp_path, "gpu", device="cuda")
    assert fps[0]["fingerprint"] == fps[1]["fingerprint"]
    assert [r["step"] for r in records] == [8, 16, 24, 32, 40]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["distributed"]["backend"] == "nccl"


@pytest.mark.cuda
@two_gpus
@pytest.mark.skipif(importlib.util.find_spec("gbx_algo_ppo") is None,
                    reason="needs the PPO plugin (pip install -e plugins/algo_ppo)")
def test_ppo_gbx_run_gpus_2(tmp_path: Path) -> None:
    fp = tmp_path / "fp"
    run_dir = tmp_path / "ppo"
    cmd = [sys.executable, "-m", "gbx", "run", "--gpus", "2", "--algo", "ppo", "--env", "toy",
           "--device", "cuda", "--steps", "65536", "--run-dir", str(run_dir),
           "--observer", "print", "--set", "run.eval_every=0"]
    env = {**os.environ, "GBX_DIST_FINGERPRINT_DIR": str(fp)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    fps = _fingerprints(fp)
    assert fps[0]["fingerprint"] == fps[1]["fingerprint"]
    assert load_checkpoint(run_dir)["step"] == 65536


def test_run_gpus_relaunches_under_torchrun(invoke, monkeypatch) -> None:
    import gbx.cli as gcli

    calls = []

    class Done:
        returncode = 3

    def fake_run(cmd, check):
        calls.append(cmd)
        return Done()

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(gcli, "_ARGV", ["run", "--gpus", "2", "--algo", "counter", "--env", "toy"])
    result = invoke("run", "--gpus", "2", "--algo", "counter", "--env", "toy")
    assert result.exit_code == 3  # the launcher's exit status is the command's
    assert calls == [torchrun_command(["run", "--algo", "counter", "--env", "toy"], 2)]
