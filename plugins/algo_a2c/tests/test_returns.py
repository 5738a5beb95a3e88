"""A2C targets and losses checked against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from gbx_algo_a2c import returns as rl
from gbx_toolkit.rl_common import compute_gae

NAN = math.nan


def _window() -> dict[str, torch.Tensor]:
    # Three steps, four envs, gamma 0.5. Columns:
    # env0 no boundary; env1 terminal at t=0, auto-reset: obs[1] (value 20) is the next
    # episode's start; env2 truncated at t=1, its final observation is worth 4;
    # env3 done and truncated at t=2 (terminal wins over the 100 of its final observation).
    t = torch.tensor
    return {
        "rewards": t([[1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [3.0, 3.0, 3.0, 3.0]]),
        "values": t([[10.0] * 4, [20.0] * 4, [30.0] * 4]),
        "dones": t([[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]]).bool(),
        "truncs": t([[0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]).bool(),
        "next_value": t([8.0, 8.0, 8.0, 8.0]),
        # Only truncated entries may be read; NaN elsewhere would poison any other use.
        "trunc_values": t([[NAN] * 4, [NAN, NAN, 4.0, NAN], [NAN, NAN, NAN, 100.0]]),
    }


def _returns(n: int) -> torch.Tensor:
    c = _window()
    return rl.nstep_returns(
        c["rewards"], c["values"], c["dones"], c["truncs"], c["next_value"], c["trunc_values"],
        gamma=0.5, n=n,
    )


def test_full_window_returns_by_hand() -> None:
    expected = torch.tensor(
        [
            # env0: 1 + .5*2 + .25*3 + .125*8; env1: 1 (terminal); env2: 1 + .5*(2 + .5*4);
            # env3: 1 + .5*(2 + .5*3)
            [3.75, 1.0, 3.0, 2.75],
            # env0/env1: 2 + .5*3 + .25*8; env2: 2 + .5*4 (truncation); env3: 2 + .5*3
            [5.5, 5.5, 4.0, 3.5],
            # env0..2: 3 + .5*8; env3: 3 (terminal, not the 100 of the final observation)
            [7.0, 7.0, 7.0, 3.0],
        ]
    )
    torch.testing.assert_close(_returns(3), expected)


def test_one_step_returns_by_hand() -> None:
    expected = torch.tensor(
        [
            # r0 + .5*V(obs1): env1 ends at t=0, so its next-episode value 20 is not used.
            [11.0, 1.0, 11.0, 11.0],
            # env2 bootstraps from its final observation (4), not from V(obs2) = 30.
            [17.0, 17.0, 4.0, 17.0],
            [7.0, 7.0, 7.0, 3.0],
        ]
    )
    torch.testing.assert_close(_returns(1), expected)


def test_two_step_returns_by_hand() -> None:
    expected = torch.tensor(
        [
            # env0: 1 + .5*2 + .25*V(obs2)=30; env2: 1 + .5*(2 + .5*4); env3: 1 + .5*2 + .25*30
            [9.5, 1.0, 3.0, 9.5],
            [5.5, 5.5, 4.0, 3.5],
            [7.0, 7.0, 7.0, 3.0],
        ]
    )
    torch.testing.assert_close(_returns(2), expected)


def test_full_window_equals_lambda_one_gae() -> None:
    gen = torch.Generator().manual_seed(0)
    shape = (6, 32)
    rewards = torch.randn(shape, generator=gen)
    values = torch.randn(shape, generator=gen)
    dones = torch.rand(shape, generator=gen) < 0.2
    truncs = torch.rand(shape, generator=gen) < 0.2
    next_value = torch.randn(shape[1], generator=gen)
    trunc_values = torch.randn(shape, generator=gen)
    ret = rl.nstep_returns(rewards, values, dones, truncs, next_value, trunc_values,
                           gamma=0.9, n=shape[0])
    _, gae_ret = compute_gae(rewards, values, dones, truncs, next_value, trunc_values,
                             gamma=0.9, gae_lambda=1.0)
    torch.testing.assert_close(ret, gae_ret)
    with pytest.raises(ValueError, match="n must be >= 1"):
        rl.nstep_returns(rewards, values, dones, truncs, next_value, trunc_values,
                         gamma=0.9, n=0)


def test_a2c_loss_golden() -> None:
    logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]], requires_grad=True)
    values = torch.tensor([1.0, 2.0], requires_grad=True)
    actions = torch.tensor([1, 0])
    adv = torch.tensor([2.0, -1.0])
    ret = torch.tensor([2.0, 1.0])
    out = rl.a2c_loss(logits, values, actions, adv, ret, vf_coef=0.5, ent_coef=0.1)
    logp = [math.log(0.5), math.log(0.75)]
    ent = [math.log(2.0), -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))]
    policy = -(logp[0] * 2.0 + logp[1] * -1.0) / 2
    value = 0.5 * ((1 - 2) ** 2 + (2 - 1) ** 2) / 2
    assert out.policy.item() == pytest.approx(policy, rel=1e-6)
    assert out.value.item() == pytest.approx(value, rel=1e-6)
    assert out.entropy.item() == pytest.approx(sum(ent) / 2, rel=1e-6)
    assert out.total.item() == pytest.approx(policy + 0.5 * value - 0.1 * sum(ent) / 2, rel=1e-6)
    out.total.backward()
    # Targets are constants: the value gradient is vf_coef * (v - ret) / batch.
    torch.testing.assert_close(values.grad, torch.tensor([-0.25, 0.25]))
