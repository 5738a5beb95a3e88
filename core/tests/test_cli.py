from __future__ import annotations

import json

import click
from click.testing import CliRunner
from gbx_testplugins import FakeEntryPoint, counter_plugin, make_host, single_hook_plugin

from gbx.cli import build_cli


def test_plugins_table_lists_core_and_plugins(invoke) -> None:
    result = invoke("plugins")
    assert result.exit_code == 0
    for text in ("gbx.toy", "gbx-core", "toy", "counter", "gbx-test-counter", "9.9.9"):
        assert text in result.output


def test_plugins_json_reports_what_each_provides_and_failures() -> None:
    broken = FakeEntryPoint("broken", None, "gbx-broken", error=ImportError("nope"))
    host = make_host(FakeEntryPoint("counter", counter_plugin, "gbx-test-counter"), broken)
    result = CliRunner().invoke(build_cli(host), ["plugins", "--json"])
    data = json.loads(result.stdout)
    by_name = {p["name"]: p for p in data["plugins"]}
    assert by_name["counter"]["distribution"] == "gbx-test-counter"
    assert by_name["counter"]["provides"]["algorithms"] == ["counter"]
    assert by_name["counter"]["provides"]["observers"] == ["recorder"]
    assert by_name["gbx.toy"]["provides"]["envs"] == ["toy"]
    assert data["failures"] == [{"name": "broken", "distribution": "gbx-broken",
                                 "error": "ImportError: nope"}]


def test_eval_loads_the_checkpoint_and_dispatches(invoke, tmp_path) -> None:
    run_dir = tmp_path / "r"
    assert invoke("run", "--algo", "counter", "--steps", "64", "--run-dir", str(run_dir),
                  "--observer", "recorder").exit_code == 0
    result = invoke("eval", "--checkpoint", str(run_dir), "--episodes", "3", "--sample")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary == {"episodes": 3, "greedy": False, "baseline": True, "steps_trained": 64,
                       "step": 64,
                       "checkpoint": str(run_dir / "checkpoints" / "ckpt_000000000064.pt")}


def test_eval_of_a_directory_without_checkpoint_is_exit_2(invoke, tmp_path) -> None:
    result = invoke("eval", "--checkpoint", str(tmp_path))
    assert result.exit_code == 2 and "no checkpoint" in result.stderr


def test_bench_dispatches_to_registered_benchmarks() -> None:
    @click.command()
    @click.option("--n", type=int, default=2)
    def speed(n: int) -> None:
        click.echo(json.dumps({"n": n}))

    def register(register):
        register("speed", speed)

    host = make_host(FakeEntryPoint("b", single_hook_plugin("register_benchmarks", register),
                                    "gbx-bench"))
    cli = build_cli(host)
    assert json.loads(CliRunner().invoke(cli, ["bench", "speed", "--n", "5"]).output) == {"n": 5}
    assert "speed" in CliRunner().invoke(cli, ["bench", "--help"]).output
    assert host.registry.provided_by("b")["benchmarks"] == ["speed"]


def test_config_command_prints_resolved_toml_and_explains_fields(invoke) -> None:
    result = invoke("config", "--algo", "counter", "--set", "algo.lr=0.5")
    assert result.exit_code == 0
    assert "[algo]" in result.output and "lr = 0.5" in result.output
    explained = invoke("config", "--algo", "counter", "--explain").output
    assert "env.grid (int, default 4): board size" in explained
