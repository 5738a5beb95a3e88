"""``gbx plugins``: what is installed and what each plugin provides."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gbx.plugins import PluginHost

KINDS = ("algorithms", "envs", "observers", "writers", "models", "commands", "benchmarks",
         "fuzz_targets")


def report(host: PluginHost) -> dict[str, Any]:
    """Plain data: one entry per loaded plugin, the ones that failed to load or register,
    and the names two plugins registered (withdrawn until one is uninstalled)."""
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
    clashes = [
        {"kind": kind, "name": name, "error": message}
        for (kind, name), message in sorted(host.registry.clashes.items())
    ]
    failed = {f.name for f in host.failures}
    left_out = [{"name": name, "why": why} for name, why in sorted(host.registry.unloaded.items())
                if name not in failed]
    return {"plugins": plugins, "failures": failures, "clashes": clashes, "left_out": left_out}


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
        table.add_row(f["name"], f["distribution"], "?",
                      f"[red]failed to load: {escape(f['error'])}[/red]")
    console.print(table)
    for c in data.get("clashes", []):
        console.print(f"[red]clash: {escape(c['error'])}[/red]")
    for p in data.get("left_out", []):
        console.print(f"not loaded: {escape(p['name'])} ({escape(p['why'])})", soft_wrap=True)
    # The core knows no plugin by name; what is not listed needs its distribution installed.
    console.print("An algorithm, env or observer not listed here comes from a distribution "
                  "that is not installed: pip install it (or pip install -e its folder).",
                  soft_wrap=True)
