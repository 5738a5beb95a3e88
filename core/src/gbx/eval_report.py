"""The one-screen summary ``gbx eval`` ends with: policy beside the random baseline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

# Rows of the table: (label, key of the policy's value); the baseline is the random_ key.
ROWS = (
    ("success rate", "success_rate"),
    ("failure rate", "failure_rate"),
    ("milestones passed (mean)", "mean_milestones"),
    ("median steps to goal", "median_steps_to_goal"),
    ("mean return", "mean_return"),
    ("mean episode length", "mean_length"),
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def summary_table(summary: Mapping[str, Any]) -> Table:
    """Metrics of the evaluated policy (and of the random policy when measured)."""
    mode = "greedy" if summary.get("greedy", True) else "sampled"
    title = (f"gbx eval: {summary.get('episodes', '?')} episodes, {mode}, "
             f"step {summary.get('step', '?')}")
    table = Table(title=title)
    baseline = any(k.startswith("random_") for k in summary)
    table.add_column("metric")
    table.add_column("policy", justify="right")
    if baseline:
        table.add_column("random policy", justify="right")
    shown: set[str] = set()
    for label, key in ROWS:
        if key not in summary:
            continue
        shown.update((key, f"random_{key}"))
        row = [label, _fmt(summary[key])]
        if baseline:
            row.append(_fmt(summary.get(f"random_{key}")))
        table.add_row(*row)
    # Whatever else the algorithm reports (its own metrics), one row each.
    skip = shown | {"episodes", "greedy", "step", "checkpoint"}
    for key, value in summary.items():
        if key not in skip and not key.startswith("random_"):
            table.add_row(key, _fmt(value), *([""] if baseline else []))
    if "checkpoint" in summary:
        table.caption = str(summary["checkpoint"])
    return table


def print_summary(summary: Mapping[str, Any], console: Console | None = None) -> None:
    from gbx.progress import stderr_console

    (console or stderr_console()).print(summary_table(summary))
