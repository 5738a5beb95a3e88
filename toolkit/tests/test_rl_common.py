"""The on-policy helpers shared by the trainers, checked by hand."""

from __future__ import annotations

import collections
import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from gbx import checkpoint_file as cf
from gbx.api import StatefulEnv
from gbx_toolkit import rl_common
from gbx_toolkit.metrics import MetricsAccumulator
from gbx_toolkit.on_policy import OnPolicyTrainer
from gbx_toolkit.rl_common import (
    TruncatedObsBuffer,
    activation_bytes,
    capture_rng_state,
    categorical_logprob,
    compute_gae,
    env_batch_state,
    explained_variance,
    model_bytes,
    restore_env_batch,
    restore_rng_state,
    sample_categorical,
    trunc_capacity,
)


def _draws(gen: torch.Generator) -> list[Any]:
    return [torch.rand(2).tolist(), np.random.rand(2).tolist(), random.random(),
            torch.rand(2, generator=gen).tolist()]


def test_rng_state_roundtrip_restores_every_stream() -> None:
    gen = torch.Generator().manual_seed(5)
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    state = capture_rng_state(gen)
    first = _draws(gen)
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    gen.manual_seed(99)
    restore_rng_state(state, gen)
    assert _draws(gen) == first


class _Tiny(nn.Module):
    """Flatten and one linear layer (28 float32 parameters) over uint8 frames."""

    def __init__(self) -> None:
        super().__init__()
        self.flat = nn.Flatten()
        self.fc = nn.Linear(6, 4)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flat(obs.float()))


def test_model_and_activation_bytes() -> None:
    model = _Tiny()
    assert model_bytes(model) == 4 * 28 * 4
    # Per sample: the flatten output (6) and the linear output (4), doubled for
    # gradients, plus the float input (6 values).
    assert activation_bytes(model, (1, 2, 3), batch=10) == 10 * (2 * (6 + 4) * 4 + 4 * 6)


def test_logprob_sampling_and_explained_variance() -> None:
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [math.log(3.0), 0.0, -1e9, -1e9]])
    lp = categorical_logprob(logits, torch.tensor([2, 0]))
    assert lp.tolist() == pytest.approx([math.log(0.25), math.log(0.75)], rel=1e-5)
    gen = torch.Generator().manual_seed(0)
    probs = torch.tensor([0.1, 0.2, 0.7])
    draws = sample_categorical(probs.log().expand(20000, 3), gen)
    assert draws.dtype == torch.int64
    freq = torch.bincount(draws, minlength=3).float() / 20000
    torch.testing.assert_close(freq, probs, atol=0.015, rtol=0)
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(y, y).item() == pytest.approx(1.0)
    # var(y) = 1.25; the residual [0, 0, 0, 2] has variance 0.75.
    pred = torch.tensor([1.0, 2.0, 3.0, 2.0])
    assert explained_variance(pred, y).item() == pytest.approx(1 - 0.75 / 1.25)
    assert math.isnan(explained_variance(y, torch.ones(4)).item())


