"""``gbx plugins``: what is installed and what each plugin provides."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from gbx.plugins import PluginHost

KINDS = ("algorithms", "envs", "observers", "writers", "models", "commands", "benchmarks",
         "fuzz_targets")


def report(host: PluginHost) -> dict[str, Any]:
    """Plain data: one entry per loaded plugin, plus the ones that failed to load."""
    plugins = [
        {
            "name": p.name,
            "distribution": p.distribution,
            "version": p.version,
            "builtin": p.builtin,
            "provides": host.registry.provided_by(p.name),
        }
        for p in host.plugins
    ]
    failures = [
        {"name": f.name, "distribution": f.distribution, "error": f.error} for f in host.failures
    ]
    return {"plugins": plugins, "failures": failures}


def print_table(data: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="gbx plugins")
    for column in ("plugin", "distribution", "version", "provides"):
        table.add_column(column)
    for p in data["plugins"]:
        provides = "; ".join(
            f"{kind}: {', '.join(names)}" for kind, names in p["provides"].items() if names
        )
        table.add_row(p["name"], p["distribution"], p["version"], provides or "-")
    for f in data["failures"]:
        table.add_row(f["name"], f["distribution"], "?", f"[red]failed to load: {f['error']}[/red]")
    console.print(table)
