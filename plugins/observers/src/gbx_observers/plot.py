"""Training curves as one multi-panel PNG (``gbx log plot`` and the ``plot`` observer)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import attrs

from gbx.config import write_atomic
from gbx_observers.logfile import LOG_NAME, LoadedLog, load_log


@attrs.frozen
class Panel:
    """One subplot: training-record series, evaluation series, optional band and y range.

    ``ratios`` are training-record series of one count over another, ``(numerator,
    denominator, label)``, drawn at the records whose denominator is above 0.
    """

    title: str
    train: tuple[tuple[str, str], ...]
    evals: tuple[tuple[str, str], ...] = ()
    band: tuple[str, str] | None = None
    ylim: tuple[float, float] | None = None
    ratios: tuple[tuple[str, str, str], ...] = ()


# Panels whose keys are all absent stay in place with a note, so figures of
# different runs line up.
PANELS: tuple[Panel, ...] = (
    Panel("reward per step", (("reward_mean", "train"),)),
    Panel(
        "episode return",
        (("episode_return_mean", "train"),),
        (("mean_return", "eval"), ("random_mean_return", "random policy")),
    ),
    Panel("episode end rates", (("done_rate", "done"), ("trunc_rate", "trunc"))),
    Panel("distance to goal", (("dist_p50", "p50"),), band=("dist_p10", "dist_p90")),
    Panel("policy entropy (nats)", (("entropy_mean", "entropy"),)),
    Panel(
        "success rate",
        (("success_rate", "train"),),
        (("success_rate", "eval"), ("random_success_rate", "random policy")),
        ylim=(-0.02, 1.02),
        # the archive explorer's counts of training episodes begun at the real start, at
        # curriculum start states and at archived cells
        ratios=(("explore_real_start_successes", "explore_real_start_episodes",
                 "train, from the real start"),
                ("explore_start_state_successes", "explore_start_state_episodes",
                 "train, from start states"),
                ("explore_restart_successes", "explore_restart_episodes",
                 "train, from archived cells")),
    ),
    Panel("value estimate", (("value_mean", "mean"),), band=("value_std", "value_std")),
    Panel("env steps per second", (("sps", "sps"),)),
)


# What the x axis can show: the key of every record and eval it is read from, and its label.
X_AXES: dict[str, str] = {"env_steps": "env steps", "wall_time_s": "wall clock (s)"}


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _series(rows: Sequence[Mapping[str, Any]], key: str, x_key: str = "env_steps",
            per: str | None = None) -> tuple[list[float], list[float]]:
    """``key`` against ``x_key`` over the rows that hold both; with ``per``, ``key`` over
    ``per`` at the rows where ``per`` is above 0."""
    xs: list[float] = []
    ys: list[float] = []
    for row in rows:
        x, y = row.get(x_key), row.get(key)
        if not (_number(x) and _number(y)):
            continue
        if per is not None:
            bottom = row.get(per)
            if not (_number(bottom) and bottom > 0):
                continue
            y = y / bottom
        xs.append(x)
        ys.append(float(y))
    return xs, ys


Runs = Sequence[tuple[str | None, LoadedLog]]


# The line style of each kind of series: with several runs the colour names the run and
# the style the series, so every panel's legend lists styles and one figure legend runs.
TRAIN_STYLES = ({"linestyle": "-", "linewidth": 1.2}, {"linestyle": "--", "linewidth": 1.0})
RATIO_STYLES = ({"linestyle": "--", "linewidth": 1.0, "alpha": 0.8},
                {"linestyle": "-.", "linewidth": 1.0, "alpha": 0.8},
                {"linestyle": "-", "linewidth": 0.8, "alpha": 0.8, "marker": "x",
                 "markersize": 3})
EVAL_STYLE = {"linestyle": "--", "marker": "o", "markersize": 4, "linewidth": 1.0}
RANDOM_STYLE = {"linestyle": ":", "linewidth": 1.0}


def _draw_band(ax: Any, log: LoadedLog, panel: Panel, color: str | None, x_key: str) -> bool:
    if panel.band is None:
        return False
    low_key, high_key = panel.band
    if low_key == high_key:  # a spread: mean +- std
        xs, centre = _series(log.records, panel.train[0][0], x_key)
        xs_std, spread = _series(log.records, low_key, x_key)
        if not xs or xs != xs_std:
            return False
        low = [c - s for c, s in zip(centre, spread, strict=True)]
        high = [c + s for c, s in zip(centre, spread, strict=True)]
        label = "+-1 std"
    else:
        xs, low = _series(log.records, low_key, x_key)
        xs_high, high = _series(log.records, high_key, x_key)
        if not xs or xs != xs_high:
            return False
        label = "p10-p90"
    # With several runs the bands share the runs' colours and stay out of the legend.
    ax.fill_between(xs, low, high, alpha=0.25 if color is None else 0.12, color=color,
                    label=label if color is None else None)
    return True


def _draw_panel(ax: Any, runs: Runs, panel: Panel, x_key: str) -> None:
    """One panel. A single run's series carry their own labels; with several runs the
    lines are coloured by run and the panel's legend shows one grey line per series
    kind (the runs' colours are in the figure's legend)."""
    from matplotlib.lines import Line2D

    ax.set_title(panel.title, fontsize=10)
    ax.grid(True, alpha=0.3)
    drawn = False
    several = len(runs) > 1
    kinds: dict[str, dict[str, Any]] = {}  # the series kinds drawn, with their style

    def draw(xs: list[float], ys: list[float], label: str, style: dict[str, Any],
             color: str | None) -> None:
        ax.plot(xs, ys, label=None if several else label, color=color, **style)
        kinds.setdefault(label, style)

    for index, (_, log) in enumerate(runs):
        color = f"C{index % 10}" if several else None
        drawn = _draw_band(ax, log, panel, color, x_key) or drawn
        for i, (key, label) in enumerate(panel.train):
            xs, ys = _series(log.records, key, x_key)
            if xs:
                draw(xs, ys, label, TRAIN_STYLES[i % len(TRAIN_STYLES)], color)
        for i, (numerator, denominator, label) in enumerate(panel.ratios):
            xs, ys = _series(log.records, numerator, x_key, per=denominator)
            if xs:
                draw(xs, ys, label, RATIO_STYLES[i % len(RATIO_STYLES)], color)
        for key, label in panel.evals:
            xs, ys = _series(log.evals, key, x_key)
            if xs:
                draw(xs, ys, label, RANDOM_STYLE if key.startswith("random_") else EVAL_STYLE,
                     color)
    drawn = drawn or bool(kinds)
    if panel.ylim is not None:
        ax.set_ylim(*panel.ylim)
    if not drawn:
        missing = "\n".join(dict.fromkeys(k for k, _ in panel.train + panel.evals))
        ax.text(
            0.5, 0.5, f"not in this log:\n{missing}", ha="center", va="center",
            transform=ax.transAxes, fontsize=9, color="0.45",
        )
    elif several and len(kinds) > 1:
        ax.legend(handles=[Line2D([], [], color="0.3", label=label, **style)
                           for label, style in kinds.items()], fontsize=8, loc="best")
    elif not several and len(ax.get_legend_handles_labels()[0]) > 1:
        ax.legend(fontsize=8, loc="best")


def _heading(meta: Mapping[str, Any]) -> str:
    """``run_id | algo | env`` from the meta line (top level or the resolved config)."""
    config = meta.get("config")
    run_section = config.get("run") if isinstance(config, Mapping) else None
    run_section = run_section if isinstance(run_section, Mapping) else {}
    parts = [meta.get("run_id")]
    for key in ("algo", "env"):
        value = meta.get(key)
        parts.append(value if isinstance(value, str) else run_section.get(key))
    return " | ".join(str(p) for p in parts if p)


def compact_count(value: float) -> str:
    """A short tick label, three significant digits and a k / M / G suffix: 50k, 1.5M,
    800 (long plain numbers run into their neighbours on a panel a quarter of the figure
    wide)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def draw_figure(runs: Runs, *, title: str | None = None, x: str = "env_steps") -> Any:
    """The panels of one run, or of several overlaid (one colour per run, named in one
    legend beside the panels; each panel's legend names its kinds of series).

    ``runs`` holds ``(name, log)`` pairs; a single run is drawn with its name as None.
    ``x`` is a key of :data:`X_AXES`: env steps, or the wall clock of the run (which
    includes its evaluations and checkpoints). Returns the matplotlib Figure (Agg).
    """
    if x not in X_AXES:
        raise ValueError(f"unknown x axis {x!r}; use one of {', '.join(X_AXES)}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(16, 7.5), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, 4, sharex=True)
    for ax, panel in zip(axes.flat, PANELS, strict=True):
        _draw_panel(ax, runs, panel, x)
    from matplotlib.ticker import FuncFormatter

    for ax in axes[-1]:
        ax.set_xlabel(X_AXES[x])
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: compact_count(v)))
    if len(runs) > 1:
        from matplotlib.lines import Line2D

        # One legend for the runs, outside the panels, however many there are.
        figure.legend(handles=[Line2D([], [], color=f"C{i % 10}", linewidth=2, label=str(name))
                               for i, (name, _) in enumerate(runs)],
                      loc="outside right upper", fontsize=9, title="runs")
    heading = title or (_heading(runs[0][1].meta) if len(runs) == 1 else f"{len(runs)} runs")
    if heading:
        figure.suptitle(heading, fontsize=11)
    return figure


