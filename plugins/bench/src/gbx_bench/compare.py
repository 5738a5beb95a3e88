"""``gbx bench compare`` and ``gbx bench plot``: read benchmark records, compare, plot.

Every ``gbx bench`` command prints JSON records, one per line. These commands read
such files (JSON lines, or one JSON object or list), key every record by its
benchmark name and parameters (:data:`PARAM_KEYS`, the device excluded so that a
CPU file and a GPU file line up), and

* ``compare A B``: for every key in both files, each rate (``*_per_s``) of B
  divided by A's;
* ``plot A B --out F.png``: env steps/s against the number of envs, log-log, one
  line per file and env;
* ``runs DIR...``: a record per training run directory, read from its
  ``meta.json`` and ``train_log.jsonl`` (the ``jsonl`` observer's log): steady env
  steps/s between the first and the last train record, the number of ranks, and
  the scaling efficiency against a one-rank run of the same algorithm, env and
  ``num_envs`` among the directories given.

Records without a ``bench`` name (or ratio records, ``bench`` ending in ``-ratio``)
are skipped.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click

from gbx.config import atomic_file
from gbx.errors import GbxError

# Parameters that identify one measurement (present ones only).
PARAM_KEYS = ("env", "task", "backend", "algo", "num_envs", "envs", "world_size", "gpus",
              "frames_per_step", "obs_size", "stack_k", "model", "batch_size")
RATE_SUFFIX = "_per_s"

Key = tuple[tuple[str, Any], ...]


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Benchmark records of a file: JSON lines, or a JSON object / list of objects."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise GbxError(f"cannot read benchmark file {p}: {exc.strerror}") from exc
    records: list[Any] = []
    try:
        whole = json.loads(text)
        records = whole if isinstance(whole, list) else [whole]
    except json.JSONDecodeError:
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or not line.startswith("{"):
                continue  # log lines mixed into a redirected output
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise GbxError(f"{p}:{n}: not a JSON record ({exc.msg}); "
                               "pass files written by gbx bench") from exc
    out = [r for r in records if isinstance(r, dict) and isinstance(r.get("bench"), str)
           and not r["bench"].endswith("-ratio")]
    if not out:
        raise GbxError(f"{p} holds no benchmark records (JSON objects with a 'bench' name)")
    return out


def record_key(record: Mapping[str, Any], keys: Iterable[str] = PARAM_KEYS) -> Key:
    """``(("bench", name), (param, value), ...)`` for the parameters the record has."""
    parts: list[tuple[str, Any]] = [("bench", record["bench"])]
    for k in keys:
        if k in record and isinstance(record[k], str | int | float | bool):
            parts.append((k, record[k]))
    return tuple(parts)


def key_text(key: Key) -> str:
    return " ".join(f"{k}={v}" for k, v in key)


def rates(record: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in record.items()
            if k.endswith(RATE_SUFFIX) and isinstance(v, int | float) and not isinstance(v, bool)}


def by_key(records: Iterable[Mapping[str, Any]], keys: Iterable[str] = PARAM_KEYS
           ) -> dict[Key, dict[str, float]]:
    """Rates per key; repeated measurements of one key are averaged."""
    sums: dict[Key, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    keys = tuple(keys)
    for rec in records:
        for metric, value in rates(rec).items():
            sums[record_key(rec, keys)][metric].append(value)
    return {k: {m: sum(v) / len(v) for m, v in ms.items()} for k, ms in sums.items()}


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]],
            keys: Iterable[str] = PARAM_KEYS) -> list[dict[str, Any]]:
    """One row per (key, rate) present in both: A's value, B's value and B / A."""
    ka, kb = by_key(a, keys), by_key(b, keys)
    rows = []
    for key in ka:
        if key not in kb:
            continue
        for metric, va in ka[key].items():
            vb = kb[key].get(metric)
            if vb is None:
                continue
            ratio = vb / va if va else math.inf
            rows.append({"key": dict(key), "metric": metric, "a": va, "b": vb,
                         "ratio": round(ratio, 4)})
    return rows


def _atomic_save(fig: Any, out: Path) -> None:
    with atomic_file(out) as fh:
        fig.savefig(fh, format=out.suffix.lstrip(".") or "png", dpi=120, bbox_inches="tight")


def scaling_series(records: Iterable[Mapping[str, Any]], metric: str
                   ) -> dict[str, list[tuple[int, float]]]:
    """``label -> [(num_envs, metric)]`` sorted by N; label = env (backend, device)."""
    series: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        n, y = rec.get("num_envs"), rec.get(metric)
        if not isinstance(n, int) or not isinstance(y, int | float):
            continue
        label = str(rec.get("env") or rec.get("backend") or rec["bench"])
        if rec.get("device"):
            label += f" ({rec.get('device_name') or rec['device']})"
        series[label][n].append(float(y))
    return {lab: sorted((n, sum(v) / len(v)) for n, v in pts.items())
            for lab, pts in series.items()}


def plot_scaling(files: list[Path], out: Path, metric: str = "env_steps_per_s") -> Path:
    """Log-log plot of ``metric`` against the number of envs, one line per file and env."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    drawn = 0
    for path in files:
        for label, pts in scaling_series(read_records(path), metric).items():
            if not pts:
                continue
            xs, ys = zip(*pts, strict=True)
            name = label if len(files) == 1 else f"{label} [{path.name}]"
            ax.plot(xs, ys, marker="o", label=name)
            drawn += 1
    if not drawn:
        plt.close(fig)
        raise GbxError(f"no records with num_envs and {metric} in {', '.join(map(str, files))}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("envs (N)")
    ax.set_ylabel(metric.replace("_", " "))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    _atomic_save(fig, out)
    plt.close(fig)
    return out


@click.command("compare")
@click.argument("a", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--key", "keys", default=None,
              help=f"parameters that identify a measurement (default: {','.join(PARAM_KEYS)})")
@click.option("--json", "as_json", is_flag=True, help="print JSON records instead of a table")
def compare_cmd(a: Path, b: Path, keys: str | None, as_json: bool) -> None:
    """Ratios B / A of every rate (*_per_s) measured in both benchmark files."""
    key_names = tuple(k.strip() for k in keys.split(",")) if keys else PARAM_KEYS
    rows = compare(read_records(a), read_records(b), key_names)
    if not rows:
        raise GbxError(f"{a} and {b} share no measurement (same bench name and parameters); "
                       "choose the parameters to match with --key")
    for row in rows:
        if as_json:
            click.echo(json.dumps({"bench": "compare", "a": str(a), "b": str(b), **row}))
        else:
            key = key_text(tuple(row["key"].items()))
            click.echo(f"{key}  {row['metric']}: {row['a']:.6g} -> {row['b']:.6g}  "
                       f"x{row['ratio']:.3f}")


@click.command("plot")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="image to write (.png, .svg, .pdf)")
@click.option("--metric", default="env_steps_per_s", show_default=True)
def plot_cmd(files: tuple[Path, ...], out: Path, metric: str) -> None:
    """Plot a rate against the number of envs (log-log) from benchmark files."""
    click.echo(str(plot_scaling(list(files), out, metric)))


