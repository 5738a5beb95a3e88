"""Non-finite guard: stop a run the moment a loss or gradient stops being finite.

A :class:`FiniteGuard` collects "is this finite?" flags on the device while an
update runs (``watch``) and reads them back with a single host transfer at
the end of the update (``check``). Only when something is wrong does it spend
more host reads to describe the failure; it then raises
:class:`NonFiniteError`, which carries a trace id and the offending batch
statistics so the run's failure bundle can show them.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import torch


class NonFiniteError(RuntimeError):
    """A loss or gradient became NaN/Inf. ``trace_id`` names this failure in logs and bundles."""

    def __init__(
        self,
        message: str,
        *,
        trace_id: str,
        offending: list[str],
        batch_stats: Mapping[str, Any],
        step: int | None = None,
    ) -> None:
        super().__init__(f"{message} [trace {trace_id}]")
        self.trace_id = trace_id
        self.offending = list(offending)
        self.batch_stats = dict(batch_stats)
        self.step = step
        # Notes travel with the formatted traceback, so failure bundles that store
        # the traceback also keep the statistics.
        self.add_note("batch statistics: " + json.dumps(self.batch_stats, default=str))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for failure bundles."""
        return {
            "error": "NonFiniteError",
            "message": str(self),
            "trace_id": self.trace_id,
            "offending": self.offending,
            "batch_stats": self.batch_stats,
            "step": self.step,
        }


def new_trace_id() -> str:
    return uuid.uuid4().hex[:12]


def tensor_stats(t: torch.Tensor) -> dict[str, float | int | list[int]]:
    """Host summary of a tensor, robust to NaN/Inf (failure path only: it syncs)."""
    x = t.detach().float()
    finite = torch.isfinite(x)
    n_finite = int(finite.sum().item())
    out: dict[str, float | int | list[int]] = {
        "shape": list(t.shape),
        "numel": t.numel(),
        "nan": int(torch.isnan(x).sum().item()),
        "inf": int(torch.isinf(x).sum().item()),
    }
    if n_finite:
        v = x[finite]
        out.update(
            min=float(v.min().item()),
            max=float(v.max().item()),
            mean=float(v.mean().item()),
            std=float(v.std(unbiased=False).item()),
        )
    else:
        out.update(min=math.nan, max=math.nan, mean=math.nan, std=math.nan)
    return out


class FiniteGuard:
    """Device-side accumulator of finiteness flags, read once per update.

    ``watch(name, tensor)`` queues one flag per call without syncing;
    ``check(...)`` performs the single host read and raises on failure.
    Flags are kept (not and-reduced) so a failure can name the first offender.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._names: list[str] = []
        self._flags: list[torch.Tensor] = []
        self._tensors: list[torch.Tensor] = []

    def watch(self, name: str, tensor: torch.Tensor) -> None:
        """Queue a finiteness check of ``tensor`` (kept by reference for the failure report).

        Watch small tensors (losses, norms): each is held until ``check``.
        """
        self._names.append(name)
        self._flags.append(torch.isfinite(tensor.detach()).all())
        self._tensors.append(tensor.detach())

    def watch_grads(self, name: str, parameters: Any) -> torch.Tensor:
        """Queue the check of the total gradient norm of ``parameters``; return that norm."""
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            norm = torch.zeros((), device=self.device)
        else:
            norm = torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(g.detach().float()) for g in grads])
            )
        self.watch(name, norm)
        return norm

    def reset(self) -> None:
        self._names.clear()
        self._flags.clear()
        self._tensors.clear()

    def check(
        self,
        batch_stats: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        *,
        step: int | None = None,
    ) -> None:
        """One host read of all queued flags; raise :class:`NonFiniteError` if any is false.

        ``batch_stats`` (or a callable producing it, evaluated only on failure)
        describes the batch the update used; tensors in it are summarised.
        """
        if not self._flags:
            return
        ok = bool(torch.stack(self._flags).all().item())  # the one sync of this update
        if ok:
            self.reset()
            return
        flags = torch.stack(self._flags).tolist()
        first_bad: dict[str, int] = {}
        for i, (name, flag) in enumerate(zip(self._names, flags, strict=True)):
            if not flag and name not in first_bad:
                first_bad[name] = i
        first_seen = list(first_bad)
        stats = batch_stats() if callable(batch_stats) else dict(batch_stats or {})
        described: dict[str, Any] = {
            k: tensor_stats(v) if isinstance(v, torch.Tensor) else v for k, v in stats.items()
        }
        described["watched"] = {
            n: {"index": i, **tensor_stats(self._tensors[i])} for n, i in first_bad.items()
        }
        self.reset()
        raise NonFiniteError(
            f"non-finite value in {', '.join(first_seen)}"
            + (f" at step {step}" if step is not None else "")
            + ": lower the learning rate or check the rewards/observations",
            trace_id=new_trace_id(),
            offending=first_seen,
            batch_stats=described,
            step=step,
        )
