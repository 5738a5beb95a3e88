"""The plugin loaded through the core, and observers fed real metrics from the toy env."""

from __future__ import annotations

import io
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from observer_testdata import simulate_run
from PIL import Image

from gbx.testing import InMemoryRunContext
from gbx_observers.cli import gif_command
from gbx_observers.console import ConsoleObserver
from gbx_observers.jsonl import JsonlObserver
from gbx_observers.logfile import load_log, validate_log
from gbx_observers.options import ConsoleConfig
from gbx_observers.plot import PlotObserver

pytest.importorskip("gbx.toy", reason="needs the core's toy env")


def test_plugin_registers_through_the_core() -> None:
    plugins = pytest.importorskip("gbx.plugins", reason="needs the core's plugin manager")
    host = plugins.load_plugins(environ={"GBX_PLUGINS": "observers", "GBX_STRICT_PLUGINS": "1"})
    names = set(host.registry.observers)
    assert {"jsonl", "console", "plot", "gif", "tensorboard"} <= names
    assert {w.kind for w in host.registry.writers if w.provider.plugin == "observers"} == {
        "failure", "media"}
    cli = click.Group("gbx")
    host.add_commands(cli)
    assert {"log", "gif"} <= set(cli.commands)
    assert set(cli.commands["log"].commands) == {"validate", "plot"}  # type: ignore[attr-defined]


def test_toy_run_produces_a_valid_log_and_plot(run: InMemoryRunContext) -> None:
    console_out = io.StringIO()
    observers = [JsonlObserver(run),
                 ConsoleObserver(run, ConsoleConfig(every=4), stream=console_out),
                 PlotObserver(run)]
    simulate_run(run, observers, updates=8)
    summary = validate_log(run.run_dir / "train_log.jsonl")
    assert summary.ok, summary.first_problem
    assert (summary.records, summary.evals, summary.errors) == (8, 2, 0)
    log = load_log(run.run_dir / "train_log.jsonl")
    first = log.records[0]
    assert first["episodes"] > 0 and 0.0 <= first["dist_p10"] <= first["dist_p90"] <= 1.0
    assert sum(first["action_hist"]) == 32 * 16
    assert log.evals[0]["random_success_rate"] >= 0.0
    assert (run.run_dir / "media" / "train.png").stat().st_size > 10_000
    assert console_out.getvalue().count("steps ") >= 3


def test_gif_command_replays_a_checkpoint(tmp_path: Path) -> None:
    plugins = pytest.importorskip("gbx.plugins", reason="needs the core's plugin manager")
    from gbx.artifacts import write_checkpoint
    from gbx.config import build_config, to_dict

    host = plugins.load_plugins(
        entry_points=[],
        builtin_modules=(*plugins.BUILTIN_MODULES, "gbx_observers.plugin", "observer_test_walker"),
    )
    config = build_config(
        host.registry, base={"run": {"algo": "walker", "env": "toy"},
                             "env": {"random_start": False}},
    )
    run_dir = tmp_path / "run"
    write_checkpoint(run_dir, {"step": 4096, "run_id": "walk-1", "config": to_dict(config),
                               "state": {"cycle": [6, 4]}})  # RIGHT, DOWN: reaches the goal
    out = tmp_path / "gif"
    result = CliRunner().invoke(
        gif_command, ["--checkpoint", str(run_dir), "--out", str(out), "--steps", "10"], obj=host
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "rollout.jsonl").read_text().splitlines()]
    assert [r["action"] for r in rows[:4]] == [6, 4, 6, 4]
    assert rows[5]["done"]  # six moves from the top-left corner of the 4x4 board
    meta = json.loads((out / "meta.json").read_text())
    assert meta["run_id"] == "walk-1" and meta["env_steps"] == 4096 and meta["algo"] == "walker"
    with Image.open(out / "rollout.gif") as gif:
        assert gif.n_frames == 11


def test_gif_observer_inside_gbx_run_writes_a_rollout_at_evaluation(tmp_path: Path) -> None:
    plugins = pytest.importorskip("gbx.plugins", reason="needs the core's plugin manager")
    from gbx.config import build_config
    from gbx.runner import execute

    host = plugins.load_plugins(
        entry_points=[],
        builtin_modules=(*plugins.BUILTIN_MODULES, "gbx_observers.plugin", "observer_test_walker"),
    )
    run_dir = tmp_path / "run"
    config = build_config(
        host.registry,
        flags={"algo": "walker", "env": "toy", "device": "cpu", "steps": 8,
               "run_dir": str(run_dir), "observers": ("gif", "jsonl")},
        overrides=["observer.gif.steps=6"],
    )
    execute(config, host)
    gif = run_dir / "media" / "eval_0" / "rollout.gif"
    assert gif.is_file()
    with Image.open(gif) as img:
        assert img.n_frames >= 2
    rows = (run_dir / "media" / "eval_0" / "rollout.jsonl").read_text().splitlines()
    assert len(rows) == 6


def test_failure_bundle_of_a_real_run_has_the_last_frames_and_actions(tmp_path: Path) -> None:
    plugins = pytest.importorskip("gbx.plugins", reason="needs the core's plugin manager")
    from gbx.config import build_config
    from gbx.errors import RunFailedError
    from gbx.runner import execute

    host = plugins.load_plugins(
        entry_points=[],
        builtin_modules=(*plugins.BUILTIN_MODULES, "gbx_observers.plugin", "observer_test_walker"),
    )
    run_dir = tmp_path / "run"
    config = build_config(
        host.registry,
        flags={"algo": "crasher", "env": "toy", "device": "cpu", "steps": 8,
               "run_dir": str(run_dir), "observers": ("jsonl",)},
    )
    with pytest.raises(RunFailedError) as info:
        execute(config, host)
    bundle = run_dir / "failures" / info.value.trace_id
    assert sorted(p.name for p in (bundle / "frames").iterdir()) == [
        "frame_000.png", "frame_001.png", "frame_002.png", "frame_003.png"]
    assert (bundle / "frames.gif").is_file()
    assert json.loads((bundle / "actions.json").read_text()) == [6, 4, 6]
    assert "the model blew up" in (bundle / "error.txt").read_text()
    assert "gbx run --config" in (bundle / "repro.txt").read_text()


def test_gif_command_shows_rollout_progress_unless_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugins = pytest.importorskip("gbx.plugins", reason="needs the core's plugin manager")
    import re

    from gbx.artifacts import write_checkpoint
    from gbx.config import build_config, to_dict

    host = plugins.load_plugins(
        entry_points=[],
        builtin_modules=(*plugins.BUILTIN_MODULES, "gbx_observers.plugin", "observer_test_walker"),
    )
    config = build_config(host.registry, base={"run": {"algo": "walker", "env": "toy"}})
    run_dir = tmp_path / "run"
    write_checkpoint(run_dir, {"step": 8, "run_id": "walk-2", "config": to_dict(config),
                               "state": {"cycle": [6, 4]}})
    monkeypatch.setenv("GBX_PROGRESS", "always")
    args = ["--checkpoint", str(run_dir), "--out", str(tmp_path / "gif"), "--steps", "10"]
    shown = CliRunner().invoke(gif_command, args, obj=host)
    assert shown.exit_code == 0, shown.output
    err = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.stderr)
    assert "rollout steps" in err and "10/10" in err
    assert json.loads(shown.stdout)["gif"].endswith("rollout.gif")
    quiet = CliRunner().invoke(gif_command, [*args, "--quiet"], obj=host)
    assert quiet.exit_code == 0 and quiet.stderr == ""