def render_png(log: LoadedLog, *, title: str | None = None) -> bytes:
    """Draw the panels for a loaded log and return PNG bytes."""
    return _png(draw_figure([(None, log)], title=title))


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def log_path_of(path: Path) -> Path:
    """A run directory means its ``train_log.jsonl``; a file is taken as it is."""
    return path / LOG_NAME if path.is_dir() else path


def run_name(log: LoadedLog, path: Path) -> str:
    """The legend name of a run: its run id, else its folder's name."""
    run_id = log.meta.get("run_id")
    return str(run_id) if run_id else log_path_of(path).parent.name


def _load_plottable(log_path: Path) -> LoadedLog:
    if not log_path.exists():
        raise FileNotFoundError(f"{log_path} does not exist; pass a run's {LOG_NAME}")
    log = load_log(log_path)
    if not log.records:
        raise ValueError(f"{log_path} has no training records to plot")
    return log


def plot_log(log_path: Path, out_path: Path) -> Path:
    """Plot ``log_path`` into ``out_path`` (PNG, written atomically)."""
    return write_atomic(out_path, render_png(_load_plottable(log_path)))


def plot_runs(paths: Sequence[Path], out_path: Path, *, x: str = "env_steps",
              names: Sequence[str] = ()) -> Path:
    """Plot one run, or overlay several (run dirs or logs), into ``out_path`` (PNG).

    ``names`` (one per run, or none) label the runs in the legend instead of their ids."""
    if names and len(names) != len(paths):
        raise ValueError(f"{len(names)} names for {len(paths)} runs; give one --name per run")
    logs = [(path, _load_plottable(log_path_of(path))) for path in paths]
    if len(logs) == 1:
        return write_atomic(out_path, _png(draw_figure([(None, logs[0][1])], x=x)))
    names = list(names) or [run_name(log, path) for path, log in logs]
    # Two runs may share an id (a copied folder): the legend keeps them apart.
    unique = [n if names.count(n) == 1 else f"{n} ({i + 1})" for i, n in enumerate(names)]
    runs = [(name, log) for name, (_, log) in zip(unique, logs, strict=True)]
    return write_atomic(out_path, _png(draw_figure(runs, x=x)))


class PlotObserver:
    """Writes ``run_dir/media/train.png`` from the run's log when the run ends.

    Reads the log the ``jsonl`` observer wrote, so the figure shows exactly
    what the log holds (including the part before a resume).
    """

    def __init__(self, run: Any) -> None:
        self.run_dir = Path(run.run_dir)

    def on_run_end(self, summary: Mapping[str, Any]) -> None:
        log_path = self.run_dir / LOG_NAME
        if not log_path.exists():
            return  # the jsonl observer is not selected: nothing to plot from
        log = load_log(log_path)
        if log.records:
            write_atomic(self.run_dir / "media" / "train.png", render_png(log))
