"""Plots, rollout GIFs, TensorBoard events and media/failure artifacts."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from observer_testdata import META, dreamer_record, ppo_record
from PIL import Image

from gbx.testing import InMemoryRunContext
from gbx_observers.artifacts import write_failure_frames, write_media
from gbx_observers.cli import log_group
from gbx_observers.gif import GifObserver
from gbx_observers.jsonl import JsonlObserver
from gbx_observers.options import GifConfig
from gbx_observers.plot import PlotObserver, plot_log
from gbx_observers.rollout import DMG_GREENS, encode_gif, record_rollout, shades_to_rgb

toy = pytest.importorskip("gbx.toy", reason="the core's toy env is needed for rollouts")

RIGHT, DOWN = 6, 4


def _toy_env(num_envs: int = 1, seed: int = 0) -> Any:
    return toy.make_toy_env(toy.ToyConfig(random_start=False), num_envs, "cpu", seed)


def _walk_to_goal(obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
    """Alternate RIGHT and DOWN: from the top-left cell this reaches the bottom-right goal."""
    _walk_to_goal.calls += 1  # type: ignore[attr-defined]
    action = RIGHT if _walk_to_goal.calls % 2 else DOWN  # type: ignore[attr-defined]
    return torch.full((obs.shape[0],), action, dtype=torch.int64)


_walk_to_goal.calls = 0  # type: ignore[attr-defined]


def _log(run: InMemoryRunContext, records: list[dict[str, Any]]) -> Path:
    observer = JsonlObserver(run)
    observer.on_run_start(META)
    for record in records:
        observer.on_record(record)
    observer.on_eval({"env_steps": records[-1]["env_steps"], "mean_return": 2.0,
                      "success_rate": 0.75})
    observer.on_run_end({})
    return observer.path


def test_plot_observer_writes_train_png(run: InMemoryRunContext) -> None:
    _log(run, [ppo_record(step) for step in range(1, 30)])
    PlotObserver(run).on_run_end({})
    png = run.run_dir / "media" / "train.png"
    with Image.open(png) as image:
        assert image.format == "PNG" and image.size == (1600, 750)
        pixels = np.asarray(image.convert("RGB"))
    assert pixels.std() > 10  # curves and text, not a blank canvas


def test_plot_cli_with_missing_keys(run: InMemoryRunContext, tmp_path: Path) -> None:
    sparse = []
    for step in range(1, 10):
        record = dreamer_record(step)
        for key in ("dist_p10", "dist_p50", "dist_p90", "entropy_mean"):
            record.pop(key)
        sparse.append(record)
    log = _log(run, sparse)
    out = tmp_path / "sparse.png"
    result = CliRunner().invoke(log_group, ["plot", str(log), "--out", str(out)])
    assert result.exit_code == 0, result.output
    with Image.open(out) as image:
        assert image.size == (1600, 750)
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"meta": META}) + "\n")
    with pytest.raises(ValueError, match="no training records"):
        plot_log(empty, tmp_path / "x.png")


def test_palette_and_scaling() -> None:
    frame = np.array([[0, 1], [2, 3]], dtype=np.uint8)
    rgb = shades_to_rgb(frame, scale=3)
    assert rgb.shape == (6, 6, 3)
    assert tuple(rgb[0, 0]) == DMG_GREENS[0] and tuple(rgb[5, 5]) == DMG_GREENS[3]
    assert tuple(rgb[0, 3]) == DMG_GREENS[1] and tuple(rgb[3, 2]) == DMG_GREENS[2]
    with pytest.raises(ValueError, match="scale"):
        shades_to_rgb(frame, scale=0)


def test_rollout_files_from_the_toy_env(tmp_path: Path) -> None:
    paths = record_rollout(
        _toy_env(), _walk_to_goal, tmp_path / "gif", steps=12, greedy=True, scale=3,
        meta={"run_id": "run-a"},
    )
    rows = [json.loads(line) for line in paths["jsonl"].read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(12))
    assert set(rows[0]) == {"step", "action", "reward", "dist", "done", "trunc"}
    assert {r["action"] for r in rows} == {RIGHT, DOWN}
    # 4x4 board from the top-left: the goal is 6 moves away, reached at step 5.
    assert rows[5]["done"] and rows[5]["dist"] < 0.01 and not any(r["done"] for r in rows[:5])
    meta = json.loads(paths["meta"].read_text())
    assert meta["steps"] == 12 and meta["goals_reached"] >= 1 and meta["greedy"] is True
    assert meta["return"] == pytest.approx(sum(r["reward"] for r in rows))
    with Image.open(paths["gif"]) as gif:
        assert gif.n_frames == 13 and gif.size == (80 * 3, 72 * 3)
        gif.seek(6)  # the frame showing the goal reached
        colours = {c for _, c in gif.convert("RGB").getcolors(maxcolors=16)}
    assert colours <= set(DMG_GREENS) and len(colours) >= 2


def test_gif_observer_at_each_eval(run: InMemoryRunContext) -> None:
    run = InMemoryRunContext(run_id=run.run_id, run_dir=run.run_dir,
                             env_config=toy.ToyConfig(random_start=False))
    run.trainer = SimpleNamespace(act=_walk_to_goal)
    observer = GifObserver(run, GifConfig(steps=8))
    observer.on_eval({"env_steps": 1000, "reward_mean": 0.5})
    observer.on_eval({"env_steps": 2000, "reward_mean": 0.7})
    for step in (1000, 2000):
        folder = run.run_dir / "media" / f"eval_{step}"
        assert sorted(p.name for p in folder.iterdir()) == [
            "meta.json", "rollout.gif", "rollout.jsonl"]
        assert json.loads((folder / "meta.json").read_text())["env_steps"] == step


def test_gif_observer_without_policy_warns_once(
    run: InMemoryRunContext, capsys: pytest.CaptureFixture[str]
) -> None:
    observer = GifObserver(run, GifConfig(steps=4))
    observer.on_eval({"env_steps": 10})
    observer.on_eval({"env_steps": 20})
    assert capsys.readouterr().err.count("no eval GIFs") == 1
    assert not (run.run_dir / "media").exists()


def test_failure_frames_and_media(tmp_path: Path) -> None:
    frames = torch.randint(0, 4, (5, 2, 72, 80), dtype=torch.uint8)
    folder = write_failure_frames(tmp_path, {"trace_id": "abc/12", "frames": frames})
    assert folder == tmp_path / "failures" / "abc_12" / "frames"
    pngs = sorted(folder.iterdir())
    assert [p.name for p in pngs] == [f"frame_{i:03d}.png" for i in range(5)]
    with Image.open(pngs[4]) as image:
        expected = shades_to_rgb(frames[4, -1].numpy(), scale=2)
        assert np.array_equal(np.asarray(image.convert("RGB")), expected)
    assert (folder.parent / "frames.gif").exists()
    bare = write_failure_frames(tmp_path, {"trace_id": "def"})
    assert bare == tmp_path / "failures" / "def" and not bare.exists()
    with pytest.raises(ValueError, match="trace_id"):
        write_failure_frames(tmp_path, {"frames": frames})

    png = write_media(tmp_path, {"name": "eval_1/start.png", "frame": frames[0]})
    assert png == tmp_path / "media" / "eval_1" / "start.png"
    gif = write_media(tmp_path, {"name": "clip.gif", "frames": frames, "scale": 1})
    with Image.open(gif) as image:
        assert image.n_frames == 5 and image.size == (80, 72)
    raw = write_media(tmp_path, {"name": "raw.gif", "data": encode_gif([frames[0, 0].numpy()])})
    assert raw.read_bytes()[:6] == b"GIF89a"
    with pytest.raises(ValueError, match="inside media"):
        write_media(tmp_path, {"name": "../escape.png", "frame": frames[0]})
    leftovers = [p for p in tmp_path.rglob("*.tmp")]
    assert leftovers == []


def test_tensorboard_scalars(run: InMemoryRunContext) -> None:
    pytest.importorskip("tensorboard", reason="tensorboard is an optional extra")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from gbx_observers.tensorboard import TensorBoardObserver

    observer = TensorBoardObserver(run)
    observer.on_run_start(META)
    for step in (1, 2, 3):
        observer.on_record(ppo_record(step))
    observer.on_eval({"env_steps": 768, "mean_return": 2.5, "flag": True})
    observer.on_run_end({})
    events = EventAccumulator(str(run.run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/reward_mean", "train/approx_kl", "eval/mean_return", "actions/3"} <= tags
    assert "train/env_steps" not in tags and "eval/flag" not in tags
    points = [(e.step, e.value) for e in events.Scalars("train/reward_mean")]
    assert points == [(256, pytest.approx(0.05)), (512, pytest.approx(0.1)),
                      (768, pytest.approx(0.15))]


def test_tensorboard_missing_is_one_clear_error(
    run: InMemoryRunContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from gbx.errors import PluginNotInstalledError
    from gbx_observers.tensorboard import TensorBoardObserver

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    with pytest.raises(PluginNotInstalledError, match=r"gbx-observers\[tensorboard\]"):
        TensorBoardObserver(run)
