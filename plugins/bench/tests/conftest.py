"""A host with the bench plugin and the core's counting test algorithm, and a CLI runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The counting test algorithm and the fake entry points of the core's tests (by path).
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "core" / "tests"))

from gbx_testplugins import FakeEntryPoint, counter_plugin, make_host  # noqa: E402

import gbx_bench.plugin  # noqa: E402
from gbx.plugins import PluginHost  # noqa: E402


@pytest.fixture
def host() -> PluginHost:
    """Built-ins, the bench plugin and the test algorithm ``counter``."""
    return make_host(FakeEntryPoint("counter", counter_plugin, "gbx-test-counter"),
                     FakeEntryPoint("bench", gbx_bench.plugin, "gbx-bench"))


@pytest.fixture
def invoke(host: PluginHost):  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from gbx.cli import build_cli

    runner = CliRunner()

    def run(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(build_cli(host), list(args), catch_exceptions=False)

    return run
