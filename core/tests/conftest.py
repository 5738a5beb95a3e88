"""Shared fixtures: plugin hosts built from fake entry points, and a CLI runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # gbx_testplugins, imported by path

from gbx_testplugins import FakeEntryPoint, counter_plugin, make_host

from gbx.plugins import PluginHost


@pytest.fixture
def host() -> PluginHost:
    """Built-ins plus the test plugin (algorithm ``counter``, observer ``recorder``)."""
    return make_host(FakeEntryPoint("counter", counter_plugin, "gbx-test-counter"))


@pytest.fixture
def cli(host: PluginHost):
    from gbx.cli import build_cli

    return build_cli(host)


@pytest.fixture
def invoke(cli):
    from click.testing import CliRunner

    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return run
