"""Tests of gbx_toolkit.metrics on small synthetic tensors with hand-checked values."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import pytest
import torch

from gbx.testing import no_cuda_syncs
from gbx_toolkit.metrics import (
    MetricsAccumulator,
    categorical_entropy,
    histogram,
    mean_std,
    percentiles,
    rate,
)


def test_rate_counts_true_fraction() -> None:
    assert rate(torch.tensor([True, False, False, True])).item() == pytest.approx(0.5)
    assert rate(torch.tensor([], dtype=torch.bool)).item() == 0.0


def test_percentiles_match_linear_interpolation() -> None:
    values = torch.arange(11, dtype=torch.float32)  # 0..10: p10=1, p50=5, p90=9
    assert percentiles(values).tolist() == pytest.approx([1.0, 5.0, 9.0])
    # 4 samples: positions 0.3, 1.5, 2.7 between sorted [1, 2, 4, 8]
    shuffled = torch.tensor([8.0, 1.0, 4.0, 2.0])
    assert percentiles(shuffled).tolist() == pytest.approx([1.3, 3.0, 6.8])
    ref = torch.quantile(shuffled, torch.tensor([0.1, 0.5, 0.9]))
    assert percentiles(shuffled).tolist() == pytest.approx(ref.tolist())
    assert percentiles(torch.tensor([3.0])).tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="empty"):
        percentiles(torch.tensor([]))


def test_histogram_has_fixed_length() -> None:
    counts = histogram(torch.tensor([[0, 2], [2, 2]]), num_bins=5)
    assert counts.tolist() == [1, 0, 3, 0, 0]
    assert counts.dtype == torch.int64


def test_categorical_entropy() -> None:
    uniform = torch.zeros(2, 4)
    assert categorical_entropy(uniform).tolist() == pytest.approx([math.log(4)] * 2)
    certain = torch.tensor([[0.0, -1e9, -1e9]])
    assert categorical_entropy(certain).item() == pytest.approx(0.0, abs=1e-6)


def test_mean_std() -> None:
    assert mean_std(torch.tensor([1.0, 3.0, 5.0, 7.0])).tolist() == pytest.approx(
        [4.0, math.sqrt(5.0)]
    )


def _two_step_window(acc: MetricsAccumulator, device: str = "cpu") -> None:
    # 4 envs, 2 steps. Step 1: env 1 done (success), env 2 truncated.
    acc.add_step(
        torch.tensor([1.0, 2.0, 0.0, 0.0], device=device),
        torch.tensor([False, True, False, False], device=device),
        torch.tensor([False, False, True, False], device=device),
        success=torch.tensor([False, True, False, False], device=device),
        actions=torch.tensor([0, 1, 1, 2], device=device),
        dist=torch.tensor([4.0, 0.0, 3.0, 2.0], device=device),
    )
    # Step 2: env 0 done without success.
    acc.add_step(
        torch.tensor([1.0, 0.0, 0.0, 0.0], device=device),
        torch.tensor([True, False, False, False], device=device),
        torch.tensor([False, False, False, False], device=device),
        success=torch.tensor([False, False, False, False], device=device),
        actions=torch.tensor([2, 2, 2, 2], device=device),
        dist=torch.tensor([1.0, 5.0, 6.0, 7.0], device=device),
    )
    acc.add_policy(
        entropy=torch.tensor([0.5, 1.5], device=device),
        value=torch.tensor([1.0, 3.0], device=device),
    )
    acc.add_scalars(policy_loss=torch.tensor(0.25, device=device), kl=0.5)
    acc.add_scalars(policy_loss=torch.tensor(0.75, device=device), kl=1.5)


def test_accumulator_summary_hand_checked() -> None:
    acc = MetricsAccumulator(num_envs=4, num_actions=3, device="cpu")
    _two_step_window(acc)
    rec = acc.summary()
    assert rec["reward_mean"] == pytest.approx(4.0 / 8)
    assert rec["done_rate"] == pytest.approx(2 / 8)
    assert rec["trunc_rate"] == pytest.approx(1 / 8)
    assert rec["reset_rate"] == pytest.approx(3 / 8)
    assert rec["episodes"] == 3
    assert rec["success_rate"] == pytest.approx(1 / 3)
    # returns of ended episodes: env1 = 2 (len 1), env2 = 0 (len 1), env0 = 1+1 (len 2)
    assert rec["episode_return_mean"] == pytest.approx(4.0 / 3)
    assert rec["episode_length_mean"] == pytest.approx(4.0 / 3)
    assert rec["action_hist"] == [1, 2, 5]
    assert rec["entropy_mean"] == pytest.approx(1.0)
    assert rec["value_mean"] == pytest.approx(2.0)
    assert rec["value_std"] == pytest.approx(1.0)
    assert rec["policy_loss"] == pytest.approx(0.5)
    assert rec["kl"] == pytest.approx(1.0)
    expected = torch.quantile(
        torch.tensor([4.0, 0.0, 3.0, 2.0, 1.0, 5.0, 6.0, 7.0]), torch.tensor([0.1, 0.5, 0.9])
    ).tolist()
    assert [rec["dist_p10"], rec["dist_p50"], rec["dist_p90"]] == pytest.approx(expected)
    assert "sps" not in rec  # the run loop computes throughput (gbx.records.Stamper)


def test_undefined_scalars_are_left_out_of_the_mean() -> None:
    """A scalar that is NaN on some batches (explained variance when every return is
    equal) averages over the batches where it is defined; never defined, no key."""
    acc = MetricsAccumulator(num_envs=2, num_actions=2, device="cpu")
    acc.add_scalars(ev=torch.tensor(float("nan")), loss=torch.tensor(1.0), kl=float("inf"))
    acc.add_scalars(ev=torch.tensor(0.5), loss=torch.tensor(3.0), kl=float("nan"))
    acc.add_scalars(ev=torch.tensor(0.25), loss=torch.tensor(float("-inf")))
    rec = acc.summary()
    assert rec["ev"] == pytest.approx(0.375)
    assert rec["loss"] == pytest.approx(2.0)
    assert "kl" not in rec
    acc.add_scalars(ev=torch.tensor(float("nan")))
    assert "ev" not in acc.summary()


def test_accumulator_window_resets_but_episodes_carry_over() -> None:
    acc = MetricsAccumulator(num_envs=2, num_actions=2, device="cpu")
    no = torch.tensor([False, False])
    acc.add_step(torch.tensor([1.0, 1.0]), no, no)
    first = acc.summary()
    assert first["episodes"] == 0
    assert "success_rate" not in first and "dist_p50" not in first and "entropy_mean" not in first
    acc.add_step(torch.tensor([2.0, 0.0]), torch.tensor([True, False]), no)
    second = acc.summary()
    assert second["reward_mean"] == pytest.approx(1.0)
    assert second["episodes"] == 1
    assert second["episode_return_mean"] == pytest.approx(3.0)  # 1 + 2 across two windows
    assert second["episode_length_mean"] == pytest.approx(2.0)


def test_state_dict_carries_running_episodes_across_a_restart() -> None:
    acc = MetricsAccumulator(num_envs=2, num_actions=2, device="cpu")
    no = torch.tensor([False, False])
    acc.add_step(torch.tensor([1.0, 5.0]), no, no)
    state = acc.state_dict()
    resumed = MetricsAccumulator(num_envs=2, num_actions=2, device="cpu")
    resumed.load_state_dict(state)
    resumed.add_step(torch.tensor([2.0, 0.0]), torch.tensor([True, False]), no)
    rec = resumed.summary()
    assert rec["episode_return_mean"] == pytest.approx(3.0)
    assert rec["episode_length_mean"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="same num_envs"):
        MetricsAccumulator(num_envs=3, num_actions=2, device="cpu").load_state_dict(state)


def test_dist_ring_buffer_keeps_newest_samples() -> None:
    acc = MetricsAccumulator(num_envs=4, num_actions=1, device="cpu", dist_capacity=6)
    zeros = torch.zeros(4)
    no = torch.zeros(4, dtype=torch.bool)
    acc.add_step(zeros, no, no, dist=torch.tensor([100.0, 100.0, 100.0, 100.0]))
    acc.add_step(zeros, no, no, dist=torch.tensor([1.0, 2.0, 3.0, 4.0]))
    rec = acc.summary()  # buffer holds the newest 6: 100, 100, 1, 2, 3, 4
    expected = torch.quantile(
        torch.tensor([100.0, 100.0, 1.0, 2.0, 3.0, 4.0]), torch.tensor([0.1, 0.5, 0.9])
    ).tolist()
    assert [rec["dist_p10"], rec["dist_p50"], rec["dist_p90"]] == pytest.approx(expected)


_HOST_READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__")


@contextlib.contextmanager
def _count_host_reads() -> Iterator[list[str]]:
    """Count every Tensor method that copies device data to the host.

    On the CPU there is no real sync to detect, so the accumulator is checked
    structurally: any of these calls would be a device-to-host sync on CUDA.
    """
    calls: list[str] = []
    originals = {name: getattr(torch.Tensor, name) for name in _HOST_READS}

    def wrap(name: str):  # type: ignore[no-untyped-def]
        original = originals[name]

        def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            calls.append(name)
            return original(self, *args, **kwargs)

        return counted

    try:
        for name in _HOST_READS:
            setattr(torch.Tensor, name, wrap(name))
        yield calls
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def test_add_reads_nothing_back_and_summary_reads_once() -> None:
    acc = MetricsAccumulator(num_envs=4, num_actions=3, device="cpu")
    _two_step_window(acc)  # first use allocates extra slots; measure a warm window
    acc.summary()
    with _count_host_reads() as calls:
        _two_step_window(acc)
    assert calls == []
    with _count_host_reads() as calls:
        acc.summary()
    assert calls == ["tolist"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_add_does_not_sync_on_cuda() -> None:
    acc = MetricsAccumulator(num_envs=4, num_actions=3, device="cuda")
    _two_step_window(acc, "cuda")
    acc.summary()
    batch = [
        torch.rand(256, device="cuda"),
        torch.rand(256, device="cuda") < 0.1,
        torch.rand(256, device="cuda") < 0.05,
    ]
    actions = torch.randint(0, 3, (256,), device="cuda")
    acc = MetricsAccumulator(num_envs=256, num_actions=3, device="cuda")
    acc.add_scalars(loss=torch.tensor(1.0, device="cuda"))
    with no_cuda_syncs():
        for _ in range(3):
            acc.add_step(*batch, success=batch[1], actions=actions, dist=batch[0])
            acc.add_policy(entropy=batch[0], value=batch[0])
            acc.add_scalars(loss=batch[0].mean())
    rec = acc.summary()
    assert sum(rec["action_hist"]) == 3 * 256  # type: ignore[arg-type]


def test_percentiles_stay_ordered_on_ties() -> None:
    """Interpolating between equal neighbours returns them exactly (no ulp above p90)."""
    # a*(1-f) + a*f gives p10 one ulp above p50 here
    values = torch.tensor([1 / 3] * 3 + [0.375] * 2, dtype=torch.float32)
    p10, p50, p90 = percentiles(values, (0.1, 0.5, 0.9)).tolist()
    assert p10 <= p50 <= p90
    assert p10 == p50 == torch.tensor(1 / 3).item()
