"""``print``: the core's minimal observer, one line per event on stdout.

Richer observers (console table, JSONL log, plots, GIFs) live in the
observers plugin; this one keeps bare installs informative.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gbx import hookimpl

_SKIP = {"run_id", "trace_id", "seq", "kind"}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def format_record(record: Mapping[str, Any]) -> str:
    """``key=value`` pairs of the scalar entries, ``step`` first."""
    items = [(k, v) for k, v in record.items() if k not in _SKIP]
    items.sort(key=lambda kv: kv[0] != "step")
    return " ".join(f"{k}={_fmt(v)}" for k, v in items if isinstance(v, int | float | str | bool))


class PrintObserver:
    def __init__(self, run: Any) -> None:
        self.run_id = run.run_id

    def on_run_start(self, meta: Mapping[str, Any]) -> None:
        resumed = " (resumed)" if meta.get("resume") else ""
        print(f"[{self.run_id}] start{resumed} device={meta.get('device')} seed={meta.get('seed')}",
              flush=True)

    def on_record(self, record: Mapping[str, Any]) -> None:
        print(f"[{self.run_id}] {format_record(record)}", flush=True)

    def on_eval(self, record: Mapping[str, Any]) -> None:
        print(f"[{self.run_id}] eval {format_record(record)}", flush=True)

    def on_checkpoint(self, path: Path, step: int) -> None:
        print(f"[{self.run_id}] checkpoint step={step} {path}", flush=True)

    def on_failure(self, error: Mapping[str, Any]) -> None:
        print(f"[{self.run_id}] failure trace_id={error.get('trace_id')} {error.get('error')}",
              flush=True)

    def on_run_end(self, summary: Mapping[str, Any]) -> None:
        print(f"[{self.run_id}] end {format_record(summary)}", flush=True)


@hookimpl
def register_observers(register: Any) -> None:
    register("print", PrintObserver, description="one plain line per event on stdout")
