"""The ``console`` observer: live progress on a terminal, sparse plain lines otherwise."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from gbx_observers.options import ConsoleConfig

_TOTAL_KEYS = ("total_env_steps", "total_steps", "env_steps_total", "max_env_steps")


def find_total_steps(meta: Mapping[str, Any]) -> int | None:
    """The run's env-step budget, from the meta dict or its resolved config, if stated.

    An algorithm's own ``total_env_steps`` wins over the run's ``run.steps``;
    other spellings are looked up anywhere in the meta dict.
    """
    config = meta.get("config")
    if isinstance(config, Mapping):
        for section, key in (("algo", "total_env_steps"), ("run", "steps")):
            part = config.get(section)
            value = part.get(key) if isinstance(part, Mapping) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    stack: list[Mapping[str, Any]] = [meta]
    while stack:  # breadth-first: top-level keys win over nested config ones
        current = stack.pop(0)
        for key in _TOTAL_KEYS:
            value = current.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        stack.extend(v for v in current.values() if isinstance(v, Mapping))
    return None


def format_eta(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _fmt(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


def summary_line(record: Mapping[str, Any], total: int | None, eta_s: float | None) -> str:
    """One plain progress line for a record."""
    steps = record.get("env_steps", 0)
    of_total = f"/{total:,}" if total else ""
    parts = [
        f"steps {steps:,}{of_total}" if isinstance(steps, int) else "steps -",
        f"sps {_fmt(record.get('sps'), ',.0f')}",
        f"reward {_fmt(record.get('reward_mean'), '.4g')}",
        f"success {_fmt(record.get('success_rate'), '.1%')}",
    ]
    if total:
        parts.append(f"eta {format_eta(eta_s)}")
    return " | ".join(parts)


class ConsoleObserver:
    """Shows env steps, sps, reward, success rate and ETA.

    On a TTY a ``rich`` progress bar is redrawn in place. Otherwise (CI,
    redirected output) one plain line is printed every ``every`` updates
    (``observer.console.every``, default 10), plus evaluations and the run's end.
    """

    def __init__(
        self, run: Any = None, config: ConsoleConfig | None = None, *,
        stream: IO[str] | None = None,
    ) -> None:
        self.run = run
        self.stream = stream if stream is not None else sys.stdout
        self.every = (config if config is not None else ConsoleConfig()).every
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total: int | None = None
        self._count = 0
        self._start = time.monotonic()
        self._first_steps: int | None = None
        self._last: Mapping[str, Any] | None = None
        self._progress: Any = None
        self._task: Any = None

    def on_run_start(self, meta: Mapping[str, Any]) -> None:
        self.total = find_total_steps(meta)
        self._start = time.monotonic()
        run_id = meta.get("run_id", getattr(self.run, "run_id", ""))
        if self.interactive:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[line]}", markup=False),
                console=Console(file=self.stream),
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                str(run_id), total=self.total, line="starting"
            )
        else:
            budget = f", {self.total:,} env steps" if self.total else ""
            self._print(f"run {run_id} started{budget}")

    def on_record(self, record: Mapping[str, Any]) -> None:
        self._count += 1
        self._last = record
        steps = record.get("env_steps")
        if isinstance(steps, int) and self._first_steps is None:
            self._first_steps = steps
        line = summary_line(record, self.total, self._eta(steps))
        if self._progress is not None:
            self._progress.update(
                self._task, completed=steps if isinstance(steps, int) else 0, line=line
            )
        elif self._count == 1 or self._count % self.every == 0:
            self._print(line)

    def on_eval(self, record: Mapping[str, Any]) -> None:
        line = "eval @ {} | return {} | success {}".format(
            record.get("env_steps", "-"),
            _fmt(record.get("mean_return"), ".4g"),
            _fmt(record.get("success_rate"), ".1%"),
        )
        if isinstance(record.get("random_success_rate"), int | float):
            line += f" (random policy {record['random_success_rate']:.1%})"
        self._print(line)

    def on_failure(self, error: Mapping[str, Any]) -> None:
        message = error.get("message", error.get("error", "run failed"))
        trace = error.get("trace_id")
        self._print(f"FAILURE: {message}" + (f" (trace {trace})" if trace else ""))

    def on_run_end(self, summary: Mapping[str, Any]) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        elapsed = time.monotonic() - self._start
        final = summary_line(self._last, self.total, None) if self._last else "no records"
        status = summary.get("status", "finished")
        self._print(f"run {status} after {format_eta(elapsed)}: {final}")

    def _eta(self, steps: Any) -> float | None:
        if not (self.total and isinstance(steps, int) and self._first_steps is not None):
            return None
        done = steps - self._first_steps
        elapsed = time.monotonic() - self._start
        if done <= 0 or elapsed <= 0:
            return None
        return max(self.total - steps, 0) * elapsed / done

    def _print(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)
