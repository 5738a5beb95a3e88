"""The ``tensorboard`` observer: the log's scalars as TensorBoard event files.

Needs the optional ``tensorboard`` package (``pip install gbx-observers[tensorboard]``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Identity, counter and bookkeeping keys are the x axis or labels, not curves.
_NOT_SCALARS = frozenset({"run_id", "trace_id", "env_steps", "opt_steps", "step", "seq"})


def scalars_of(record: Mapping[str, Any], prefix: str) -> dict[str, float]:
    """Plottable scalars of a record: finite numbers (bools excluded), nested dicts flattened."""
    out: dict[str, float] = {}
    for key, value in record.items():
        if key in _NOT_SCALARS or isinstance(value, bool):
            continue
        if isinstance(value, Mapping):
            out.update(scalars_of(value, f"{prefix}{key}/"))
        elif isinstance(value, int | float) and math.isfinite(value):
            out[f"{prefix}{key}"] = float(value)
    return out


class TensorBoardObserver:
    """Writes ``run_dir/tensorboard/`` event files, one point per record at its env_steps."""

    def __init__(self, run: Any) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # the extra is not installed
            from gbx.errors import PluginNotInstalledError

            raise PluginNotInstalledError(
                "the tensorboard observer needs the tensorboard package: "
                "pip install 'gbx-observers[tensorboard]'"
            ) from exc
        self.log_dir = Path(run.run_dir) / "tensorboard"
        self._writer = SummaryWriter(log_dir=str(self.log_dir))
        self._step = 0

    def on_run_start(self, meta: Mapping[str, Any]) -> None:
        run_id = meta.get("run_id")
        if run_id is not None:
            self._writer.add_text("run/run_id", str(run_id), 0)

    def on_record(self, record: Mapping[str, Any]) -> None:
        self._step = int(record.get("env_steps", self._step))
        for tag, value in scalars_of(record, "train/").items():
            self._writer.add_scalar(tag, value, self._step)
        hist = record.get("action_hist")
        if isinstance(hist, list) and sum(hist) > 0:
            total = float(sum(hist))
            for index, count in enumerate(hist):
                self._writer.add_scalar(f"actions/{index}", count / total, self._step)

    def on_eval(self, record: Mapping[str, Any]) -> None:
        step = int(record.get("env_steps", self._step))
        for tag, value in scalars_of(record, "eval/").items():
            self._writer.add_scalar(tag, value, step)
        self._writer.flush()

    def on_run_end(self, summary: Mapping[str, Any]) -> None:
        self._writer.flush()
        self._writer.close()
