from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from gbx_testplugins import FakeEntryPoint, counter_plugin, make_host

from gbx.cli import build_cli
from gbx.errors import PluginError


def broken() -> FakeEntryPoint:
    return FakeEntryPoint("broken", None, "gbx-broken",
                          error=ModuleNotFoundError("No module named 'missing_dep'"))


def test_broken_plugin_warns_once_and_the_rest_keeps_working() -> None:
    warnings: list[str] = []
    host = make_host(broken(), FakeEntryPoint("counter", counter_plugin, "gbx-test-counter"),
                     warnings=warnings)
    assert len(warnings) == 1
    assert "'broken'" in warnings[0] and "gbx-broken" in warnings[0]
    assert "missing_dep" in warnings[0] and "\n" not in warnings[0]
    assert "counter" in host.registry.algorithms
    assert [f.name for f in host.failures] == ["broken"]
    result = CliRunner().invoke(build_cli(host), ["--help"])
    assert result.exit_code == 0 and "run" in result.output


def test_strict_mode_turns_a_broken_plugin_into_an_error() -> None:
    with pytest.raises(PluginError, match="broken.*gbx-broken.*missing_dep"):
        make_host(broken(), environ={"GBX_STRICT_PLUGINS": "1"})


def test_gbx_plugins_selects_entry_points_and_empty_selects_none() -> None:
    eps = [FakeEntryPoint("counter", counter_plugin, "gbx-test-counter"), broken()]
    only = make_host(*eps, environ={"GBX_PLUGINS": "counter"})
    assert [p.name for p in only.plugins if not p.builtin] == ["counter"]
    assert only.failures == []
    warnings: list[str] = []
    make_host(*eps, environ={"GBX_PLUGINS": "counter,nope"}, warnings=warnings)
    assert warnings == ["gbx: warning: GBX_PLUGINS names nope, which no installed "
                        "distribution provides"]
    none = make_host(*eps, environ={"GBX_PLUGINS": ""})
    assert [p.name for p in none.plugins if not p.builtin] == []
    assert "toy" in none.registry.envs  # built-ins always load


def test_optional_builtin_module_is_skipped_when_absent() -> None:
    from gbx.plugins import load_plugins

    host = load_plugins(entry_points=[], environ={},
                        builtin_modules=("gbx.toy", "gbx.no_such_module"))
    assert [p.name for p in host.plugins] == ["gbx.toy"]


def test_plugin_raising_in_its_hook_is_named() -> None:
    from gbx_testplugins import single_hook_plugin

    def bad(register):
        raise RuntimeError("kaput")

    with pytest.raises(PluginError, match="'bad'.*gbx-bad.*register_envs.*kaput"):
        make_host(FakeEntryPoint("bad", single_hook_plugin("register_envs", bad), "gbx-bad"))


def test_plugin_commands_are_added_and_attributed() -> None:
    import click
    from gbx_testplugins import single_hook_plugin

    def add(cli):
        @cli.command()
        def hello() -> None:
            click.echo("hi")

    host = make_host(FakeEntryPoint("hello", single_hook_plugin("register_commands", add),
                                    "gbx-hello"))
    cli = build_cli(host)
    assert CliRunner().invoke(cli, ["hello"]).output == "hi\n"
    assert host.registry.commands["hello"].provider.distribution == "gbx-hello"


def test_plugin_command_clashing_with_a_core_command_is_an_error() -> None:
    import click
    from gbx_testplugins import single_hook_plugin

    def add(cli):
        @cli.command(name="run")
        def other() -> None:
            click.echo("mine")

    host = make_host(FakeEntryPoint("x", single_hook_plugin("register_commands", add), "gbx-x"))
    with pytest.raises(PluginError, match="'run'.*gbx-core.*gbx-x"):
        build_cli(host)


def test_python_dash_m_gbx_help_works_without_entry_points() -> None:
    env = dict(os.environ, GBX_PLUGINS="")
    out = subprocess.run([sys.executable, "-m", "gbx", "--help"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "plugins" in out.stdout and out.stderr == ""
