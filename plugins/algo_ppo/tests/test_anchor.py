"""``algo.anchor_coef``: PPO keeps the policy it started from (``run.init_from``) on the
steps whose episode has not passed the env's milestones (:class:`gbx.api.EpisodeProgressEnv`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import torch
from ppo_small import TOY, small_config, trained_state

from gbx.api import EpisodeProgressEnv
from gbx.errors import ConfigError
from gbx.testing import (
    InMemoryRunContext,
    comparable,
    count_host_reads,
    no_cuda_syncs,
    train_and_resume,
)
from gbx.toy import ToyEnv
from gbx_algo_ppo import losses
from gbx_algo_ppo.config import PPOConfig
from gbx_algo_ppo.trainer import PPOTrainer


class MilestoneToy(ToyEnv):
    """The toy env with one milestone: the bottom half of the board (``rule="half"``),
    never passed (``"never"``) or passed from every episode's start (``"always"``). It
    logs the flags each step acted on, to compare with what the trainer stored."""

    def __init__(self, num_envs: int, seed: int, rule: str = "half",
                 device: str = "cpu") -> None:
        super().__init__(TOY, num_envs, device, seed)
        self.rule = rule
        self.passed = torch.zeros((1, num_envs), dtype=torch.bool, device=device)
        self.acted_on: list[torch.Tensor] = []

    def _mark(self, mask: torch.Tensor | None = None) -> None:
        if self.rule == "half":
            lower = self._pos[:, 0] >= self.config.grid // 2
            now = lower if mask is None else torch.where(mask, lower, self.passed[0] | lower)
            self.passed[0].copy_(now)
        else:
            self.passed.fill_(self.rule == "always")

    def reset(self) -> torch.Tensor:
        obs = super().reset()
        self._mark()
        return obs

    def step(self, actions: torch.Tensor) -> Any:
        self.acted_on.append(self.passed[0].clone())
        obs, reward, done, trunc, info = super().step(actions)
        # the new episodes of the reset envs start afresh; the others keep what they passed
        self._mark(info["reset_mask"])
        return obs, reward, done, trunc, info

    def episode_progress(self) -> torch.Tensor:
        return self.passed

    def env_state_dict(self) -> dict[str, Any]:
        return {**super().env_state_dict(), "passed": self.passed.clone()}

    def load_env_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_env_state_dict(state)
        self.passed.copy_(state["passed"])


@pytest.fixture(scope="module")
def start_state() -> dict[str, Any]:
    """The checkpoint state of a briefly trained policy (what run.init_from loads)."""
    return trained_state()


def anchored(cfg: PPOConfig, state: Mapping[str, Any], rule: str = "half", *,
             steps: int = 256, device: str = "cpu") -> tuple[PPOTrainer, InMemoryRunContext]:
    ctx = InMemoryRunContext(cfg, steps=steps, env_config=TOY, device=device,
                             env_factory=lambda n, seed: MilestoneToy(n, seed, rule, device))
    trainer = PPOTrainer(cfg, ctx)
    trainer.init_weights(state, "stage 1")
    return trainer, ctx


def test_anchor_kl_is_the_masked_mean_of_kl_from_the_anchor() -> None:
    anchor = torch.log_softmax(torch.tensor([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]]), -1)
    logits = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    logp = torch.log_softmax(logits, -1)
    kl = (anchor.exp() * (anchor - logp)).sum(-1)
    both, share = losses.anchor_kl(logits, anchor, torch.tensor([True, True]))
    first, half = losses.anchor_kl(logits, anchor, torch.tensor([True, False]))
    none, zero = losses.anchor_kl(logits, anchor, torch.tensor([False, False]))
    assert torch.allclose(both, kl.mean()) and float(share) == 1.0
    assert torch.allclose(first, kl[0]) and float(half) == 0.5
    assert float(none) == 0.0 and float(zero) == 0.0
    same, _ = losses.anchor_kl(anchor, anchor, torch.tensor([True, True]))
    assert abs(float(same)) < 1e-6


def test_the_trainer_stores_which_steps_came_before_the_milestone(start_state) -> None:
    cfg = small_config(anchor_coef=1.0)
    trainer, ctx = anchored(cfg, start_state, steps=cfg.batch_size)
    ctx.run(trainer)
    env = trainer.env
    assert isinstance(env, MilestoneToy) and isinstance(env, EpisodeProgressEnv)
    stored = trainer.buffer.before_milestones  # type: ignore[union-attr]
    assert stored is not None
    expected = ~torch.stack(env.acted_on)
    assert torch.equal(stored, expected)
    assert 0 < int(expected.sum()) < expected.numel()  # both kinds of step occurred
    rec = ctx.records[-1]
    assert rec["anchor_share"] == pytest.approx(float(expected.float().mean()), abs=0.1)
    assert rec["anchor_kl"] >= 0.0


def test_the_anchor_keeps_the_start_policy_where_it_applies(start_state) -> None:
    probe = MilestoneToy(64, seed=3).reset()

    def drift(rule: str, coef: float) -> float:
        cfg = small_config(anchor_coef=coef, lr=3e-3)
        trainer, ctx = anchored(cfg, start_state, rule, steps=8 * cfg.batch_size)
        start = trainer.model_or_fail()(probe)[0].log_softmax(-1).detach()
        ctx.run(trainer)
        now = trainer.model_or_fail()(probe)[0].log_softmax(-1).detach()
        return float((start.exp() * (start - now)).sum(-1).mean())

    free, held = drift("never", 0.0), drift("never", 10.0)
    assert held < 0.25 * free, (held, free)
    # where every episode has passed the milestone, the anchor changes nothing at all
    assert drift("always", 10.0) == drift("always", 0.0)


def test_resume_keeps_the_anchor_and_reproduces_the_records(start_state) -> None:
    cfg = small_config(anchor_coef=1.0)

    def make(config: PPOConfig, ctx: InMemoryRunContext) -> PPOTrainer:
        trainer = PPOTrainer(config, ctx)
        trainer.init_weights(start_state, "stage 1")
        return trainer

    full, resumed = train_and_resume(
        make, cfg, steps=4 * cfg.batch_size, seed=5, env_config=TOY,
        env_factory=lambda n, seed: MilestoneToy(n, seed), checkpoint_every=2 * cfg.batch_size)
    saved = full.checkpoints[0][1]
    assert all(torch.equal(saved["anchor"][k], start_state["model"][k])
               for k in start_state["model"])
    assert [comparable(r) for r in resumed.records] == [comparable(r) for r in full.records[2:]]
    final = full.checkpoints[-1][1]["model"]
    again = resumed.checkpoints[-1][1]["model"]
    assert all(torch.equal(final[k], again[k]) for k in final)


def test_without_init_from_the_anchor_is_a_one_line_error() -> None:
    cfg = small_config(anchor_coef=1.0)
    ctx = InMemoryRunContext(cfg, steps=cfg.batch_size, env_config=TOY,
                             env_factory=lambda n, seed: MilestoneToy(n, seed))
    with pytest.raises(ConfigError, match="needs run.init_from") as info:
        PPOTrainer(cfg, ctx).train()
    assert "\n" not in str(info.value)


def test_an_env_without_milestones_is_a_one_line_error(start_state) -> None:
    cfg = small_config(anchor_coef=1.0)
    ctx = InMemoryRunContext(cfg, steps=cfg.batch_size, env_config=TOY)
    trainer = PPOTrainer(cfg, ctx)
    trainer.init_weights(start_state, "stage 1")
    with pytest.raises(ConfigError, match="env.milestone_dirs") as info:
        trainer.train()
    assert "\n" not in str(info.value)


def test_anchored_collection_and_update_read_nothing_more_from_the_device(start_state) -> None:
    cfg = small_config(anchor_coef=1.0)
    trainer, _ctx = anchored(cfg, start_state, steps=2 * cfg.batch_size)
    trainer._setup_training()
    with count_host_reads(forbid=True):
        trainer._collect()
    with count_host_reads(forbid=False) as calls:
        trainer.train()  # one more update: collect + update + record
    assert sorted(calls) == ["item", "tolist"]  # the guard's flag and the record


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_anchored_update_has_no_syncs(start_state) -> None:
    cfg = small_config(anchor_coef=1.0)
    trainer, ctx = anchored(cfg, start_state, steps=3 * cfg.batch_size, device="cuda")
    ctx.stop_after_records = 2
    ctx.run(trainer)  # two updates warm up allocator, kernels and Adam's state
    with no_cuda_syncs():
        trainer._collect()
        guard, batch_stats = trainer._optimise()
    guard.check(batch_stats)
    assert trainer.metrics.summary()["anchor_share"] > 0  # type: ignore[union-attr]
