"""The PPO trainer end to end on the toy env, through an in-memory run context."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from gbx import memory
from gbx.memory import MemoryBudgetError
from gbx.testing import (
    InMemoryRunContext,
    comparable,
    count_host_reads,
    no_cuda_syncs,
    train_and_resume,
)
from gbx.toy import ToyConfig
from gbx_algo_ppo import losses
from gbx_algo_ppo.config import PPOConfig
from gbx_algo_ppo.trainer import PPOTrainer
from gbx_toolkit.guard import NonFiniteError

SMALL = {"channels": (8, 16, 16), "hidden": 32}


def small_config(**over: object) -> PPOConfig:
    base: dict[str, object] = dict(
        num_envs=8, rollout_steps=16, minibatches=2, update_epochs=2, lr=1e-3,
        model_options=SMALL,
    )
    base.update(over)
    return PPOConfig(**base)  # type: ignore[arg-type]


def test_one_update_changes_parameters_and_records_everything() -> None:
    cfg = small_config()
    ctx = InMemoryRunContext(cfg, steps=cfg.batch_size, env_config=ToyConfig(max_steps=6))
    trainer = PPOTrainer(cfg, ctx)
    trainer._setup_training()
    before = [p.detach().clone() for p in trainer.model_or_fail().parameters()]
    trainer.train()
    after = list(trainer.model_or_fail().parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    assert len(ctx.records) == 1
    rec = ctx.records[0]
    assert rec["env_steps"] == cfg.batch_size and rec["updates"] == 1
    assert rec["opt_steps"] == cfg.update_epochs * cfg.minibatches
    for key in (
        "ups", "loss_policy", "loss_value", "loss_entropy", "entropy_mean", "approx_kl",
        "clipfrac", "explained_variance", "value_mean", "value_std", "reward_mean",
        "done_rate", "trunc_rate", "reset_rate", "dist_p10", "dist_p50", "dist_p90",
    ):
        assert isinstance(rec[key], float), key
    assert sum(rec["action_hist"]) == cfg.batch_size and len(rec["action_hist"]) == 7
    # max_steps=6 over 16 steps: every env was truncated or finished at least twice.
    assert rec["reset_rate"] >= 2 / 16
    assert rec["trunc_overflow"] == 0.0
    assert ctx.checkpoints == []  # the trainer never checkpoints by itself


def test_the_runs_schedule_checkpoints_and_evaluates_between_updates() -> None:
    cfg = small_config()
    ctx = InMemoryRunContext(cfg, steps=3 * cfg.batch_size, checkpoint_every=2 * cfg.batch_size,
                             eval_every=cfg.batch_size + 1, eval_episodes=2)
    ctx.run(PPOTrainer(cfg, ctx))
    # at the record past each multiple, and the final checkpoint when training ends
    assert [s for s, _ in ctx.checkpoints] == [2 * cfg.batch_size, 3 * cfg.batch_size]
    assert ctx.checkpoints[-1][1]["counters"]["updates"] == 3
    assert [e["env_steps"] for e in ctx.evals] == [2 * cfg.batch_size, 3 * cfg.batch_size]
    assert ctx.evals[0]["episodes"] == 2 and ctx.evals[0]["greedy"] is True


def test_truncated_steps_bootstrap_from_final_obs_value() -> None:
    cfg = small_config()
    ctx = InMemoryRunContext(cfg, steps=cfg.batch_size, env_config=ToyConfig(max_steps=6))
    trainer = PPOTrainer(cfg, ctx)
    trainer._setup_training()
    trainer._collect()
    buf = trainer.buffer
    assert buf is not None
    trainer._bootstrap()
    truncs = buf.truncs.nonzero().tolist()
    assert truncs, "the rollout must contain truncations"
    count = int(buf.truncated.count)
    assert count == len(truncs)
    with torch.no_grad():
        _, v = trainer.model_or_fail()(buf.truncated.obs[:count])
    pos = buf.truncated.positions[:count].tolist()
    assert sorted(pos) == sorted(t * cfg.num_envs + n for t, n in truncs)
    flat = buf.trunc_values.flatten()
    torch.testing.assert_close(flat[buf.truncated.positions[:count]], v)
    # The final observation differs from the (reset) observation stored at the next step.
    t, n = truncs[0]
    if t + 1 < cfg.rollout_steps:
        slot = pos.index(t * cfg.num_envs + n)
        assert not torch.equal(buf.truncated.obs[slot], buf.obs[t + 1, n])


def test_learns_toy_well_above_random() -> None:
    torch.manual_seed(0)
    cfg = small_config(
        num_envs=32, rollout_steps=32, minibatches=4, update_epochs=4, lr=1e-3,
        model_options={"channels": (16, 32, 32), "hidden": 64},
    )
    ctx = InMemoryRunContext(cfg, steps=6 * cfg.batch_size)
    trainer = PPOTrainer(cfg, ctx)
    trainer.train()
    assert len(ctx.records) == 6
    out = trainer.evaluate(64, greedy=True)
    assert out["episodes"] == 64
    assert out["random_success_rate"] < 0.7
    assert out["success_rate"] >= 0.9
    assert out["success_rate"] >= out["random_success_rate"] + 0.25
    assert out["median_steps_to_goal"] < out["random_median_steps_to_goal"]
    again = trainer.evaluate(64, greedy=True)  # same eval seeds: same episodes
    assert again == out
    sampled = trainer.evaluate(16, greedy=False)
    assert sampled["greedy"] is False and 0.0 <= sampled["success_rate"] <= 1.0
    # No baseline asked for a new episode count: no random_* keys; a cached one is kept.
    bare = trainer.evaluate(8, greedy=True, baseline=False)
    assert bare["episodes"] == 8 and not any(k.startswith("random_") for k in bare)
    cached = trainer.evaluate(64, greedy=True, baseline=False)
    assert cached == out
    actions = trainer.act(torch.zeros(3, 1, 72, 80, dtype=torch.uint8), greedy=True)
    assert actions.dtype == torch.int64 and actions.shape == (3,)


def test_nan_in_loss_stops_with_trace_id(monkeypatch: pytest.MonkeyPatch) -> None:
    real = losses.value_loss

    def poisoned(*args: object, **kwargs: object) -> torch.Tensor:
        return real(*args, **kwargs) * math.nan  # type: ignore[arg-type]

    monkeypatch.setattr(losses, "value_loss", poisoned)
    cfg = small_config()
    ctx = InMemoryRunContext(cfg, steps=4 * cfg.batch_size)
    trainer = PPOTrainer(cfg, ctx)
    with pytest.raises(NonFiniteError) as info:
        trainer.train()
    err = info.value
    assert "loss_value" in err.offending and err.trace_id in str(err)
    assert err.step == cfg.batch_size
    assert {"rewards", "advantages", "returns", "values", "obs"} <= set(err.batch_stats)
    assert err.batch_stats["rewards"]["numel"] == cfg.batch_size
    assert ctx.records == []  # the failing update is not recorded


def test_rollout_has_no_host_reads_and_update_reads_twice() -> None:
    cfg = small_config()
    ctx = InMemoryRunContext(cfg, steps=2 * cfg.batch_size, env_config=ToyConfig(max_steps=5))
    trainer = PPOTrainer(cfg, ctx)
    trainer._setup_training()
    with count_host_reads(forbid=True):
        trainer._collect()
    with count_host_reads(forbid=False) as calls:
        trainer.train()  # one more update: collect + update + record
    # The guard's flag and the metrics record: one read each.
    assert sorted(calls) == ["item", "tolist"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_cuda_update_has_no_syncs(cuda_graphs: bool) -> None:
    cfg = small_config(cuda_graphs=cuda_graphs)
    ctx = InMemoryRunContext(cfg, steps=2 * cfg.batch_size, device="cuda")
    trainer = PPOTrainer(cfg, ctx)
    trainer.train()  # two updates warm up allocator, kernels and Adam's state
    with no_cuda_syncs():
        trainer._collect()
        guard, batch_stats = trainer._optimise()
    guard.check(batch_stats)  # the update's one intended read
    assert len(trainer.metrics.summary()) > 5  # type: ignore[union-attr]


def test_resume_from_state_dict_reproduces_records() -> None:
    cfg = small_config(norm_reward=True)
    env_cfg = ToyConfig(max_steps=10)
    full, resumed_ctx = train_and_resume(
        PPOTrainer, cfg, steps=4 * cfg.batch_size, env_config=env_cfg, seed=7,
        checkpoint_every=2 * cfg.batch_size,
    )
    assert len(full.records) == 4
    assert [s for s, _ in full.checkpoints] == [2 * cfg.batch_size, 4 * cfg.batch_size]
    step, _state = full.checkpoints[0]
    assert step == 2 * cfg.batch_size
    assert [comparable(r) for r in resumed_ctx.records] == [
        comparable(r) for r in full.records[2:]
    ]


def test_refuses_a_rollout_that_does_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1_000_000)
    cfg = small_config()
    trainer = PPOTrainer(cfg, InMemoryRunContext(cfg, steps=cfg.batch_size))
    with pytest.raises(MemoryBudgetError, match="lower algo.num_envs") as info:
        trainer.train()
    assert "\n" not in str(info.value)


def test_nan_through_the_run_loop_writes_a_failure_bundle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gbx.testing import failure_bundle_of_run

    monkeypatch.setattr(losses, "value_loss", lambda *a, **k: torch.tensor(math.nan))
    bundle = failure_bundle_of_run(
        "ppo", tmp_path / "run", steps=256,
        overrides=["algo.num_envs=8", "algo.rollout_steps=16", "algo.minibatches=2",
                   "algo.model_options={channels=[8,16,16], hidden=32}"],
    )
    trace_id = bundle.name
    text = (bundle / "error.txt").read_text()
    assert "NonFiniteError" in text and "loss_value" in text
    assert "batch statistics:" in text and '"advantages"' in text
    actions = json.loads((bundle / "actions.json").read_text())
    assert len(actions) == 16 and all(0 <= a < 7 for a in actions)  # one env's last rollout
    details = json.loads((bundle / "details.json").read_text())
    assert details["trace_id"] == trace_id and details["offending"]
    assert "advantages" in details["batch_stats"]
