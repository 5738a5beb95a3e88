"""``gbx bench a2c-memory``: A2C's device memory at large env counts, and that it stays flat.

For each ``--envs`` value the benchmark builds a real run (config, env,
trainer) in a throw-away directory, trains ``--windows`` optimiser steps,
then ``3 x --windows`` more, and prints one JSON record with the memory
estimate the trainer checks at start, the bytes its window holds and the
measured peak after the short and the long part. On CUDA the peak is the
allocator's peak; on the CPU it is the process's maximum resident set, which
only grows, so there it is an upper bound. A size the device cannot hold is
reported with the trainer's refusal instead of a measurement.
"""

from __future__ import annotations

import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import click
import torch

from gbx.memory import MemoryBudgetError


def _peak_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def measure_memory(
    *, num_envs: int, env: str, device: str, windows: int, seed: int, overrides: tuple[str, ...]
) -> dict[str, Any]:
    """Train A2C with ``num_envs`` envs briefly; return the memory record."""
    from gbx.config import build_config
    from gbx.plugins import get_host
    from gbx.resolve import require_algorithm
    from gbx.runner import prepare
    from gbx_algo_a2c.trainer import required_bytes

    host = get_host()
    with tempfile.TemporaryDirectory(prefix="gbx-bench-") as tmp:
        config = build_config(
            host.registry,
            # The budget is set per part below; the run itself must never stop the trainer.
            flags={"algo": "a2c", "env": env, "steps": 2**62, "device": device, "seed": seed,
                   "run_dir": str(Path(tmp) / "run"), "observers": ("print",)},
            overrides=(f"algo.num_envs={num_envs}", "run.checkpoint_every=0",
                       "run.eval_every=0", *overrides),
        )
        run, _ = prepare(config, host)
        run.observers = []
        cfg = config.algo
        trainer = require_algorithm(host.registry, "a2c").trainer_cls(cfg, run)
        dev = run.device
        out: dict[str, Any] = {
            "bench": "a2c-memory", "algo": "a2c", "env": env, "device": str(dev),
            "num_envs": num_envs, "update_every": cfg.update_every, "chunks": cfg.chunks,
            "overrides": list(overrides),
        }
        if dev.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(dev)
        started = time.perf_counter()
        try:
            trainer.cfg = attrs.evolve(cfg, total_env_steps=windows * cfg.batch_size)
            trainer.train()
        except MemoryBudgetError as exc:
            out["refused"] = str(exc)
            return out
        short_peak = _peak_bytes(dev)
        trainer.cfg = attrs.evolve(cfg, total_env_steps=4 * windows * cfg.batch_size)
        trainer.train()
        long_peak = _peak_bytes(dev)
        seconds = time.perf_counter() - started
        assert trainer.window is not None and trainer.env is not None
        obs_shape = tuple(int(d) for d in trainer.env.obs_shape)
        out.update(
            obs_shape=list(obs_shape),
            estimate_bytes=required_bytes(cfg, trainer.model_or_fail(), obs_shape),
            window_bytes=trainer.window.nbytes(),
            peak_kind="cuda_max_allocated" if dev.type == "cuda" else "process_max_rss",
            peak_bytes_short=short_peak,
            peak_bytes_long=long_peak,
            env_steps_short=windows * cfg.batch_size,
            env_steps_long=trainer.env_steps,
            seconds=round(seconds, 3),
            env_steps_per_s=trainer.env_steps / seconds,
        )
        trainer.env.close()
    return out


def _envs_list(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        counts = [int(v) for v in value.split(",") if v.strip()]
    except ValueError as exc:
        raise click.BadParameter(
            f"{value!r}: expected comma-separated env counts, e.g. 1024,4096"
        ) from exc
    if not counts or min(counts) < 1:
        raise click.BadParameter(f"{value!r}: expected positive env counts, e.g. 1024,4096")
    return counts


@click.command(name="a2c-memory")
@click.option("--envs", default="16384,65536", show_default=True, callback=_envs_list,
              help="comma-separated env counts to measure")
@click.option("--env", "env_name", default="toy", show_default=True, help="registered env")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda[:N]")
@click.option("--windows", type=click.IntRange(min=1), default=2, show_default=True,
              help="optimiser steps of the short part (the long part runs 3x more)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="config override, e.g. algo.update_every=8 (repeatable)")
def memory_bench(
    envs: list[int], env_name: str, device: str, windows: int, seed: int,
    overrides: tuple[str, ...],
) -> None:
    """A2C device memory per env count: estimate, window bytes, measured peak."""
    for n in envs:
        record = measure_memory(
            num_envs=n, env=env_name, device=device, windows=windows, seed=seed,
            overrides=overrides,
        )
        click.echo(json.dumps(record))
