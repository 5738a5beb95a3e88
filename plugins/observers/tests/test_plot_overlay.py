"""`gbx log plot` of several runs overlays them: one colour per run, named in one legend
beside the panels; each panel's legend names its kinds of series."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from observer_testdata import META, ppo_record
from PIL import Image

from gbx.testing import InMemoryRunContext
from gbx_observers.cli import log_group
from gbx_observers.jsonl import JsonlObserver
from gbx_observers.logfile import load_log
from gbx_observers.plot import compact_count, draw_figure


def _run_dir(root: Path, run_id: str, scale: float) -> Path:
    run = InMemoryRunContext(run_id=run_id, run_dir=root / run_id)
    observer = JsonlObserver(run)
    observer.on_run_start({**META, "run_id": run_id})
    for step in range(1, 12):
        record = ppo_record(step)
        record["episode_return_mean"] = scale * step
        observer.on_record(record)
    observer.on_eval({"env_steps": ppo_record(11)["env_steps"], "mean_return": scale,
                      "success_rate": 0.5})
    observer.on_run_end({})
    return run.run_dir


def _return_axis(figure):
    return next(ax for ax in figure.axes if ax.get_title() == "episode return")


def test_three_runs_give_three_curves_with_a_legend_by_run(tmp_path: Path) -> None:
    dirs = [_run_dir(tmp_path, f"run-{i}", float(i + 1)) for i in range(3)]
    runs = [(d.name, load_log(d / "train_log.jsonl")) for d in dirs]
    figure = draw_figure(runs)
    ax = _return_axis(figure)
    train_lines = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert len(train_lines) == 3
    assert [line.get_ydata()[-1] for line in train_lines] == [11.0, 22.0, 33.0]
    assert len({line.get_color() for line in train_lines}) == 3
    # the runs are named once, for the whole figure, in their colours
    (runs_legend,) = figure.legends
    assert [t.get_text() for t in runs_legend.get_texts()] == ["run-0", "run-1", "run-2"]
    assert [h.get_color() for h in runs_legend.legend_handles] == [
        line.get_color() for line in train_lines]
    # a panel's legend names its kinds of series, not the runs again
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "eval"]


def test_many_runs_keep_the_panels_legends_short(tmp_path: Path) -> None:
    """Eight runs add eight names to the figure's legend and none to the panels'."""
    dirs = [_run_dir(tmp_path, f"run-{i}", float(i + 1)) for i in range(8)]
    figure = draw_figure([(d.name, load_log(d / "train_log.jsonl")) for d in dirs])
    assert len(figure.legends[0].get_texts()) == 8
    for ax in figure.axes:
        legend = ax.get_legend()
        if legend is not None:
            assert len(legend.get_texts()) <= 3, ax.get_title()
    assert figure.get_suptitle() == "8 runs"


def test_plot_cli_takes_several_run_dirs_and_logs(tmp_path: Path) -> None:
    a, b = _run_dir(tmp_path, "run-a", 1.0), _run_dir(tmp_path, "run-b", 2.0)
    out = tmp_path / "compare.png"
    result = CliRunner().invoke(log_group, ["plot", str(a), str(b / "train_log.jsonl"),
                                            "--out", str(out)])
    assert result.exit_code == 0, result.output
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == (1600, 750)
    one = CliRunner().invoke(log_group, ["plot", str(a), "--out", str(tmp_path / "one.png")])
    assert one.exit_code == 0 and (tmp_path / "one.png").is_file()


def test_curves_against_the_wall_clock_with_named_runs(tmp_path: Path) -> None:
    """`--x wall_time_s` puts each record and evaluation at its wall-clock time."""
    a, b = _run_dir(tmp_path, "run-a", 1.0), _run_dir(tmp_path, "run-b", 2.0)
    log = load_log(a / "train_log.jsonl")
    figure = draw_figure([("fast", log), ("slow", load_log(b / "train_log.jsonl"))],
                         x="wall_time_s")
    ax = _return_axis(figure)
    first = next(line for line in ax.get_lines() if line.get_linestyle() == "-")
    assert list(first.get_xdata()) == [r["wall_time_s"] for r in log.records]
    assert ax.get_xlabel() in ("", "wall clock (s)")
    assert figure.axes[-1].get_xlabel() == "wall clock (s)"
    out = tmp_path / "wall.png"
    result = CliRunner().invoke(log_group, ["plot", str(a), str(b), "--x", "wall_time_s",
                                            "--name", "fast", "--name", "slow",
                                            "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file()
    bad = CliRunner().invoke(log_group, ["plot", str(a), str(b), "--name", "only-one",
                                         "--out", str(tmp_path / "bad.png")])
    assert bad.exit_code != 0 and "one --name per run" in bad.output


def test_success_panel_shows_the_real_start_share_where_episodes_ended(tmp_path: Path) -> None:
    """The archive explorer's counts of episodes begun at the real start become a rate,
    drawn at the records where such episodes ended (none: no point)."""
    run = InMemoryRunContext(run_id="r", run_dir=tmp_path / "r")
    observer = JsonlObserver(run)
    observer.on_run_start({**META, "run_id": "r"})
    counts = [(0, 0), (1, 4), (0, 0), (3, 4)]  # (successes, episodes) per record
    for step, (wins, ended) in enumerate(counts, start=1):
        observer.on_record({**ppo_record(step), "explore_real_start_successes": float(wins),
                            "explore_real_start_episodes": float(ended)})
    observer.on_run_end({})
    log = load_log(run.run_dir / "train_log.jsonl")
    ax = next(a for a in draw_figure([(None, log)]).axes if a.get_title() == "success rate")
    line = next(x for x in ax.get_lines() if x.get_label() == "train, from the real start")
    assert list(line.get_ydata()) == [0.25, 0.75]
    assert list(line.get_xdata()) == [log.records[1]["env_steps"], log.records[3]["env_steps"]]


def test_success_panel_shows_the_restarts_from_archived_cells(tmp_path: Path) -> None:
    """The restarts from archived cells (the reverse curriculum's view) are a third rate,
    in a line style of their own."""
    run = InMemoryRunContext(run_id="r", run_dir=tmp_path / "r")
    observer = JsonlObserver(run)
    observer.on_run_start({**META, "run_id": "r"})
    for step, (wins, ended) in enumerate([(1, 2), (0, 0), (4, 4)], start=1):
        observer.on_record({**ppo_record(step), "explore_restart_successes": float(wins),
                            "explore_restart_episodes": float(ended),
                            "explore_real_start_successes": 0.0,
                            "explore_real_start_episodes": 1.0})
    observer.on_run_end({})
    log = load_log(run.run_dir / "train_log.jsonl")
    ax = next(a for a in draw_figure([(None, log)]).axes if a.get_title() == "success rate")
    lines = {x.get_label(): x for x in ax.get_lines()}
    restarts = lines["train, from archived cells"]
    assert list(restarts.get_ydata()) == [0.5, 1.0]
    real = lines["train, from the real start"]
    assert (restarts.get_linestyle(), restarts.get_marker()) != (real.get_linestyle(),
                                                                 real.get_marker())


def test_x_ticks_are_short_whatever_the_run_length(tmp_path: Path) -> None:
    """Env steps label their ticks 50k, 1.5M, ...: six-digit labels ran into each other."""
    assert [compact_count(v) for v in (0, 800, 50_000, 250_000, 1_500_000, 2e9, -3000)] == [
        "0", "800", "50k", "250k", "1.5M", "2G", "-3k"]
    log = load_log(_run_dir(tmp_path, "run-a", 1.0) / "train_log.jsonl")
    figure = draw_figure([(None, log)])
    figure.canvas.draw()
    bottom = figure.axes[-1]
    labels = [t.get_text() for t in bottom.get_xticklabels() if t.get_text()]
    assert labels and all(len(label) <= 5 for label in labels), labels
    assert any(label.endswith("k") for label in labels), labels
