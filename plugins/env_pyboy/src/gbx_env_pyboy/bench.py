"""``gbx bench backends``: env steps/s of several env backends on one task, one invocation.

Any registered env names can be compared (``--env gbx-quest-1,pyboy-quest-1``), or a
task and backends (``--task gbx-quest-1 --backend gameboy,pyboy``: the task's env on
each backend, see :func:`env_for_backend`). Every (env, N) pair prints one JSON record
with its configuration, versions and device; then one ``backends-ratio`` record per N
compares every env with the first one.

The timed loop is the Env API only: random actions drawn up front, ``env.step``
including the masked resets of finished episodes; warm-up steps are not timed. On
CUDA the timed region is bracketed by CUDA events.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import platform
import time
from typing import Any

import click
import torch

from gbx.api import EnvMeta
from gbx.config import build_config, has_field

# How a task's env is named on each backend (the Warp env names are the reference).
_PYBOY_NAMES = {"gameboy": "pyboy", "gameboy-goal": "pyboy-goal"}


def env_for_backend(task: str, backend: str) -> str:
    """``gbx-quest-1`` on ``pyboy`` -> ``pyboy-quest-1``; ``gameboy`` keeps the task name."""
    if backend == "gameboy":
        return task
    if backend == "pyboy":
        if task in _PYBOY_NAMES:
            return _PYBOY_NAMES[task]
        if task.startswith("gbx-"):
            return "pyboy-" + task[len("gbx-"):]
        raise click.BadParameter(f"no PyBoy env for task {task!r}; pass --env NAMES instead")
    raise click.BadParameter(f"unknown backend {backend!r}; backends: gameboy, pyboy")


def _ints(text: str, what: str, minimum: int = 1) -> list[int]:
    try:
        out = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"{what}: expected comma-separated integers, got {text!r}") \
            from None
    if not out or min(out) < minimum:
        raise click.BadParameter(f"{what}: expected integers >= {minimum}, got {text!r}")
    return out


def _is_pyboy(registry: Any, name: str) -> bool:
    """A PyBoy env: its config has ``workers`` (the emulators' processes)."""
    from gbx.resolve import require_env

    return has_field(require_env(registry, name).config_cls, ["workers"])


def measured_runs(registry: Any, names: list[str], routed: dict[str, tuple[str, ...]],
                  threads: list[int], device: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """``[(label, env name, overrides), ...]``: on the CPU device every Warp env (a config
    with ``cpu_threads``, not a PyBoy one) once per thread count, labelled
    ``NAME@threads=K`` (``all`` for 0); every other env once, under its name."""
    from gbx.resolve import require_env, resolve_device

    runs = []
    on_cpu = resolve_device(device).type == "cpu"
    for name in names:
        warp_cpu = (on_cpu and has_field(require_env(registry, name).config_cls, ["cpu_threads"])
                    and not _is_pyboy(registry, name))
        if not warp_cpu:
            runs.append((name, name, routed[name]))
            continue
        for k in threads:
            runs.append((f"{name}@threads={k or 'all'}", name, (*routed[name], f"cpu_threads={k}")))
    return runs


def route_overrides(registry: Any, names: list[str],
                    overrides: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Which ``--set`` texts go to which env: ``{env name: ("key=value", ...)}``.

    ``KEY=VALUE`` goes to every env whose config has ``KEY`` (``workers`` only reaches
    the PyBoy envs) and is an error only when none of them has it; ``ENV:KEY=VALUE``
    goes to ``ENV`` alone, which must be one of ``names`` (an unknown key for it is the
    usual config error).
    """
    from gbx.resolve import require_env

    routed: dict[str, list[str]] = {name: [] for name in names}
    for text in overrides:
        key, sep, value = text.partition("=")
        target, colon, key = key.strip().rpartition(":")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"--set {text!r}: expected KEY=VALUE or ENV:KEY=VALUE, "
                                     "e.g. --set workers=2")
        if colon:
            if target not in routed:
                raise click.BadParameter(f"--set {text!r}: {target!r} is not among the envs "
                                         f"compared ({', '.join(names)}); use one of them")
            routed[target].append(f"{key}={value}")
            continue
        path = key.split(".")
        takers = [n for n in names
                  if has_field(require_env(registry, n).config_cls, path)]
        if not takers:
            raise click.BadParameter(f"--set {text!r}: no env among {', '.join(names)} has "
                                     f"the key {key!r}; see gbx config --env NAME for keys")
        for name in takers:
            routed[name].append(f"{key}={value}")
    return {name: tuple(texts) for name, texts in routed.items()}


def host_facts() -> dict[str, Any]:
    from gbx.runner import versions

    return {
        "versions": versions(),
        "host": {"cpus": len(os.sched_getaffinity(0)), "machine": platform.machine(),
                 "processor": platform.processor() or None, "python": platform.python_version(),
                 "torch_threads": torch.get_num_threads()},
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_env(registry: Any, env_name: str, num_envs: int, device: str, steps: int,
                warmup: int, overrides: tuple[str, ...], seed: int = 0) -> dict[str, Any]:
    """Build ``env_name`` with ``num_envs`` envs, warm up, time ``steps`` steps."""
    from gbx.resolve import require_env, resolve_device

    spec = require_env(registry, env_name)
    config = build_config(registry, flags={"env": env_name, "device": device},
                          overrides=tuple(f"env.{o}" for o in overrides)).env
    dev = resolve_device(device)
    t0 = time.perf_counter()
    env = spec.factory(config, num_envs, dev, seed)
    build_s = time.perf_counter() - t0
    try:
        gen = torch.Generator(device=env.device).manual_seed(seed)
        actions = torch.randint(0, env.num_actions, (steps + warmup, num_envs), generator=gen,
                                device=env.device)
        env.reset()
        for i in range(warmup):
            env.step(actions[i])
        _sync(env.device)
        resets = torch.zeros((), dtype=torch.int64, device=env.device)
        if env.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for i in range(steps):
            out = env.step(actions[warmup + i])
            resets += out[4]["reset_mask"].sum()
        if env.device.type == "cuda":
            end.record()
            end.synchronize()
            secs = start.elapsed_time(end) / 1000.0
        else:
            secs = time.perf_counter() - t0
        meta = env.meta() if isinstance(env, EnvMeta) else {}
    finally:
        env.close()
    fps = getattr(config, "frames_per_step", None)
    rec: dict[str, Any] = {
        "bench": "backends",
        "env": env_name,
        "backend": meta.get("backend", "gameboy" if "rom_sha256" in meta else env_name),
        "num_envs": num_envs,
        "device": str(env.device),
        "steps": steps,
        "warmup_steps": warmup,
        "build_s": round(build_s, 3),
        "env_steps_per_s": round(steps * num_envs / secs, 2),
        "step_ms": round(1000 * secs / steps, 3),
        "episode_resets": int(resets),
        "workers": meta.get("workers"),
        "cpu_threads": meta.get("cpu_threads"),
        # other work on the machine skews CPU figures: how busy it was while measuring
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "overrides": list(overrides),
        "config": to_dict_env(config),
    }
    if fps:
        rec["frames_per_s"] = round(steps * num_envs * fps / secs, 2)
        # cores the emulators ran on (Warp CPU threads or PyBoy worker processes)
        cores = meta.get("cpu_threads") or meta.get("workers")
        if env.device.type == "cpu" and cores:
            rec["frames_per_s_per_core"] = round(rec["frames_per_s"] / cores, 2)
    if env.device.type == "cuda":
        rec["device_name"] = torch.cuda.get_device_name(env.device)
    return rec


def to_dict_env(config: Any) -> dict[str, Any]:
    import attrs

    return json.loads(json.dumps(attrs.asdict(config), default=str))


def ratio_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per N: env steps/s of every env divided by the first env's (pure)."""
    out = []
    names = list(dict.fromkeys(r["env"] for r in records))
    for n in dict.fromkeys(r["num_envs"] for r in records):
        by_env = {r["env"]: r for r in records if r["num_envs"] == n}
        base = by_env.get(names[0])
        for name in names[1:]:
            other = by_env.get(name)
            if base and other:
                out.append({"bench": "backends-ratio", "num_envs": n, "env": name,
                            "relative_to": names[0],
                            "ratio": round(other["env_steps_per_s"] / base["env_steps_per_s"],
                                           4)})
    return out


@click.command("backends")
@click.option("--env", "envs", default=None, help="env names to compare, comma separated")
@click.option("--task", default=None, help="task (a gameboy env name) for --backend")
@click.option("--backend", "backends", default="gameboy,pyboy", show_default=True,
              help="backends to run --task on: gameboy, pyboy")
@click.option("--envs", "num_envs", default="64", show_default=True,
              help="batch sizes N, comma separated")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda | cuda:N")
@click.option("--steps", default=20, show_default=True, help="timed env steps per (env, N)")
@click.option("--warmup", default=3, show_default=True, help="untimed env steps first")
@click.option("--cpu-threads", "cpu_threads", default="1,0", show_default=True,
              help="CPU device: run each Warp env once per thread count (0: every core), "
                   "so one thread and every core show side by side; PyBoy envs are sized "
                   "with --set workers=N")
@click.option("--set", "overrides", multiple=True, metavar="[ENV:]KEY=VALUE",
              help="env config override, for every env whose config has KEY (an error "
                   "when none has it), e.g. --set workers=2 (PyBoy envs only); "
                   "ENV:KEY=VALUE sets it for ENV alone")
@click.pass_context
def backends_bench(ctx: click.Context, envs: str | None, task: str | None, backends: str,
                   num_envs: str, device: str, cpu_threads: str, steps: int, warmup: int,
                   overrides: tuple[str, ...]) -> None:
    """Env steps/s of several backends on one task (JSON records, then ratios)."""
    registry = ctx.find_root().obj.registry
    if envs:
        names = [e.strip() for e in envs.split(",") if e.strip()]
    elif task:
        names = [env_for_backend(task, b.strip()) for b in backends.split(",") if b.strip()]
    else:
        raise click.UsageError("pass --task TASK (with --backend) or --env NAME,NAME")
    sizes = _ints(num_envs, "--envs")
    threads = _ints(cpu_threads, "--cpu-threads", minimum=0)
    routed = route_overrides(registry, names, overrides)
    runs = measured_runs(registry, names, routed, threads, device)
    facts = host_facts()
    records = []
    for n in sizes:
        for label, name, texts in runs:
            if _is_pyboy(registry, name) and importlib.util.find_spec("pyboy") is None:
                click.echo(json.dumps({"bench": "backends", "env": label, "num_envs": n,
                                       "skipped": "PyBoy is not installed (pip install pyboy)"}))
                continue
            rec = {**measure_env(registry, name, n, device, steps, warmup, texts),
                   "task": task, **facts}
            rec["env"], rec["env_name"] = label, name
            records.append(rec)
            click.echo(json.dumps(rec))
    for rec in ratio_records(records):
        click.echo(json.dumps(rec))
