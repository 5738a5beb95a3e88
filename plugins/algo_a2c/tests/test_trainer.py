"""The A2C trainer end to end on the toy env, through an in-memory run context."""

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
from gbx.toy import ToyConfig, make_toy_env
from gbx_algo_a2c import returns as rl
from gbx_algo_a2c.config import A2CConfig
from gbx_algo_a2c.trainer import A2CTrainer
from gbx_algo_a2c.window import estimate_window_bytes
from gbx_toolkit.guard import NonFiniteError

SMALL = {"channels": (8, 16, 16), "hidden": 32}


def small_config(**over: object) -> A2CConfig:
    base: dict[str, object] = dict(
        num_envs=8, update_every=5, lr=1e-3, log_every=2,
        model_options=SMALL,
    )
    base.update(over)
    return A2CConfig(**base)  # type: ignore[arg-type]


def test_records_carry_the_shared_schema() -> None:
    cfg = small_config(grad_accum=2)
    # Episodes of at most 6 steps: at most one truncation per env per 5-step window,
    # which the side buffer always holds.
    ctx = InMemoryRunContext(cfg, steps=4 * cfg.batch_size, env_config=ToyConfig(max_steps=6))
    trainer = A2CTrainer(cfg, ctx)
    trainer._setup_training()
    before = [p.detach().clone() for p in trainer.model_or_fail().parameters()]
    trainer.train()
    after = list(trainer.model_or_fail().parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    assert [r["opt_steps"] for r in ctx.records] == [2, 4]
    rec = ctx.records[-1]
    assert rec["env_steps"] == rec["step"] == 4 * cfg.batch_size
    for key in (
        "ups", "reward_mean", "done_rate", "trunc_rate", "reset_rate", "entropy_mean",
        "value_mean", "value_std", "loss_policy", "loss_value", "loss_entropy",
        "explained_variance", "grad_norm", "dist_p10", "dist_p50", "dist_p90",
    ):
        assert isinstance(rec[key], float), key
    assert "nonfinite" not in rec
    # Two windows per record: every action of both is in the histogram.
    assert sum(rec["action_hist"]) == 2 * cfg.batch_size and len(rec["action_hist"]) == 7
    assert rec["trunc_rate"] > 0 and rec["trunc_overflow"] == 0.0


class _PercentileToy:
    """The toy env reporting only distance percentiles, as pixel goal envs can."""

    def __init__(self, env: object) -> None:
        self._env = env

    def __getattr__(self, name: str) -> object:
        return getattr(self._env, name)

    def step(self, actions: torch.Tensor) -> tuple:
        obs, reward, done, trunc, info = self._env.step(actions)  # type: ignore[attr-defined]
        q = torch.quantile(info.pop("dist"), torch.tensor([0.1, 0.5, 0.9]))
        info.update(dist_p10=q[0], dist_p50=q[1], dist_p90=q[2])
        return obs, reward, done, trunc, info


def test_env_reported_percentiles_reach_the_record() -> None:
    cfg = small_config()

    ctx = InMemoryRunContext(
        cfg, steps=2 * cfg.batch_size,
        env_factory=lambda n, seed: _PercentileToy(make_toy_env(ToyConfig(), n, "cpu", seed)))
    A2CTrainer(cfg, ctx).train()
    rec = ctx.records[0]
    assert 0.0 <= rec["dist_p10"] <= rec["dist_p50"] <= rec["dist_p90"] <= 1.0


def test_budget_ending_inside_a_logging_window_still_records() -> None:
    cfg = small_config(log_every=4)
    ctx = InMemoryRunContext(cfg, steps=6 * cfg.batch_size)
    A2CTrainer(cfg, ctx).train()
    assert [r["opt_steps"] for r in ctx.records] == [4, 6]


def test_truncated_steps_bootstrap_from_final_obs_value() -> None:
    # n_step=1 makes each target r + gamma * V(next state): checkable per step.
    cfg = small_config(n_step=1, gamma=0.9)
    ctx = InMemoryRunContext(cfg, steps=cfg.batch_size, env_config=ToyConfig(max_steps=3))
    trainer = A2CTrainer(cfg, ctx)
    trainer._setup_training()
    trainer._collect()
    win = trainer.window
    assert win is not None
    _, returns = trainer.targets()
    truncs = (win.truncs & ~win.dones).nonzero().tolist()
    assert truncs, "the window must contain truncations"
    side = win.truncated
    count = int(side.count)
    assert count == int(win.truncs.sum())
    with torch.no_grad():
        _, v_final = trainer.model_or_fail()(side.obs[:count])
    positions = side.positions[:count].tolist()
    differs = 0
    for t, n in truncs:
        slot = positions.index(t * cfg.num_envs + n)
        expected = win.rewards[t, n] + 0.9 * v_final[slot]
        torch.testing.assert_close(returns[t, n], expected)
        if t + 1 < cfg.update_every:
            differs += not torch.equal(side.obs[slot], win.obs[t + 1, n])
    # The final observations are not the reset observations the envs continued from
    # (a reset may land on the same cell by chance, so not for every env).
    assert differs > 0


def test_learns_toy_well_above_random() -> None:
    torch.manual_seed(0)
    # 64 envs x 100 windows (32,000 env steps) learn the toy for every seed tried (0-3);
    # half as many envs sometimes leave a greedy policy stuck on a no-op action.
    cfg = small_config(num_envs=64, log_every=10, lr=1e-3)
    ctx = InMemoryRunContext(cfg, steps=100 * cfg.batch_size)
    trainer = A2CTrainer(cfg, ctx)
    trainer.train()
    assert len(ctx.records) == 10
    out = trainer.evaluate(64, greedy=True)
    assert out["episodes"] == 64
    assert out["random_success_rate"] < 0.7
    assert out["success_rate"] >= 0.9
    assert out["success_rate"] >= out["random_success_rate"] + 0.25
    assert out["median_steps_to_goal"] < out["random_median_steps_to_goal"]
    sampled = trainer.evaluate(16, greedy=False)
    assert sampled["greedy"] is False and 0.0 <= sampled["success_rate"] <= 1.0
    actions = trainer.act(torch.zeros(3, 1, 72, 80, dtype=torch.uint8), greedy=True)
    assert actions.dtype == torch.int64 and actions.shape == (3,)


def test_gae_and_adam_variant_trains() -> None:
    cfg = small_config(gae_lambda=0.95, optimizer="adam", norm_adv=True, max_grad_norm=0.0)
    ctx = InMemoryRunContext(cfg, steps=2 * cfg.batch_size, eval_every=cfg.batch_size)
    ctx.run(A2CTrainer(cfg, ctx))
    assert len(ctx.records) == 1 and math.isfinite(ctx.records[0]["loss_value"])
    # the run evaluates at the record past the due step (records come every log_every)
    assert len(ctx.evals) == 1 and ctx.evals[0]["env_steps"] == 2 * cfg.batch_size


def test_nan_in_loss_stops_with_trace_id(monkeypatch: pytest.MonkeyPatch) -> None:
    real = rl.a2c_loss

    def poisoned(*args: object, **kwargs: object) -> rl.A2CLoss:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        value = out.value * math.nan
        return out._replace(value=value, total=out.total + value)

    monkeypatch.setattr(rl, "a2c_loss", poisoned)
    cfg = small_config()
    ctx = InMemoryRunContext(cfg, steps=4 * cfg.batch_size)
    with pytest.raises(NonFiniteError) as info:
        A2CTrainer(cfg, ctx).train()
    err = info.value
    assert "loss_value" in err.offending and err.trace_id in str(err)
    assert err.step == cfg.log_every * cfg.batch_size
    assert {"rewards", "advantages", "returns", "values", "obs"} <= set(err.batch_stats)
    assert err.batch_stats["rewards"]["numel"] == cfg.batch_size
    assert ctx.records == []  # the failing window is not recorded


@pytest.mark.parametrize("optimizer", ["rmsprop", "adam"])
def test_steps_have_no_host_reads_and_a_record_reads_once(optimizer: str) -> None:
    cfg = small_config(optimizer=optimizer, log_every=3)
    ctx = InMemoryRunContext(cfg, steps=6 * cfg.batch_size, env_config=ToyConfig(max_steps=3))
    trainer = A2CTrainer(cfg, ctx)
    trainer._setup_training()
    with count_host_reads(forbid=True):
        for _ in range(3):
            trainer._collect()
            trainer._optimise()
    with count_host_reads(forbid=False) as calls:
        trainer._emit_record()
    assert calls == ["tolist"]
    with count_host_reads(forbid=False) as calls:
        trainer.train()  # three more windows and their record
    assert calls == ["tolist"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("optimizer", ["rmsprop", "adam"])
def test_cuda_windows_have_no_syncs(optimizer: str) -> None:
    cfg = small_config(optimizer=optimizer)
    ctx = InMemoryRunContext(cfg, steps=2 * cfg.batch_size, device="cuda")
    trainer = A2CTrainer(cfg, ctx)
    trainer.train()  # warms up allocator, kernels and the optimiser's state
    with no_cuda_syncs():
        for _ in range(cfg.log_every):
            trainer._collect()
            trainer._optimise()
    trainer._emit_record()  # the record's one intended read
    assert ctx.records[-1]["opt_steps"] == 2 * cfg.log_every


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_memory_does_not_grow_with_steps() -> None:
    cfg = small_config(num_envs=256, log_every=4)
    ctx = InMemoryRunContext(cfg, steps=10**12, device="cuda")
    trainer = A2CTrainer(cfg, ctx)
    trainer._setup_training()

    def logging_window() -> tuple[int, int]:
        torch.cuda.reset_peak_memory_stats()
        for _ in range(cfg.log_every):
            trainer._collect()
            trainer._optimise()
        trainer._emit_record()
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()

    for _ in range(2):
        logging_window()  # allocates the optimiser's state and the allocator's pools
    live, peaks = zip(*(logging_window() for _ in range(30)), strict=True)
    # Between records the toy env's frame tensors (reallocated every step) make live memory
    # alternate between a few values, about one frame batch apart; anything that grows with
    # training would make the later half exceed the first.
    assert max(live[15:]) <= max(live[:15]), live
    assert max(peaks[15:]) <= max(peaks[:15]), peaks


def test_window_size_is_fixed_and_matches_the_estimate() -> None:
    sizes = []
    for steps in (2, 8):
        cfg = small_config()
        ctx = InMemoryRunContext(cfg, steps=steps * cfg.batch_size)
        trainer = A2CTrainer(cfg, ctx)
        trainer.train()
        assert trainer.window is not None
        sizes.append(trainer.window.nbytes())
    assert sizes[0] == sizes[1]
    estimate = estimate_window_bytes(cfg.update_every, cfg.num_envs, (1, 72, 80))
    assert sizes[0] <= estimate <= 1.1 * sizes[0]


def test_resume_from_state_dict_reproduces_records() -> None:
    cfg = small_config(log_every=2)
    env_cfg = ToyConfig(max_steps=10)
    full, resumed_ctx = train_and_resume(
        A2CTrainer, cfg, steps=8 * cfg.batch_size, env_config=env_cfg, seed=7,
        checkpoint_every=4 * cfg.batch_size,
    )
    assert len(full.records) == 4
    step, _state = full.checkpoints[0]
    assert step == 4 * cfg.batch_size
    assert [comparable(r) for r in resumed_ctx.records] == [
        comparable(r) for r in full.records[2:]
    ]


def test_refuses_a_window_that_does_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1_000_000)
    cfg = small_config()
    trainer = A2CTrainer(cfg, InMemoryRunContext(cfg, steps=cfg.batch_size))
    with pytest.raises(MemoryBudgetError, match="lower algo.num_envs") as info:
        trainer.train()
    assert str(info.value).startswith("a2c needs") and "\n" not in str(info.value)
    assert trainer.window is None  # refused before allocating


def test_nan_through_the_run_loop_writes_a_failure_bundle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gbx.testing import failure_bundle_of_run

    real = rl.a2c_loss

    def poisoned(*args: object, **kwargs: object) -> rl.A2CLoss:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        return out._replace(value=out.value * math.nan)

    monkeypatch.setattr(rl, "a2c_loss", poisoned)
    bundle = failure_bundle_of_run(
        "a2c", tmp_path / "run", steps=160,
        overrides=["algo.num_envs=8", "algo.update_every=5", "algo.log_every=2",
                   "algo.model_options={channels=[8,16,16], hidden=32}"],
    )
    text = (bundle / "error.txt").read_text()
    assert "NonFiniteError" in text and "loss_value" in text
    assert "batch statistics:" in text and '"advantages"' in text
    actions = json.loads((bundle / "actions.json").read_text())
    assert len(actions) == 5 and all(0 <= a < 7 for a in actions)  # one env's last window


def test_resuming_between_records_keeps_the_record_and_checkpoint_schedule() -> None:
    cfg = small_config(log_every=2)
    env_cfg = ToyConfig(max_steps=10)
    every = 4 * cfg.batch_size
    first_ctx = InMemoryRunContext(cfg, steps=3 * cfg.batch_size, env_config=env_cfg,
                                   checkpoint_every=every)
    first = first_ctx.run(A2CTrainer(cfg, first_ctx))  # the budget ends inside a window
    assert [r["opt_steps"] for r in first_ctx.records] == [2, 3]
    step, state = first_ctx.checkpoints[-1]
    ctx = InMemoryRunContext(cfg, steps=8 * cfg.batch_size, env_config=env_cfg,
                             checkpoint_every=every)
    resumed = A2CTrainer(cfg, ctx)
    resumed.load_state_dict(state)
    ctx.run(resumed, resume_step=step)
    assert first.env_steps == step
    assert [r["opt_steps"] for r in ctx.records] == [4, 6, 8]
    assert [step for step, _ in ctx.checkpoints] == [4 * cfg.batch_size, 8 * cfg.batch_size]
