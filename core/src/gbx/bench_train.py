"""``gbx bench train``: end-to-end training throughput of any registered algorithm.

A core built-in benchmark. It runs a short training through the core run
loop's pieces (real config, real env, real trainer, real records) in a
throw-away run directory and prints one JSON record: env steps/s and
updates/s overall and in steady state (from the first record on, so the
first update's allocation, kernel selection and compilation are left out),
with the resolved config, the package versions and the device.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from gbx import hookimpl
from gbx.errors import GbxError


class _Capture:
    """Observer keeping the train records and the time each arrived."""

    def __init__(self) -> None:
        self.records: list[tuple[float, dict[str, Any]]] = []

    def on_record(self, record: Mapping[str, Any]) -> None:
        self.records.append((time.perf_counter(), dict(record)))


def _env_steps(record: Mapping[str, Any]) -> float:
    return float(record.get("env_steps", record.get("step", 0)))


def throughput(
    records: list[tuple[float, dict[str, Any]]], seconds: float
) -> dict[str, Any]:
    """Rates from ``(arrival time, record)`` pairs of a training that took ``seconds``.

    Pure function of its inputs: overall rates over the whole training, and
    steady rates between the first and the last record (needs two records).
    """
    last = _env_steps(records[-1][1])
    out: dict[str, Any] = {
        "env_steps": int(last),
        "updates": len(records),
        "seconds": round(seconds, 4),
        "env_steps_per_s": last / max(seconds, 1e-9),
        "updates_per_s": len(records) / max(seconds, 1e-9),
    }
    if len(records) >= 2:
        (t0, r0), (t1, _) = records[0], records[-1]
        span = max(t1 - t0, 1e-9)
        out["steady_env_steps_per_s"] = (last - _env_steps(r0)) / span
        out["steady_updates_per_s"] = (len(records) - 1) / span
    return out


def measure_training(
    *,
    algo: str,
    env: str,
    steps: int,
    device: str,
    seed: int,
    overrides: tuple[str, ...],
    num_envs: int | None = None,
) -> dict[str, Any]:
    """Train ``algo`` on ``env`` for ``steps`` env steps; return the throughput record."""
    from gbx.config import build_config, to_dict
    from gbx.plugins import get_host
    from gbx.resolve import require_algorithm
    from gbx.runner import device_name, prepare, versions

    host = get_host()
    sets = ((f"algo.num_envs={num_envs}",) if num_envs is not None else ()) + overrides
    with tempfile.TemporaryDirectory(prefix="gbx-bench-") as tmp:
        config = build_config(
            host.registry,
            flags={"algo": algo, "env": env, "steps": steps, "device": device, "seed": seed,
                   "run_dir": str(Path(tmp) / "run"), "observers": ("print",)},
            overrides=sets,
        )
        run, _ = prepare(config, host)
        capture = _Capture()
        run.observers = [capture]
        trainer = require_algorithm(host.registry, config.run.algo).trainer_cls(
            run.config.algo, run
        )
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
        close = getattr(getattr(trainer, "env", None), "close", None)
        if callable(close):
            close()
    if not capture.records:
        raise click.ClickException(
            f"{algo} recorded nothing in {steps} steps: raise --steps above one update"
        )
    resolved = to_dict(config)
    resolved["run"].pop("run_dir", None)  # a deleted temporary directory
    return {
        "bench": "train",
        "algo": algo,
        "env": env,
        "device": str(run.device),
        "device_name": device_name(run.device),
        "overrides": list(sets),
        **throughput(capture.records, seconds),
        "config": resolved,
        "versions": versions(),
    }


@click.command(name="train")
@click.option("--algo", default="ppo", show_default=True, help="registered algorithm")
@click.option("--env", "env_name", default="toy", show_default=True, help="registered env")
@click.option("--envs", "num_envs", type=click.IntRange(min=1), default=None,
              help="parallel envs (sets algo.num_envs; default: the algorithm's)")
@click.option("--steps", type=click.IntRange(min=1), default=65_536, show_default=True,
              help="env steps to train for")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda[:N]")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="config override, e.g. algo.rollout_steps=64 (repeatable)")
def train_bench(
    algo: str, env_name: str, num_envs: int | None, steps: int, device: str, seed: int,
    overrides: tuple[str, ...],
) -> None:
    """End-to-end training throughput (env steps/s, updates/s) of one algorithm."""
    try:
        record = measure_training(
            algo=algo, env=env_name, steps=steps, device=device, seed=seed,
            overrides=overrides, num_envs=num_envs,
        )
    except GbxError as exc:  # bad algo/env name or override: one line, not a traceback
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(record, default=str))


@hookimpl
def register_benchmarks(register: Any) -> None:
    register("train", train_bench)
