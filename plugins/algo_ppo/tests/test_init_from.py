"""`gbx run --init-from`: a new run starts from another run's policy weights only."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gbx.artifacts import latest_checkpoint, load_checkpoint
from gbx.checkpoint_file import CheckpointError
from gbx.config import build_config
from gbx.errors import GbxError
from gbx.plugins import load_plugins
from gbx.runner import prepare
from gbx.saved import init_from_checkpoint
from gbx.testing import InMemoryRunContext
from gbx_algo_ppo.config import PPOConfig
from gbx_algo_ppo.trainer import PPOTrainer

SETS = ["algo.num_envs=8", "algo.rollout_steps=16", "algo.minibatches=2",
        "algo.model_options={channels=[8,16,16], hidden=16}"]


def _config(host, run_dir: Path, *extra: str, steps: int = 256):
    return build_config(host.registry, flags={"algo": "ppo", "env": "toy", "device": "cpu",
                                              "steps": steps, "run_dir": str(run_dir),
                                              "observers": ("print",)},
                        overrides=[*SETS, *extra])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    from gbx.runner import execute

    host = load_plugins(environ={"GBX_PLUGINS": "ppo"})
    run_dir = tmp_path_factory.mktemp("stage1") / "run"
    execute(_config(host, run_dir), host)
    return run_dir


def test_init_from_loads_weights_but_not_counters_or_optimiser(trained: Path, tmp_path) -> None:
    host = load_plugins(environ={"GBX_PLUGINS": "ppo"})
    config = _config(host, tmp_path / "next", f"run.init_from={trained}")
    run, checkpoint = prepare(config, host)
    assert checkpoint is None and run.config.run.init_from == str(trained)
    trainer = PPOTrainer(run.config.algo, run)
    source = init_from_checkpoint(trainer, "ppo", trained)
    saved = load_checkpoint(latest_checkpoint(trained))["state"]
    assert source == latest_checkpoint(trained)
    weights = trainer.model_or_fail().state_dict()
    assert saved["counters"]["env_steps"] == 256
    assert all(torch.equal(weights[k], saved["model"][k]) for k in saved["model"])
    assert trainer.env_steps == 0 and trainer.opt_steps == 0
    assert trainer._optimizer().state_dict()["state"] == {}  # a fresh optimiser
    assert saved["optimizer"]["state"]  # (the saved one had moments)


def test_init_from_a_run_of_another_model_is_one_line(trained: Path, tmp_path) -> None:
    ctx = InMemoryRunContext(PPOConfig(num_envs=8, rollout_steps=16))  # default model size
    with pytest.raises(CheckpointError) as err:
        init_from_checkpoint(PPOTrainer(ctx.config.algo, ctx), "ppo", trained)
    assert "\n" not in str(err.value) and "algo.model" in str(err.value)
    with pytest.raises(GbxError, match="a ppo checkpoint and this run trains a2c"):
        init_from_checkpoint(PPOTrainer(ctx.config.algo, ctx), "a2c", trained)
    with pytest.raises(GbxError, match="no checkpoint under"):
        init_from_checkpoint(PPOTrainer(ctx.config.algo, ctx), "ppo", tmp_path)


def test_a_run_with_init_from_trains_and_records_it(trained: Path, tmp_path) -> None:
    from gbx.runner import execute

    host = load_plugins(environ={"GBX_PLUGINS": "ppo"})
    run_dir = tmp_path / "next"
    summary = execute(_config(host, run_dir, f"run.init_from={trained}", steps=128), host)
    assert summary["status"] == "completed" and summary["step"] == 128  # its own counters
    assert (run_dir / "config.json").read_text().count(str(trained)) == 1
