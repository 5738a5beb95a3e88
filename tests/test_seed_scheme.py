"""The seed scheme (gbx.seeds): no two random streams of any ranks share a seed, and
every algorithm seeds its envs and generators from it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from gbx import seeds
from gbx.testing import InMemoryRunContext

BASES = (0, 1, 7, 1_000_003, 123_456_789)
RANKS = range(8)


@pytest.mark.parametrize("base", BASES)
def test_every_stream_of_every_rank_has_its_own_seed(base: int) -> None:
    # A rank's seeds do not depend on the world size, so ranks 0..7 cover every job of
    # up to 8 ranks.
    all_seeds = [seeds.stream_seed(base, r, s) for r in RANKS for s in seeds.Stream]
    assert len(set(all_seeds)) == len(all_seeds)
    # Envs seed their copies seed + i: the ranges of full-width streams do not overlap.
    spans = sorted((x, x + seeds.STREAM_STRIDE) for x in all_seeds)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    # The named helpers are the streams; rank 0 trains on the run's own seed.
    assert seeds.train_env_seed(base, 0) == seeds.rank_seed(base, 0) == base
    for r in RANKS:
        assert seeds.eval_env_seed(base, r) == seeds.stream_seed(base, r, seeds.Stream.EVAL_ENV)
        assert seeds.train_rng_seed(base, r) == seeds.stream_seed(base, r, seeds.Stream.TRAIN_RNG)
        assert seeds.eval_rng_seed(base, r) == seeds.stream_seed(base, r, seeds.Stream.EVAL_RNG)
        assert seeds.eval_env_seed(base, r) not in {seeds.train_env_seed(base, q) for q in RANKS}


def test_negative_rank_is_refused() -> None:
    with pytest.raises(ValueError, match="rank"):
        seeds.rank_seed(0, -1)


def _context(algo_config: Any, base: int) -> InMemoryRunContext:
    """Rank 0 of a two-rank job (the context remembers the seed of every env it builds)."""
    return InMemoryRunContext(algo_config, steps=64, seed=seeds.rank_seed(base, 0))


def _trainer(algo: str, ctx_base: int) -> tuple[Any, InMemoryRunContext, Any]:
    if algo == "ppo":
        from gbx_algo_ppo.config import PPOConfig
        from gbx_algo_ppo.trainer import PPOTrainer
        cfg: Any = PPOConfig(num_envs=4, rollout_steps=8, minibatches=2,
                             model_options={"channels": (8, 16, 16), "hidden": 32})
        ctx = _context(cfg, ctx_base)
        return PPOTrainer(cfg, ctx), ctx, "generator"
    if algo == "a2c":
        from gbx_algo_a2c.config import A2CConfig
        from gbx_algo_a2c.trainer import A2CTrainer
        cfg = A2CConfig(num_envs=4, model_options={"channels": (8, 16, 16), "hidden": 32})
        ctx = _context(cfg, ctx_base)
        return A2CTrainer(cfg, ctx), ctx, "generator"
    from gbx_algo_dreamer.config import DreamerConfig
    from gbx_algo_dreamer.trainer import DreamerTrainer
    cfg = DreamerConfig(size="tiny", num_envs=2, batch_size=2, batch_length=8,
                        replay_capacity=64, learning_starts=16)
    ctx = _context(cfg, ctx_base)
    return DreamerTrainer(cfg, ctx), ctx, "gen"


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dreamer_v3"])
def test_algorithms_seed_from_the_scheme(algo: str) -> None:
    pytest.importorskip({"ppo": "gbx_algo_ppo", "a2c": "gbx_algo_a2c",
                         "dreamer_v3": "gbx_algo_dreamer"}[algo])
    base = 11
    trainer, ctx, gen_attr = _trainer(algo, base)
    assert getattr(trainer, gen_attr).initial_seed() == seeds.train_rng_seed(base, 0)
    ctx.env_seeds.clear()
    trainer.evaluate(2, greedy=True, baseline=False)
    # Rank 0's eval envs use its own eval seed, not rank 1's training seed.
    assert ctx.env_seeds == [seeds.eval_env_seed(base, 0)]
    assert seeds.train_env_seed(base, 1) not in ctx.env_seeds
