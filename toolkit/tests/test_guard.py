"""The non-finite guard: one host read per check, informative failures."""

from __future__ import annotations

import math

import pytest
import torch

from gbx_toolkit.guard import FiniteGuard, NonFiniteError


def test_finite_values_pass_and_clear() -> None:
    guard = FiniteGuard("cpu")
    guard.watch("loss", torch.tensor(1.5))
    guard.watch("grads", torch.ones(3))
    guard.check({"unused": torch.tensor([1.0])})
    guard.check()  # nothing queued: no-op


def test_nan_raises_with_trace_id_and_batch_stats() -> None:
    guard = FiniteGuard("cpu")
    guard.watch("loss_policy", torch.tensor(0.3))
    guard.watch("loss_value", torch.tensor(math.nan))
    guard.watch("loss_value", torch.tensor(math.inf))
    guard.watch("grad_norm", torch.tensor(math.inf))
    rewards = torch.tensor([1.0, math.nan, 3.0])
    with pytest.raises(NonFiniteError) as info:
        guard.check(lambda: {"rewards": rewards, "lr": 1e-3}, step=640)
    err = info.value
    assert len(err.trace_id) == 12 and err.trace_id in str(err)
    assert err.offending == ["loss_value", "grad_norm"]
    assert err.step == 640
    stats = err.batch_stats
    assert stats["lr"] == 1e-3
    assert stats["rewards"]["nan"] == 1 and stats["rewards"]["mean"] == pytest.approx(2.0)
    assert stats["watched"]["loss_value"]["index"] == 1  # the first offending sample
    assert stats["watched"]["loss_value"]["nan"] == 1
    assert err.to_dict()["trace_id"] == err.trace_id


def test_grad_norm_watch_catches_inf_gradients() -> None:
    p = torch.nn.Parameter(torch.ones(2))
    (p * torch.tensor([1.0, math.inf])).sum().backward()
    guard = FiniteGuard("cpu")
    norm = guard.watch_grads("grad_norm", [p])
    assert math.isinf(norm.item())
    with pytest.raises(NonFiniteError, match="grad_norm"):
        guard.check()


def test_check_reads_the_device_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = []
    original = torch.Tensor.item

    def counting_item(self: torch.Tensor):  # type: ignore[no-untyped-def]
        reads.append(1)
        return original(self)

    guard = FiniteGuard("cpu")
    for i in range(20):
        guard.watch(f"t{i % 3}", torch.tensor(float(i)))
    monkeypatch.setattr(torch.Tensor, "item", counting_item)
    guard.check()
    assert len(reads) == 1


def test_batch_stats_travel_with_the_traceback() -> None:
    import traceback

    guard = FiniteGuard("cpu")
    guard.watch("loss", torch.tensor(math.nan))
    with pytest.raises(NonFiniteError) as info:
        guard.check({"rewards": torch.tensor([2.0, 4.0])})
    text = "".join(traceback.format_exception(info.value))
    assert "batch statistics:" in text and '"rewards"' in text and '"mean": 3.0' in text
