"""Progress bars on stderr for long commands, and the summary `gbx eval` ends with."""

from __future__ import annotations

import json
import re

import click
import pytest
from click.testing import CliRunner
from gbx_testplugins import FakeEntryPoint, make_host, single_hook_plugin

from gbx.cli import build_cli
from gbx.progress import PROGRESS_ENV, progress, progress_enabled


def test_progress_is_off_when_quiet_or_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert not progress_enabled()  # pytest's stderr is not a terminal
    monkeypatch.setenv(PROGRESS_ENV, "always")
    assert progress_enabled() and not progress_enabled(quiet=True)
    monkeypatch.setenv(PROGRESS_ENV, "never")
    assert not progress_enabled()


def test_a_progress_bar_counts_on_stderr(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "always")
    with progress("frames", total=4) as bar:
        for _ in range(4):
            bar.advance()
        print("result")
    out, err = capsys.readouterr()
    assert out == "result\n"  # stdout is left to the command
    assert "frames" in err and "4/4" in err


def _eval(invoke, tmp_path, *extra: str):
    run_dir = tmp_path / "r"
    assert invoke("run", "--algo", "counter", "--steps", "64", "--run-dir", str(run_dir),
                  "--observer", "recorder").exit_code == 0
    return invoke("eval", "--checkpoint", str(run_dir), "--episodes", "3", *extra)


def test_eval_shows_progress_and_ends_with_a_summary_table(
        invoke, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "always")
    result = _eval(invoke, tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["episodes"] == 3  # the JSON on stdout is unchanged
    err = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stderr)  # colours, cursor moves
    assert "evaluating 3 episodes" in err
    assert "gbx eval: 3 episodes, greedy, step 64" in re.sub(r"\s+", " ", err)
    assert "steps_trained" in err  # the algorithm's own metrics get rows too
    assert len(err.splitlines()) < 25  # one screen


def test_eval_quiet_prints_only_the_json(invoke, tmp_path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "always")
    result = _eval(invoke, tmp_path, "--quiet")
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["steps_trained"] == 64


def test_eval_table_puts_the_policy_beside_the_random_baseline() -> None:
    from rich.console import Console

    from gbx.eval_report import print_summary

    console = Console(width=100, record=True)
    print_summary({"episodes": 4, "greedy": True, "step": 9, "success_rate": 0.75,
                   "random_success_rate": 0.25, "median_steps_to_goal": None,
                   "random_median_steps_to_goal": 12.0}, console)
    text = console.export_text()
    row = next(line for line in text.splitlines() if "success rate" in line)
    assert "0.750" in row and "0.250" in row
    assert "random policy" in text


def test_bench_shows_a_spinner_unless_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    @click.command()
    def speed() -> None:
        click.echo(json.dumps({"n": 1}))

    host = make_host(FakeEntryPoint("b", single_hook_plugin(
        "register_benchmarks", lambda register: register("speed", speed)), "gbx-bench"))
    monkeypatch.setenv(PROGRESS_ENV, "always")
    shown = CliRunner().invoke(build_cli(host), ["bench", "speed"])
    assert shown.exit_code == 0 and json.loads(shown.stdout) == {"n": 1}
    assert "gbx bench speed" in shown.stderr
    quiet = CliRunner().invoke(build_cli(host), ["bench", "--quiet", "speed"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and json.loads(quiet.stdout) == {"n": 1}


def test_the_summary_table_names_the_milestones_row() -> None:
    from rich.console import Console

    from gbx.eval_report import summary_table

    console = Console(width=100, record=True)
    console.print(summary_table({"episodes": 4, "success_rate": 0.0, "mean_milestones": 1.5,
                                 "random_success_rate": 0.0, "random_mean_milestones": 0.25}))
    text = console.export_text()
    row = next(line for line in text.splitlines() if "milestones passed (mean)" in line)
    assert "1.500" in row and "0.250" in row
