"""PPO through the core run loop: train, checkpoint, then evaluate the checkpoint."""

from __future__ import annotations

from pathlib import Path

from gbx.config import build_config
from gbx.plugins import load_plugins
from gbx.runner import evaluate_checkpoint, execute


def test_train_then_eval_checkpoint(tmp_path: Path) -> None:
    host = load_plugins(environ={"GBX_PLUGINS": "ppo"})
    run_dir = tmp_path / "run"
    config = build_config(
        host.registry,
        flags={"algo": "ppo", "env": "toy", "device": "cpu", "steps": 3 * 128,
               "run_dir": str(run_dir), "observers": ("print",)},
        overrides=["algo.num_envs=8", "algo.rollout_steps=16", "algo.minibatches=2",
                   "run.checkpoint_every=256",
                   "algo.model_options={channels=[8,16,16], hidden=16}"],
    )
    summary = execute(config, host)
    assert summary["status"] == "completed" and summary["step"] == 3 * 128
    names = sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt_*.pt"))
    assert names == ["ckpt_000000000256.pt", "ckpt_000000000384.pt"]  # periodic + final
    out = evaluate_checkpoint(run_dir, host, episodes=6, greedy=False)
    assert out["step"] == 384 and out["episodes"] == 6 and out["greedy"] is False
    for key in ("success_rate", "mean_return", "random_success_rate", "random_mean_return"):
        assert isinstance(out[key], float)
    assert out["checkpoint"].endswith("ckpt_000000000384.pt")
