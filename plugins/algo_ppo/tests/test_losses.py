"""PPO math checked against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from gbx_algo_ppo import losses


def _gae_case() -> dict[str, torch.Tensor]:
    # Columns: env0 no boundary; env1 done at t=1; env2 truncated at t=0
    # (bootstrap 5.0 from its final observation); env3 done and trunc at t=2 (done wins).
    t = torch.tensor
    return {
        "rewards": t([[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.0], [2.0, 0.0, 0.0, 1.0]]),
        "values": t([[0.5, 0.1, 1.0, 0.0], [0.4, 0.2, 2.0, 0.0], [0.3, 0.3, 3.0, 0.5]]),
        "dones": t([[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1]]).bool(),
        "truncs": t([[0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 1]]).bool(),
        "next_value": t([0.2, 0.4, 1.0, 7.0]),
        # Only the truncated entries matter; the rest is garbage (NaN) on purpose.
        "trunc_values": t(
            [
                [math.nan, math.nan, 5.0, math.nan],
                [math.nan] * 4,
                [math.nan, math.nan, math.nan, 100.0],
            ]
        ),
    }


def test_gae_matches_hand_computation() -> None:
    c = _gae_case()
    adv, ret = losses.compute_gae(
        c["rewards"], c["values"], c["dones"], c["truncs"], c["next_value"], c["trunc_values"],
        gamma=0.9, gae_lambda=0.8,
    )
    # gamma*lambda = 0.72. Worked out by hand:
    # env0: d2 = 2 + .9*.2 - .3 = 1.88; d1 = .9*.3 - .4 = -.13; d0 = 1 + .9*.4 - .5 = .86
    # env1: d2 = .9*.4 - .3 = .06; d1 = 1 - .2 = .8 (done: no bootstrap, no carry); d0 = .9*.2 - .1
    # env2: d2 = .9*1 - 3 = -2.1; d1 = .9*3 - 2 = .7; d0 = .5 + .9*5 - 1 = 4.0 (no carry)
    # env3: d2 = 1 - .5 = .5 (done beats trunc); d1 = -0 + .9*.5 = .45; d0 = 0
    expected = torch.tensor(
        [
            [
                0.86 + 0.72 * (-0.13 + 0.72 * 1.88),
                0.08 + 0.72 * 0.8,
                4.0,
                0.72 * (0.45 + 0.72 * 0.5),
            ],
            [-0.13 + 0.72 * 1.88, 0.8, 0.7 + 0.72 * -2.1, 0.45 + 0.72 * 0.5],
            [1.88, 0.06, -2.1, 0.5],
        ]
    )
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + c["values"])


def test_gae_lambda_one_is_discounted_return_minus_value() -> None:
    # With lambda = 1 and no boundaries, GAE is the Monte-Carlo return bootstrapped at the end.
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.3], [0.2], [0.1]])
    flags = torch.zeros(3, 1, dtype=torch.bool)
    _, ret = losses.compute_gae(
        rewards, values, flags, flags, torch.tensor([10.0]), torch.zeros(3, 1),
        gamma=0.5, gae_lambda=1.0,
    )
    torch.testing.assert_close(
        ret.squeeze(1),
        torch.tensor([1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 10, 2 + 0.5 * 3 + 0.25 * 10, 3 + 5.0]),
    )


def test_gae_autoreset_does_not_leak_across_episodes() -> None:
    # A huge value at the first step of the next episode must not reach the ended one.
    rewards = torch.tensor([[0.0], [0.0]])
    values = torch.tensor([[0.0], [1000.0]])
    dones = torch.tensor([[True], [False]])
    truncs = torch.zeros(2, 1, dtype=torch.bool)
    adv, _ = losses.compute_gae(
        rewards, values, dones, truncs, torch.tensor([0.0]), torch.zeros(2, 1),
        gamma=0.99, gae_lambda=0.95,
    )
    assert adv[0, 0].item() == 0.0


def _synthetic_batch() -> dict[str, list[float]]:
    return {
        "new_logp": [-1.0, -0.5, -2.0, -0.1],
        "old_logp": [-1.2, -0.5, -1.0, -0.6],
        "adv": [1.0, -1.0, 2.0, -0.5],
        "new_v": [0.5, 1.5, -0.2, 0.0],
        "old_v": [0.4, 1.0, 0.0, 0.3],
        "ret": [1.0, 0.8, 0.1, -0.4],
    }


def test_clipped_surrogate_golden() -> None:
    b = _synthetic_batch()
    clip = 0.2
    expected_terms, kl, clipped = [], [], 0
    for nl, ol, a in zip(b["new_logp"], b["old_logp"], b["adv"], strict=True):
        r = math.exp(nl - ol)
        expected_terms.append(min(r * a, min(max(r, 1 - clip), 1 + clip) * a))
        kl.append((r - 1) - (nl - ol))
        clipped += abs(r - 1) > clip
    out = losses.clipped_surrogate(
        torch.tensor(b["new_logp"]), torch.tensor(b["old_logp"]), torch.tensor(b["adv"]), clip=clip
    )
    assert out.loss.item() == pytest.approx(-sum(expected_terms) / 4, rel=1e-6)
    assert out.approx_kl.item() == pytest.approx(sum(kl) / 4, rel=1e-6)
    assert out.clipfrac.item() == pytest.approx(clipped / 4)
    assert 0 < clipped < 4  # the batch exercises both branches


def test_value_loss_golden_plain_and_clipped() -> None:
    b = _synthetic_batch()
    plain = sum((v - r) ** 2 for v, r in zip(b["new_v"], b["ret"], strict=True)) / 4 * 0.5
    clip = 0.25
    clipped_terms = []
    for nv, ov, r in zip(b["new_v"], b["old_v"], b["ret"], strict=True):
        cv = ov + min(max(nv - ov, -clip), clip)
        clipped_terms.append(max((nv - r) ** 2, (cv - r) ** 2))
    args = (torch.tensor(b["new_v"]), torch.tensor(b["old_v"]), torch.tensor(b["ret"]))
    assert losses.value_loss(*args).item() == pytest.approx(plain, rel=1e-6)
    got = losses.value_loss(*args, clip=clip).item()
    assert got == pytest.approx(0.5 * sum(clipped_terms) / 4, rel=1e-6)
    assert got > plain  # clipping is pessimistic here


def test_entropy_logprob_and_explained_variance() -> None:
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [math.log(3.0), 0.0, -1e9, -1e9]])
    ent = losses.categorical_entropy(logits)
    assert ent[0].item() == pytest.approx(math.log(4))
    two_way = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert ent[1].item() == pytest.approx(two_way, rel=1e-5)
    lp = losses.categorical_logprob(logits, torch.tensor([2, 0]))
    assert lp.tolist() == pytest.approx([math.log(0.25), math.log(0.75)], rel=1e-5)
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert losses.explained_variance(y, y).item() == pytest.approx(1.0)
    # var(y) = 1.25; residual [0, 0, 0, 2] has variance 0.75.
    pred = torch.tensor([1.0, 2.0, 3.0, 2.0])
    assert losses.explained_variance(pred, y).item() == pytest.approx(1 - 0.75 / 1.25)
    assert math.isnan(losses.explained_variance(y, torch.ones(4)).item())


def test_gumbel_sampling_follows_the_distribution() -> None:
    gen = torch.Generator().manual_seed(0)
    probs = torch.tensor([0.1, 0.2, 0.7])
    logits = probs.log().expand(20000, 3)
    counts = torch.bincount(losses.sample_categorical(logits, gen), minlength=3).float() / 20000
    torch.testing.assert_close(counts, probs, atol=0.015, rtol=0)


def test_reward_scaling_uses_running_discounted_return_std() -> None:
    stats = losses.RunningMeanStd("cpu", eps=0.0)
    rewards = torch.tensor([[1.0, 0.0], [1.0, 2.0]])
    dones = torch.tensor([[True, False], [False, False]])
    truncs = torch.zeros(2, 2, dtype=torch.bool)
    scaled, carry = losses.scale_rewards(
        rewards, dones, truncs, torch.zeros(2), stats, gamma=0.5
    )
    # Discounted returns seen: env0 1 (then reset), 1; env1 0, 2 -> std of [1, 0, 1, 2].
    history = torch.tensor([1.0, 0.0, 1.0, 2.0])
    std = history.double().var(unbiased=False).sqrt().float()
    torch.testing.assert_close(scaled, rewards / (std + 1e-8))
    torch.testing.assert_close(carry, torch.tensor([1.0, 2.0]))
