"""`gbx.saved.load_trainer`: the one way the trainer of a finished or killed run is rebuilt.

`gbx eval`, `gbx gif` and `gbx run --resume` go through it; a toy PPO run's directory,
with its newest checkpoint damaged, shows all three taking the same newest intact one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("gbx_observers", reason="`gbx gif` comes with the observers plugin")
pytest.importorskip("gbx_algo_ppo", reason="trains a toy PPO run")

import gbx.runner  # noqa: E402
import gbx.saved  # noqa: E402
from gbx.cli import build_cli  # noqa: E402
from gbx.plugins import load_plugins  # noqa: E402

HOST = load_plugins()
SMALL = ["--set", "algo.num_envs=8", "--set", "algo.rollout_steps=8", "--set",
         "algo.minibatches=2", "--set", "algo.model_options={channels=[8,16,16], hidden=16}"]


def _toy_run(run_dir: Path) -> None:
    """128 env steps, a checkpoint every 64: ckpt 64 and ckpt 128."""
    res = CliRunner().invoke(build_cli(HOST), [
        "run", "--algo", "ppo", "--env", "toy", "--device", "cpu", "--steps", "128",
        "--run-dir", str(run_dir), "--observer", "print", "--set", "run.checkpoint_every=64",
        "--set", "run.final_eval_episodes=0", *SMALL])
    assert res.exit_code == 0, res.output


def test_eval_gif_and_resume_of_a_toy_run_go_through_load_trainer(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    _toy_run(run_dir)
    written = sorted(p.name for p in run_dir.rglob("*"))
    loaded = gbx.saved.load_trainer(run_dir, HOST, seed=5)
    assert loaded.checkpoint.path.name == "ckpt_000000000128.pt"
    assert loaded.checkpoint.step == 128 and loaded.trainer.env_steps == 128
    assert loaded.config.run.algo == "ppo" and loaded.config.run.seed == 5
    assert loaded.trainer.evaluate(2)["episodes"] == 2
    assert sorted(p.name for p in run_dir.rglob("*")) == written  # it wrote nothing

    newest = run_dir / "checkpoints" / "ckpt_000000000128.pt"
    newest.write_bytes(newest.read_bytes()[:-10])  # damaged: 64 is the newest intact one
    calls: list[str] = []
    real = gbx.saved.load_trainer

    def spy(source, host, **kwargs):
        loaded = real(source, host, **kwargs)
        calls.append(loaded.checkpoint.path.name)
        return loaded

    monkeypatch.setattr(gbx.saved, "load_trainer", spy)
    monkeypatch.setattr(gbx.runner, "load_trainer", spy)
    cli = build_cli(HOST)
    res = CliRunner().invoke(cli, ["eval", "--checkpoint", str(run_dir), "--episodes", "2",
                                   "--device", "cpu", "--quiet"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["checkpoint"].endswith("ckpt_000000000064.pt") and summary["step"] == 64
    assert "falling back to the previous checkpoint ckpt_000000000064.pt" in res.stderr
    out = tmp_path / "gif"
    res = CliRunner().invoke(cli, ["gif", "--checkpoint", str(run_dir), "--out", str(out),
                                   "--steps", "3", "--quiet"])
    assert res.exit_code == 0, res.output
    meta = json.loads((out / "meta.json").read_text())
    assert meta["checkpoint_file"].endswith("ckpt_000000000064.pt") and meta["env_steps"] == 64
    assert (out / "rollout.gif").read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    res = CliRunner().invoke(cli, ["run", "--resume", str(run_dir), "--steps", "192"])
    assert res.exit_code == 0, res.output
    assert calls == ["ckpt_000000000064.pt"] * 3
