from __future__ import annotations

import os
import subprocess
import sys

import attrs
import pytest
from click.testing import CliRunner
from gbx_testplugins import FakeEntryPoint, counter_plugin, make_host

from gbx.cli import build_cli
from gbx.errors import PluginError


@attrs.frozen
class _Cfg:
    x: int = 1


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


def test_plugin_raising_in_its_hook_is_named_and_skipped() -> None:
    from gbx_testplugins import PluginObject, hookimpl

    def bad(register):
        raise RuntimeError("kaput")

    def half(register):  # registered before the other hook raised: dropped with the plugin
        register("half-env", lambda *a: None, _Cfg)

    warnings: list[str] = []
    plugin = PluginObject(register_envs=hookimpl(half), register_algorithms=hookimpl(bad))
    host = make_host(FakeEntryPoint("bad", plugin, "gbx-bad"),
                     FakeEntryPoint("counter", counter_plugin, "gbx-test-counter"),
                     warnings=warnings)
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert "'bad'" in warnings[0] and "gbx-bad" in warnings[0] and "kaput" in warnings[0]
    assert [(f.name, f.distribution) for f in host.failures] == [("bad", "gbx-bad")]
    assert "half-env" not in host.registry.envs and "bad" not in [p.name for p in host.plugins]
    assert "counter" in host.registry.algorithms
    result = CliRunner().invoke(build_cli(host), ["plugins"])
    assert result.exit_code == 0 and "kaput" in result.output
    with pytest.raises(PluginError, match="'bad'.*gbx-bad.*register_algorithms.*kaput"):
        make_host(FakeEntryPoint("bad", plugin, "gbx-bad"),
                  environ={"GBX_STRICT_PLUGINS": "1"})


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


def test_plugin_command_clashing_with_a_core_command_keeps_the_core_one() -> None:
    import click
    from gbx_testplugins import single_hook_plugin

    def add(cli):
        @cli.command(name="plugins")
        def other() -> None:
            click.echo("mine")

    host = make_host(FakeEntryPoint("x", single_hook_plugin("register_commands", add), "gbx-x"))
    cli = build_cli(host)
    assert "'plugins'" in host.registry.clashes[("command", "plugins")]
    result = CliRunner().invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0 and "mine" not in result.output
    assert "gbx-x" in result.output  # the listing shows the clash


def test_two_plugins_adding_one_command_make_only_that_command_fail() -> None:
    import click
    from gbx_testplugins import single_hook_plugin

    def add(cli):
        @cli.command(name="hello")
        def hello() -> None:
            click.echo("hi")

    def raising(cli):
        raise ValueError("no commands today")

    host = make_host(FakeEntryPoint("h1", single_hook_plugin("register_commands", add), "gbx-h1"),
                     FakeEntryPoint("h2", single_hook_plugin("register_commands", add), "gbx-h2"),
                     FakeEntryPoint("h3", single_hook_plugin("register_commands", raising),
                                    "gbx-h3"))
    cli = build_cli(host)
    clash = CliRunner().invoke(cli, ["hello", "--anything"])
    assert clash.exit_code == 2
    assert clash.output.count("\n") == 1 and "gbx-h1" in clash.output and "gbx-h2" in clash.output
    listing = CliRunner().invoke(cli, ["plugins", "--json"])
    assert listing.exit_code == 0 and "no commands today" in listing.output
    assert "'hello'" in listing.output


def test_python_dash_m_gbx_help_works_without_entry_points() -> None:
    env = dict(os.environ, GBX_PLUGINS="")
    out = subprocess.run([sys.executable, "-m", "gbx", "--help"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "plugins" in out.stdout and out.stderr == ""