def run_record(run_dir: Path) -> dict[str, Any]:
    """Throughput of one finished run from its ``meta.json`` and ``train_log.jsonl``."""
    meta_path, log_path = run_dir / "meta.json", run_dir / "train_log.jsonl"
    if not meta_path.is_file() or not log_path.is_file():
        raise GbxError(f"{run_dir} has no meta.json and train_log.jsonl; train with "
                       "--observer jsonl (and --run-dir) to measure a run")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    points: list[tuple[float, float]] = []
    for line in log_path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line
        if isinstance(rec, dict) and "env_steps" in rec and "wall_time_s" in rec:
            points.append((float(rec["wall_time_s"]), float(rec["env_steps"])))
    if len(points) < 2:
        raise GbxError(f"{log_path} has fewer than 2 train records; train for more updates")
    (t0, s0), (t1, s1) = points[0], points[-1]
    config = meta.get("config", {})
    dist = meta.get("distributed") or {}
    return {
        "bench": "run",
        "run_dir": str(run_dir),
        "algo": config.get("run", {}).get("algo"),
        "env": config.get("run", {}).get("env"),
        "num_envs": config.get("algo", {}).get("num_envs"),
        "world_size": int(dist.get("world_size", 1)),
        "device_name": meta.get("device_name"),
        "records": len(points),
        "env_steps": int(s1),
        "env_steps_per_s": round(s1 / t1, 2) if t1 > 0 else None,
        "steady_env_steps_per_s": round((s1 - s0) / (t1 - t0), 2) if t1 > t0 else None,
        "versions": meta.get("versions"),
    }


def add_efficiency(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``scaling_efficiency`` = steady rate / (ranks x the one-rank run's steady rate)."""
    base = {(r["algo"], r["env"], r["num_envs"]): r for r in records if r["world_size"] == 1}
    out = []
    for r in records:
        one = base.get((r["algo"], r["env"], r["num_envs"]))
        rate, ref = r.get("steady_env_steps_per_s"), one and one.get("steady_env_steps_per_s")
        eff = round(rate / (r["world_size"] * ref), 4) if rate and ref else None
        out.append({**r, "scaling_efficiency": eff})
    return out


@click.command("runs")
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
def runs_cmd(run_dirs: tuple[Path, ...]) -> None:
    """Throughput and multi-rank scaling efficiency of finished runs (one record each)."""
    for rec in add_efficiency([run_record(d) for d in run_dirs]):
        click.echo(json.dumps(rec))