def test_gae_by_hand_with_terminal_and_truncation() -> None:
    # Two steps, three envs, gamma 0.5, lambda 0.5. env0 no boundary; env1 terminal at
    # t=0 (the 9 of the next episode's first state must not leak back); env2 truncated
    # at t=0 with a final observation worth 6.
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    values = torch.tensor([[2.0, 2.0, 2.0], [9.0, 9.0, 9.0]])
    dones = torch.tensor([[False, True, False], [False, False, False]])
    truncs = torch.tensor([[False, False, True], [False, False, False]])
    trunc_values = torch.tensor([[math.nan, math.nan, 6.0], [math.nan] * 3])
    adv, ret = compute_gae(rewards, values, dones, truncs, torch.tensor([4.0, 4.0, 4.0]),
                           trunc_values, gamma=0.5, gae_lambda=0.5)
    # Step 1 (all envs): delta = 0 + .5*4 - 9 = -7.
    # env0 step 0: delta = 1 + .5*9 - 2 = 3.5, plus .25 * -7.
    # env1 step 0: delta = 1 - 2 = -1; env2 step 0: delta = 1 + .5*6 - 2 = 2 (no carry).
    expected = torch.tensor([[3.5 - 1.75, -1.0, 2.0], [-7.0, -7.0, -7.0]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + values)


def test_truncated_obs_buffer_compacts_without_host_reads() -> None:
    steps, n = 2, 4
    buf = TruncatedObsBuffer(steps, n, (1, 2), "cpu")
    assert buf.capacity == trunc_capacity(n, steps) == 4
    obs = torch.arange(n, dtype=torch.uint8).view(n, 1, 1).expand(n, 1, 2).contiguous()
    buf.start()
    buf.add(0, torch.tensor([False, True, False, True]), obs)
    buf.add(1, torch.tensor([True, False, False, False]), obs + 10)
    assert int(buf.count) == 3 and int(buf.overflow()) == 0
    assert buf.positions[:3].tolist() == [0 * n + 1, 0 * n + 3, 1 * n + 0]
    assert buf.obs[:3, 0, 0].tolist() == [1, 3, 10]
    # Unused slots and the sink point one past a [steps, n] table.
    assert buf.positions[3:].tolist() == [steps * n, steps * n]
    buf.add(1, torch.tensor([False, True, True, True]), obs + 20)
    assert int(buf.count) == 6 and int(buf.overflow()) == 2
    assert buf.obs[3, 0, 0].item() == 21  # the first that fitted; the rest went to the sink
    assert buf.positions[buf.capacity].item() == steps * n
    buf.start()
    assert int(buf.count) == 0 and buf.positions.tolist() == [steps * n] * 5
    assert buf.nbytes() == TruncatedObsBuffer.estimate_bytes(steps, n, (1, 2))


class _CounterEnv:
    """An env whose whole state is one counter tensor."""

    def __init__(self) -> None:
        self.counter = torch.zeros(2)

    def env_state_dict(self) -> dict[str, torch.Tensor]:
        return {"counter": self.counter.clone()}

    def load_env_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        self.counter = state["counter"].clone()


class _DuckEnv:
    """Has methods named like the capability's but does not declare it: not restored."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        raise AssertionError("never called")


def test_env_batch_state_roundtrip(capsys: pytest.CaptureFixture[str]) -> None:
    cpu = torch.device("cpu")
    env = _CounterEnv()
    env.counter += 3
    acc = MetricsAccumulator(2, 3, cpu)
    acc.add_step(torch.tensor([1.0, 2.0]), torch.zeros(2, dtype=torch.bool),
                 torch.zeros(2, dtype=torch.bool))
    obs = torch.tensor([[7, 8]], dtype=torch.uint8)
    state = env_batch_state(env, obs, acc)
    assert state is not None and env_batch_state(env, None, acc) is None

    fresh_env = _CounterEnv()
    fresh_acc = MetricsAccumulator(2, 3, cpu)
    restored = restore_env_batch(fresh_env, state, fresh_acc, cpu, algo="a2c")
    assert restored is not None and torch.equal(restored, obs)
    assert fresh_env.counter.tolist() == [3.0, 3.0]
    assert fresh_acc.state_dict()["ep_return"].tolist() == [1.0, 2.0]

    # An env that is not a StatefulEnv keeps its reset state; a warning says so.
    assert isinstance(env, StatefulEnv) and not isinstance(_DuckEnv(), StatefulEnv)
    assert "env" not in (env_batch_state(_DuckEnv(), obs, None) or {})
    assert restore_env_batch(_DuckEnv(), state, None, cpu, algo="a2c") is None
    assert "a2c: warning: the env cannot restore its state" in capsys.readouterr().err


def test_seed_everything_seeds_every_stream() -> None:
    first = _draws(rl_common.seed_everything(5, torch.device("cpu")))
    gen = rl_common.seed_everything(5, torch.device("cpu"))
    assert _draws(gen) == first
    assert _draws(rl_common.seed_everything(6, torch.device("cpu"))) != first


def test_normalize_advantages_by_hand() -> None:
    adv = torch.tensor([1.0, 3.0])  # mean 2, population std 1
    out = rl_common.normalize_advantages(adv, eps=0.0)
    assert torch.allclose(out, torch.tensor([-1.0, 1.0]))


def test_step_window_shapes_and_bytes() -> None:
    plain = rl_common.StepWindow(4, 3, (1, 2, 2), "cpu")
    with_logp = rl_common.StepWindow(4, 3, (1, 2, 2), "cpu", logprobs=True)
    assert plain.logprobs is None and with_logp.logprobs is not None
    assert plain.obs.shape == (4, 3, 1, 2, 2) and plain.trunc_values.shape == (4, 3)
    # The table view shares storage with the flat buffer and its spare element.
    plain.trunc_values_flat[5] = 7.0
    assert plain.trunc_values[1, 2] == 7.0 and plain.trunc_values_flat.numel() == 13
    assert with_logp.nbytes() - plain.nbytes() == 4 * 3 * 4
    side = plain.truncated.nbytes()
    # obs 48 B, actions 96, rewards 48, dones 12, truncs 12, values 48, flat values 52.
    assert plain.nbytes() == 48 + 96 + 48 + 12 + 12 + 48 + 52 + side
    # Estimate: per sample the frame, the action, two flags and the float columns.
    est = rl_common.window_bytes(4, 3, (1, 2, 2), float_columns=5)
    assert est == 12 * (4 + 8 + 5 * 4 + 2) + TruncatedObsBuffer.estimate_bytes(4, 3, (1, 2, 2))


def test_shared_config_fields_validate() -> None:
    import attrs

    @attrs.frozen(kw_only=True)
    class Cfg:
        gamma: float = attrs.field(default=0.5, validator=rl_common.unit_interval)
        lam: float | None = attrs.field(default=None, validator=rl_common.unit_interval_or_none)
        clip: float | None = attrs.field(default=None, validator=rl_common.positive_or_none)
        model: str = rl_common.model_field()
        options: dict = rl_common.model_options_field()
        budget: int = rl_common.budget_field()

    cfg = Cfg()
    assert (cfg.model, cfg.options, cfg.budget) == ("cnn", {}, 0)
    for bad in ({"gamma": 1.5}, {"lam": -0.1}, {"clip": 0.0}, {"model": ""},
                {"budget": -1}):
        with pytest.raises(ValueError):
            Cfg(**bad)


def _tiny_config_cls() -> type:
    """A config with the fields :class:`gbx_toolkit.on_policy.OnPolicyTrainer` reads."""
    import attrs

    @attrs.frozen(kw_only=True)
    class TinyConfig:
        num_envs: int = 4
        steps: int = 3
        total_env_steps: int = rl_common.budget_field()
        model: str = rl_common.model_field()
        model_options: dict = attrs.field(factory=lambda: {"channels": (4, 8, 8), "hidden": 8})

        @property
        def batch_size(self) -> int:
            return self.num_envs * self.steps

    return TinyConfig


class _TinyTrainer(OnPolicyTrainer):
    """The smallest on-policy trainer: one value-regression step per window."""

    algo = "tiny"

    def _build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=1e-2)

    def train(self) -> None:
        from gbx_toolkit.guard import FiniteGuard

        if self.env is None:
            env, obs_shape, _model = self._setup_env(self.cfg.num_envs)
            self._check_memory(1, fix="n/a", describe="tiny")
            self._start_storage(
                rl_common.StepWindow(self.cfg.steps, self.cfg.num_envs, obs_shape, self.device),
                env,
            )
        while self.env_steps + self.cfg.batch_size <= self._total_env_steps():
            self._collect_with(self.forward_fn())
            next_value = self._bootstrap_values(2)
            buf = self.storage
            assert buf is not None and self.metrics is not None
            _, values = self.forward_fn()(buf.obs.flatten(0, 1))
            target = (buf.rewards + 0.9 * next_value).flatten()
            loss = (values - target).square().mean()
            self._optimizer().zero_grad()
            loss.backward()
            guard = FiniteGuard(self.device)
            params = list(self.model_or_fail().parameters())
            rl_common.guarded_step(self._optimizer(), params, guard, max_grad_norm=1.0,
                                   loss_value=loss)
            self.opt_steps += 1
            self.ctx.record({"step": self.env_steps, "env_steps": self.env_steps,
                             "loss": float(loss.detach()), **self.metrics.summary()})


def test_on_policy_trainer_base_trains_evaluates_and_resumes_exactly() -> None:
    from gbx.testing import comparable, train_and_resume

    cfg = _tiny_config_cls()()
    full, resumed = train_and_resume(_TinyTrainer, cfg, steps=4 * cfg.batch_size, seed=3,
                                     checkpoint_every=cfg.batch_size, eval_every=24)
    assert [r["env_steps"] for r in full.records] == [12, 24, 36, 48]
    # the run's schedule: a checkpoint per record, an evaluation every 24 env steps
    assert [s for s, _ in full.checkpoints] == [12, 24, 36, 48]
    assert [e["env_steps"] for e in full.evals] == [24, 48]
    assert [e["env_steps"] for e in resumed.evals] == [24, 48]
    step, state = full.checkpoints[0]
    assert step == 12 and state["algo"] == "tiny" and state["counters"]["opt_steps"] == 1
    assert state["env"] is not None and "metrics" in state["env"]
    assert [comparable(r) for r in resumed.records] == [comparable(r) for r in full.records[1:]]
    trainer = _TinyTrainer(cfg, full)
    trainer.load_state_dict(full.checkpoints[-1][1])
    summary = trainer.evaluate(4)
    assert summary["episodes"] == 4 and "random_success_rate" in summary
    actions = trainer.act(torch.zeros(2, 1, 72, 80, dtype=torch.uint8), greedy=False)
    assert actions.shape == (2,) and actions.dtype == torch.int64


def test_on_policy_trainer_refuses_a_checkpoint_without_spec() -> None:
    cfg = _tiny_config_cls()()
    from gbx.testing import InMemoryRunContext

    trainer = _TinyTrainer(cfg, InMemoryRunContext(cfg))
    with pytest.raises(ValueError, match="TINY checkpoint has no model spec"):
        trainer.load_state_dict({"spec": None})
    with pytest.raises(RuntimeError, match="TINY model is not built yet"):
        trainer.act(torch.zeros(1, 1, 72, 80, dtype=torch.uint8))


def test_state_with_rng_streams_numpy_and_module_state_round_trips() -> None:
    gen = torch.Generator().manual_seed(3)
    model = torch.nn.Linear(3, 2)
    state = {"rng": capture_rng_state(gen), "model": model.state_dict(),
             "arr": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.int64(5),
             "path": Path("a/b"), "t": (1, [2.5, None], "x", b"raw")}
    expect = (random.random(), float(np.random.random()), float(torch.rand(1)))
    loaded = cf.loads(cf.dumps({"format": cf.FORMAT_VERSION, "step": 7, "run_id": "r",
                                "config": {"run": {}}, "state": state}), "mem")["state"]
    # The restored streams continue exactly where the captured ones were.
    restore_rng_state(loaded["rng"], torch.Generator())
    assert (random.random(), float(np.random.random()), float(torch.rand(1))) == expect
    assert isinstance(loaded["model"], collections.OrderedDict)
    torch.nn.Linear(3, 2).load_state_dict(loaded["model"])
    assert torch.equal(loaded["arr"], torch.arange(6.0).reshape(2, 3))
    assert loaded["n"] == 5 and loaded["path"] == "a/b" and loaded["t"] == (1, [2.5, None], "x",
                                                                              b"raw")
