"""``gbx bench env``: env steps/s, frames/s, memory and reset cost of the ``gameboy`` env.

Prints one JSON record per measurement. Warm-up steps are excluded from the
timings; on CUDA the timed region is bracketed by CUDA events, on the CPU by
``time.perf_counter``. Memory is sampled after warm-up and at the end; with
``--max-mem-delta MB`` the command fails when it grew by more than that.
"""

from __future__ import annotations

import json
import os
import resource
import time
from typing import Any

import click
import torch

from gbx_gameboy.bench import EnvCounts, warm_through_variant_rounds
from gbx_gameboy.env import DEFAULT_ROM, GameBoyConfig, GameBoyEnv
from gbx_gameboy.variant_timing import WARM_EXTRA_STEPS


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


# Untimed env steps before the timed ones: random play spreads a batch's envs over a
# game's phases for tens of steps. At 16,384 envs on a GPU, flappyboy's env steps/s rise
# from about 85,000 over steps 10 - 20 to about 113,000 from the 60th on, and the bundled
# game's fall from about 450,000 over steps 5 - 15 to about 285,000 from the 25th on
# (docs/benchmarks.md, "Warm-up until play has diverged").
WARMUP_STEPS = 60


def _mem(device: torch.device) -> dict[str, int]:
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return {
            "torch_allocated": torch.cuda.memory_allocated(device),
            "torch_peak": torch.cuda.max_memory_allocated(device),
            "device_used": total - free,  # includes Warp's allocations
        }
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"rss": _rss_bytes(), "rss_peak": peak_kb * 1024}


def _timed_steps(env: GameBoyEnv, actions: torch.Tensor) -> float:
    """Seconds for one env step per row of ``actions`` ``[steps, N]``, measured on the device."""
    if env.device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for row in actions:
            env.step(row)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0
    t0 = time.perf_counter()
    for row in actions:
        env.step(row)
    return time.perf_counter() - t0


def measure(
    config: GameBoyConfig, num_envs: int, device: str, steps: int, warmup: int, seed: int = 0
) -> dict[str, Any]:
    """Build one env, warm it up, time ``steps`` steps; return the figures."""
    t0 = time.perf_counter()
    env = GameBoyEnv(config, num_envs, device, seed)
    build_s = time.perf_counter() - t0
    dev = env.device
    gen = torch.Generator(device=dev).manual_seed(seed)
    # A fresh random button per env and step, drawn up front so the timed loop
    # allocates nothing: envs diverge as in real play (lockstep envs would
    # flatter a GPU).
    actions = torch.randint(
        0, env.num_actions, (warmup + WARM_EXTRA_STEPS + steps, num_envs), generator=gen,
        device=dev
    )
    env.reset()
    # Each warm-up step on its own: their rates show where the batch's speed has settled.
    warm_s: list[float] = []

    def warm_step(i: int) -> None:
        ts = time.perf_counter()
        env.step(actions[i])
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        warm_s.append(time.perf_counter() - ts)

    for i in range(warmup):
        warm_step(i)
    warm = warm_through_variant_rounds(env.batch, warm_step, warmup)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    mem_warm = _mem(dev)
    # The timed steps run the chosen variant: a round due among them waits until after.
    env.batch.hold_variant(True)
    secs = _timed_steps(env, actions[warm:warm + steps])
    env.batch.hold_variant(False)
    mem_end = _mem(dev)
    # Reset cost: a restore with no env flagged vs every env flagged.
    none = torch.zeros(num_envs, dtype=torch.bool, device=dev)
    every = torch.ones(num_envs, dtype=torch.bool, device=dev)
    reset_s = {}
    for name, mask in (("none", none), ("all", every)):
        env._reset_envs(mask)  # warm
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        for _ in range(10):
            env._reset_envs(mask)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        reset_s[name] = (time.perf_counter() - t0) / 10
    workers = env.batch.cpu_workers if dev.type == "cpu" else None
    kernel, block, block_warps = env.batch.kernel, env.batch.block_threads, env.batch.block_warps
    variant_times = env.batch.variant_times or None
    regroup = env.batch.regroup
    env.close()
    key = "rss" if dev.type == "cpu" else "device_used"
    return {
        "bench": "env",
        "device": str(dev),
        "num_envs": num_envs,
        "threads": workers,
        # the run kernel's variant the timed steps ran (of a batch that timed both, each
        # one's median seconds per emulated frame) and, on a GPU, its launch's Game Boys
        # per warp and warps per block
        "kernel": kernel,
        "variant_s_per_frame": variant_times,
        "block_threads": None if dev.type == "cpu" else block,
        "block_warps": None if dev.type == "cpu" else block_warps,
        # each launch ran on a copy of the state sorted by the envs' last work (regroup.py)
        "regroup": regroup,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "frames_per_step": config.frames_per_step,
        "obs_size": config.obs_size,
        "stack_k": config.stack_k,
        "steps": steps,
        "warmup_steps": warm,
        "build_s": round(build_s, 3),
        "env_steps_per_s": round(steps * num_envs / secs, 2),
        "frames_per_s": round(steps * num_envs * config.frames_per_step / secs, 2),
        # one env's rates, beside the batch's
        "env_steps_per_s_per_env": round(steps / secs, 3),
        "frames_per_s_per_env": round(steps * config.frames_per_step / secs, 2),
        "step_ms": round(1000 * secs / steps, 3),
        # every warm-up step's rate (those of a batch's rounds of timed launches mix both
        # run-kernel variants)
        "warmup_env_steps_per_s": [round(num_envs / s, 1) for s in warm_s],
        "reset_none_ms": round(1000 * reset_s["none"], 3),
        "reset_all_ms": round(1000 * reset_s["all"], 3),
        "mem_after_warmup": mem_warm,
        "mem_end": mem_end,
        "mem_delta_bytes": mem_end[key] - mem_warm[key],
    }


