"""``gbx bench train``: end-to-end training throughput of any registered algorithm.

It runs a short training through the core run loop's pieces (real config, real
env, real trainer, real records) in a throw-away run directory and prints one
JSON record: env steps/s and updates/s overall and in steady state (from the
first record on, so the first update's allocation, kernel selection and
compilation are left out), with the resolved config, the package versions and the device.

It doubles as a soak test: ``--minutes M`` trains for M minutes of wall clock
instead of a step budget, the process's memory is sampled at every record (on
CUDA the torch caching allocator's reserved bytes plus Warp's memory pool, the
memory this process holds on the device; on the CPU the resident set), and
``--max-mem-delta MB`` fails the command when memory grew by more than that
after the warm-up records.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from gbx.errors import GbxError


def process_memory(device: Any) -> int:
    """Bytes this process holds where its training data lives (no synchronisation).

    CUDA: torch's reserved bytes plus Warp's memory pool on that device (Warp is
    asked only when a plugin already imported it). CPU: the resident set size.
    """
    if getattr(device, "type", "cpu") == "cuda":
        import sys

        import torch

        used = int(torch.cuda.memory_reserved(device))
        wp = sys.modules.get("warp")
        if wp is not None:
            try:
                used += int(wp.get_mempool_used_mem_current(f"cuda:{device.index or 0}"))
            except Exception:  # noqa: BLE001 - pool disabled or device unknown to Warp
                pass
        return used
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


class _Capture:
    """Observer keeping the train records, the time each arrived and the memory then.

    With ``minutes`` it asks the run to stop once that much wall clock has passed.
    """

    def __init__(self, device: Any = None, run: Any = None,
                 minutes: float | None = None) -> None:
        self.records: list[tuple[float, dict[str, Any]]] = []
        self.memory: list[int] = []
        self._device = device
        self._run = run
        self._deadline = None if minutes is None else time.perf_counter() + minutes * 60.0

    def on_record(self, record: Mapping[str, Any]) -> None:
        now = time.perf_counter()
        self.records.append((now, dict(record)))
        self.memory.append(process_memory(self._device))
        if self._deadline is not None and now >= self._deadline and self._run is not None:
            self._run.request_stop("minutes")


def memory_drift(
    records: list[tuple[float, dict[str, Any]]], memory: list[int], warmup_frac: float,
    points: int = 40,
) -> dict[str, Any]:
    """How the sampled memory moved after warm-up (a pure function of the samples).

    The first ``ceil(warmup_frac * n)`` samples (at least one) are warm-up; the
    baseline is the first sample after them and ``max_delta_bytes`` the largest
    growth over it. ``series`` keeps at most ``points`` evenly spaced samples as
    ``[env_steps, seconds since the first record, bytes]`` for the docs' tables.
    """
    n = len(memory)
    warm = min(max(1, math.ceil(warmup_frac * n)), n - 1) if n > 1 else 0
    steady = memory[warm:]
    baseline = steady[0] if steady else 0
    stride = max(1, math.ceil(n / points))
    t0 = records[0][0] if records else 0.0
    series = [
        [int(_env_steps(records[i][1])), round(records[i][0] - t0, 2), memory[i]]
        for i in range(0, n, stride)
    ]
    return {
        "samples": n,
        "warmup_samples": warm,
        "baseline_bytes": baseline,
        "max_bytes": max(steady) if steady else 0,
        "max_delta_bytes": (max(steady) - baseline) if steady else 0,
        "series": series,
    }


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
    minutes: float | None = None,
    warmup_frac: float = 0.1,
) -> dict[str, Any]:
    """Train ``algo`` on ``env`` for ``steps`` env steps (or ``minutes`` of wall clock,
    whichever ends first); return the throughput and memory record."""
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
        capture = _Capture(run.device, run, minutes)
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
        "memory": memory_drift(capture.records, capture.memory, warmup_frac),
        "config": resolved,
        "versions": versions(),
    }


@click.command(name="train")
@click.option("--algo", default="ppo", show_default=True, help="registered algorithm")
@click.option("--env", "env_name", default="toy", show_default=True, help="registered env")
@click.option("--envs", "num_envs", type=click.IntRange(min=1), default=None,
              help="parallel envs (sets algo.num_envs; default: the algorithm's)")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="env steps to train for  [default: 65536, or no limit with --minutes]")
@click.option("--minutes", type=click.FloatRange(min=0, min_open=True), default=None,
              help="train for this much wall clock (a soak test), or --steps, whichever ends first")
@click.option("--max-mem-delta", type=click.FloatRange(min=0), default=None, metavar="MB",
              help="fail when the process's memory grew by more than MB after warm-up")
@click.option("--warmup-frac", type=click.FloatRange(min=0, max=1, max_open=True),
              default=0.1, show_default=True,
              help="leading fraction of the records counted as warm-up for --max-mem-delta")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda[:N]")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="config override, e.g. algo.rollout_steps=64 (repeatable)")
def train_bench(
    algo: str, env_name: str, num_envs: int | None, steps: int | None, minutes: float | None,
    max_mem_delta: float | None, warmup_frac: float, device: str, seed: int,
    overrides: tuple[str, ...],
) -> None:
    """End-to-end training throughput (env steps/s, updates/s) of one algorithm, with the
    process's memory over the run (``--minutes`` and ``--max-mem-delta`` make it a soak test)."""
    if steps is None:
        steps = 2**62 if minutes is not None else 65_536
    try:
        record = measure_training(
            algo=algo, env=env_name, steps=steps, device=device, seed=seed,
            overrides=overrides, num_envs=num_envs, minutes=minutes, warmup_frac=warmup_frac,
        )
    except GbxError as exc:  # bad algo/env name or override: one line, not a traceback
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(record, default=str))
    grew = record["memory"]["max_delta_bytes"]
    if max_mem_delta is not None and grew > max_mem_delta * 2**20:
        raise click.ClickException(
            f"memory grew by {grew / 2**20:.1f} MB after warm-up, over --max-mem-delta "
            f"{max_mem_delta:g} MB"
        )
