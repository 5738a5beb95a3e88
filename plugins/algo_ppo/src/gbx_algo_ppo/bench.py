"""``gbx bench train``: end-to-end training throughput of any registered algorithm.

Runs a short training through the core run loop (real env, real trainer,
real records) in a throw-away run directory and prints one JSON record with
env steps/s and updates/s, overall and in steady state (after the first
update, which pays for allocation, kernel selection and compilation).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click


class _Capture:
    """Observer keeping the train records and the time each arrived."""

    def __init__(self) -> None:
        self.records: list[tuple[float, dict[str, Any]]] = []

    def on_record(self, record: Mapping[str, Any]) -> None:
        self.records.append((time.perf_counter(), dict(record)))


def measure_training(
    *,
    algo: str,
    env: str,
    steps: int,
    device: str,
    seed: int,
    overrides: tuple[str, ...],
) -> dict[str, Any]:
    """Train ``algo`` on ``env`` for ``steps`` env steps; return the throughput record."""
    from gbx.config import build_config
    from gbx.plugins import get_host
    from gbx.resolve import require_algorithm
    from gbx.runner import prepare

    host = get_host()
    with tempfile.TemporaryDirectory(prefix="gbx-bench-") as tmp:
        config = build_config(
            host.registry,
            flags={"algo": algo, "env": env, "steps": steps, "device": device, "seed": seed,
                   "run_dir": str(Path(tmp) / "run"), "observers": ("print",)},
            overrides=overrides,
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
    records = capture.records
    if not records:
        raise click.ClickException(
            f"{algo} recorded nothing in {steps} steps: raise --steps above one update"
        )
    last_steps = float(records[-1][1].get("env_steps", records[-1][1].get("step", 0)))
    out: dict[str, Any] = {
        "bench": "train",
        "algo": algo,
        "env": env,
        "device": str(run.device),
        "overrides": list(overrides),
        "env_steps": int(last_steps),
        "updates": len(records),
        "seconds": round(seconds, 4),
        "env_steps_per_s": last_steps / seconds,
        "updates_per_s": len(records) / seconds,
    }
    if len(records) >= 2:
        (t0, r0), (t1, _) = records[0], records[-1]
        s0 = float(r0.get("env_steps", r0.get("step", 0)))
        out["steady_env_steps_per_s"] = (last_steps - s0) / max(t1 - t0, 1e-9)
        out["steady_updates_per_s"] = (len(records) - 1) / max(t1 - t0, 1e-9)
    return out


@click.command(name="train")
@click.option("--algo", default="ppo", show_default=True, help="registered algorithm")
@click.option("--env", "env_name", default="toy", show_default=True, help="registered env")
@click.option("--steps", type=click.IntRange(min=1), default=65_536, show_default=True,
              help="env steps to train for")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda[:N]")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="config override, e.g. algo.num_envs=1024 (repeatable)")
def train_bench(
    algo: str, env_name: str, steps: int, device: str, seed: int, overrides: tuple[str, ...]
) -> None:
    """End-to-end training throughput (env steps/s, updates/s) of one algorithm."""
    record = measure_training(
        algo=algo, env=env_name, steps=steps, device=device, seed=seed, overrides=overrides
    )
    click.echo(json.dumps(record))
