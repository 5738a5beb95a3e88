"""The observers' config sections (``observer.gif``, ``observer.console``) end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

pytest.importorskip("gbx.toy", reason="needs the core's toy env")


def _host() -> Any:
    from gbx import plugins

    return plugins.load_plugins(
        entry_points=[],
        builtin_modules=(*plugins.BUILTIN_MODULES, "gbx_observers.plugin", "observer_test_walker"),
    )


def _gbx(*args: str) -> Result:
    from gbx.cli import build_cli

    return CliRunner().invoke(build_cli(_host()), list(args))


def _run(run_dir: Path, *extra: str) -> Result:
    result = _gbx("run", "--algo", "walker", "--env", "toy", "--device", "cpu", "--steps", "8",
                  "--run-dir", str(run_dir), "--observer", "gif,console", *extra)
    assert result.exit_code == 0, result.output
    return result


def _rollout_steps(run_dir: Path) -> int:
    [folder] = (run_dir / "media").glob("eval_*")
    return len((folder / "rollout.jsonl").read_text().splitlines())


def test_gif_steps_from_set(tmp_path: Path) -> None:
    _run(tmp_path / "a", "--set", "observer.gif.steps=5")
    assert _rollout_steps(tmp_path / "a") == 5
    _run(tmp_path / "b")
    assert _rollout_steps(tmp_path / "b") == 200  # the default


def test_gif_and_console_options_from_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text("[observer.gif]\nsteps = 7\nscale = 1\n\n[observer.console]\nevery = 1\n")
    _run(tmp_path / "r", "--config", str(config))
    assert _rollout_steps(tmp_path / "r") == 7
    from PIL import Image

    [gif] = (tmp_path / "r" / "media").glob("eval_*/rollout.gif")
    with Image.open(gif) as img:
        assert img.size == (80, 72)  # scale 1
    # the resolved sections are part of the run's config.json, and a rerun from it builds
    # the console observer with its option
    saved_path = tmp_path / "r" / "config.json"
    saved = json.loads(saved_path.read_text())
    assert saved["observer"] == {"gif": {"steps": 7, "scale": 1}, "console": {"every": 1}}
    from gbx.config import build_config, read_config_file
    from gbx.runner import make_observer
    from gbx.testing import InMemoryRunContext

    host = _host()
    config = build_config(host.registry, base=read_config_file(saved_path))
    console = make_observer(host.registry.observers["console"], InMemoryRunContext(),
                            config.observer)
    assert console.every == 1


@pytest.mark.parametrize(("args", "message"), [
    (("--set", "observer.gif.stepz=3"),
     "unknown key observer.gif.stepz (allowed keys in observer.gif: steps, scale)"),
    (("--set", "observer.gif.steps=0"), "observer.gif.steps = 0: must be >= 1"),
    (("--set", "observer.jsonl.every=3"), "observer.jsonl: an observer without options"),
    (("--set", "observer.nope.x=3"), "observer.nope: no installed observer"),
    (("--set", "observer.gif=3"), "observer.gif.steps=50"),
])
def test_bad_observer_options_are_one_line_errors(args: tuple[str, ...], message: str) -> None:
    result = _gbx("config", "--algo", "walker", "--observer", "gif", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(("variable", "key"), [
    ("GBX_GIF_STEPS", "observer.gif.steps"), ("GBX_GIF_SCALE", "observer.gif.scale"),
    ("GBX_CONSOLE_EVERY", "observer.console.every")])
def test_a_replaced_variable_names_its_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           variable: str, key: str) -> None:
    monkeypatch.setenv(variable, "6")
    result = _gbx("run", "--algo", "walker", "--env", "toy", "--device", "cpu", "--steps", "8",
                  "--run-dir", str(tmp_path / "r"), "--observer", "gif,console")
    assert result.exit_code == 2
    assert f"{variable} is not read: unset it and pass --set {key}=6" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "r").exists()  # refused before the run started


def test_explain_lists_every_observer_section() -> None:
    result = _gbx("config", "--algo", "walker", "--explain")
    assert result.exit_code == 0, result.output
    assert "observer.gif.steps (int, default 200): env steps per rollout GIF" in result.stdout
    assert "observer.gif.scale (int, default 2)" in result.stdout
    assert "observer.console.every (int, default 10)" in result.stdout