# Options of the single-backend measurement that a task (``--backend`` mode) decides itself.
_TASK_DECIDES = ("rom", "state", "frames_per_step", "obs_size", "stack_k", "max_mem_delta",
                 "regroup")


@click.command("env")
@click.option("--rom", default=str(DEFAULT_ROM), show_default=True, help="ROM to run")
@click.option("--state", default="", help="start savestate (gbx or PyBoy)")
@click.option("--num-envs", "--envs", "num_envs", type=EnvCounts(), default="64",
              show_default=True, help="comma-separated batch sizes, e.g. 64,1024")
@click.option("--backend", "backends", default=None,
              help="compare backends on --task instead, e.g. gameboy,pyboy: the same as "
                   "`gbx bench backends` (provided by gbx-env-pyboy)")
@click.option("--task", default=None, help="task for --backend (default gbx-quest-1)")
@click.option("--device", default="auto", show_default=True, help="cpu | cuda | cuda:N | auto")
@click.option("--steps", default=20, show_default=True, help="timed env steps per batch size")
@click.option("--warmup", default=WARMUP_STEPS, show_default=True,
              help="untimed env steps first: random play diverges the envs, and a batch's "
                   "speed settles as they do (each step's rate is in the record's "
                   "warmup_env_steps_per_s)")
@click.option("--frames-per-step", default=24, show_default=True)
@click.option("--obs-size", default="72x80", show_default=True)
@click.option("--stack-k", default=1, show_default=True)
@click.option("--max-mem-delta", type=float, default=None,
              help="fail if memory grows by more than this many MiB after warm-up")
@click.option("--threads", type=click.IntRange(min=0), default=0, show_default=True,
              help="CPU device: emulator threads (env.cpu_threads; 0: every core)")
@click.option("--regroup", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True,
              help="GPU: envs sorted into warps by their last step's work (env.regroup)")
@click.pass_context
def env_bench(
    ctx: click.Context, rom: str, state: str, num_envs: list[int], backends: str | None,
    task: str | None, device: str, steps: int, warmup: int, frames_per_step: int,
    obs_size: str, stack_k: int, max_mem_delta: float | None, threads: int, regroup: str,
) -> None:
    """Env steps/s and frames/s of the gameboy env (one JSON record per batch size).

    With --backend, the same task on several backends instead (one record per backend and
    batch size, then the ratios), through `gbx bench backends`."""
    if backends is not None:
        _forward_to_backends(ctx, backends, task, num_envs, device, steps, warmup, threads)
        return
    if task is not None:
        raise click.UsageError("--task needs --backend (e.g. --backend gameboy,pyboy)")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = GameBoyConfig(
        rom=rom, state=state, frames_per_step=frames_per_step,
        release_after_frames=min(8, frames_per_step), obs_size=obs_size, stack_k=stack_k,
        max_steps=10**9, cpu_threads=threads, regroup=regroup,
    )
    failed = []
    for n in num_envs:
        rec = measure(cfg, n, device, steps, warmup)
        click.echo(json.dumps(rec))
        if max_mem_delta is not None and rec["mem_delta_bytes"] > max_mem_delta * 2**20:
            failed.append(f"N={n}: memory grew {rec['mem_delta_bytes'] / 2**20:.1f} MiB")
    if failed:
        raise click.ClickException("memory grew after warm-up: " + "; ".join(failed))



def _forward_to_backends(
    ctx: click.Context, backends: str, task: str | None, num_envs: list[int], device: str,
    steps: int, warmup: int, threads: int,
) -> None:
    """Run `gbx bench backends` with this command's common options."""
    changed = [
        "--" + name.replace("_", "-") for name in _TASK_DECIDES
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    ]
    if changed:
        raise click.UsageError(
            f"{', '.join(changed)} cannot be combined with --backend: the task sets them "
            "(drop them, or leave out --backend to measure the gameboy env alone)"
        )
    parent = ctx.parent
    other = None
    if parent is not None and isinstance(parent.command, click.Group):
        other = parent.command.get_command(parent, "backends")
    if other is None:
        raise click.UsageError(
            "--backend compares backends through `gbx bench backends`, which the PyBoy "
            "backend provides: pip install -e plugins/env_pyboy"
        )
    ctx.invoke(
        other, envs=None, task=task or "gbx-quest-1", backends=backends,
        num_envs=",".join(str(n) for n in num_envs),
        device=device, steps=steps, warmup=warmup, overrides=(),
        # --threads given: that count only; else one thread and every core side by side
        cpu_threads=str(threads) if ctx.get_parameter_source("threads")
        is not click.core.ParameterSource.DEFAULT else "1,0",
    )
