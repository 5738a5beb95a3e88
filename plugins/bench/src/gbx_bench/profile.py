"""``gbx bench profile``: where a training run's time goes, as one JSON record.

The command trains any registered algorithm on any env through the core run loop
(a throw-away run directory, no observers) and times phases by wrapping methods
of the objects the run builds, without changing their code:

* ``collect`` / ``update``: the trainer's collection and optimisation methods
  (the first found of :data:`COLLECT_METHODS` / :data:`UPDATE_METHODS`);
* ``env_step``: ``env.step`` of every env the trainer makes; inside it
  ``emulation`` (``env.batch.step_frames``: emulated frames, the last one
  rendered), ``reset`` (``env._reset_envs``: masked restores) and
  ``goal_scoring`` (``env.reward_done``) where the env has them;
* ``policy_forward`` / ``train_forward``: outermost ``nn.Module`` forward calls
  without / with autograd (acting vs. the update's forward passes).

On CUDA every region is bracketed by CUDA events on the current stream (no
synchronisation inside the run; all events are read once at the end); on the
CPU by ``time.perf_counter``. Training up to the first metrics record is left
out (allocation, compilation, kernel selection): phases are summed from that
record on. Without ``--steps`` the run lasts four records
(:func:`default_profile_steps`). ``render_estimate_s`` splits rendering off
``emulation`` by timing the emulator with and without rendering the last frame.
``--trace DIR`` also runs ``torch.profiler`` and writes a Chrome trace plus the
top operators.
"""

from __future__ import annotations

import functools
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import click
import torch
from torch import nn

COLLECT_METHODS = ("_collect", "_collect_step", "collect")
UPDATE_METHODS = ("_update", "_optimise", "update")


class PhaseTimer:
    """Accumulates timed regions per phase name; device-timed on CUDA."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.enabled = False  # turned on after the first update
        self.spans: dict[str, list[Any]] = defaultdict(list)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.enabled:
                return fn(*args, **kwargs)
            start = self._mark()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spans[name].append((start, self._mark()))

        return timed

    def _mark(self) -> Any:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def begin(self, name: str) -> Any:
        return self._mark() if self.enabled else None

    def end(self, name: str, start: Any) -> None:
        if start is not None:
            self.spans[name].append((start, self._mark()))

    def totals(self) -> dict[str, dict[str, Any]]:
        if self.cuda:
            torch.cuda.synchronize()
        out: dict[str, dict[str, Any]] = {}
        for name, spans in self.spans.items():
            if self.cuda:
                secs = sum(a.elapsed_time(b) for a, b in spans) / 1000.0
            else:
                secs = sum(b - a for a, b in spans)
            out[name] = {"total_s": round(secs, 6), "calls": len(spans)}
        return out


def _patch(obj: Any, names: tuple[str, ...], phase: str, timer: PhaseTimer) -> str | None:
    """Wrap the first method of ``names`` that ``obj`` has; return its name."""
    for name in names:
        fn = getattr(obj, name, None)
        if callable(fn):
            setattr(obj, name, timer.wrap(phase, fn))
            return name
    return None


def instrument_env(env: Any, timer: PhaseTimer) -> dict[str, str]:
    """Time ``env.step`` and, where present, its emulator, resets and goal scoring."""
    found = {"env_step": "step"}
    env.step = timer.wrap("env_step", env.step)
    batch = getattr(env, "batch", None)
    if batch is not None and callable(getattr(batch, "step_frames", None)):
        batch.step_frames = timer.wrap("emulation", batch.step_frames)
        found["emulation"] = "batch.step_frames"
    for attr, phase in (("_reset_envs", "reset"), ("reward_done", "goal_scoring")):
        if callable(getattr(env, attr, None)):
            setattr(env, attr, timer.wrap(phase, getattr(env, attr)))
            found[phase] = attr
    return found


class ForwardHooks:
    """Times outermost module forward calls (acting without grad vs. training with grad)."""

    def __init__(self, timer: PhaseTimer) -> None:
        self.timer = timer
        self.depth = 0
        self.start: Any = None
        self.handles: list[Any] = []

    def __enter__(self) -> ForwardHooks:
        from torch.nn.modules import module as mod

        self.handles = [mod.register_module_forward_pre_hook(self._pre),
                        mod.register_module_forward_hook(self._post)]
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self.handles:
            h.remove()

    def _pre(self, _m: nn.Module, _inp: Any) -> None:
        self.depth += 1
        if self.depth == 1:
            self.start = self.timer.begin("forward")

    def _post(self, _m: nn.Module, _inp: Any, _out: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            phase = "train_forward" if torch.is_grad_enabled() else "policy_forward"
            self.timer.end(phase, self.start)


def render_estimate(env: Any, frames: int, release: int, repeats: int = 5) -> float | None:
    """Seconds per env step spent rendering the last frame (with minus without rendering)."""
    batch = getattr(env, "batch", None)
    step_frames = getattr(getattr(batch, "step_frames", None), "__wrapped__", None)
    if step_frames is None or not hasattr(env, "num_envs"):
        return None
    buttons = torch.zeros(env.num_envs, dtype=torch.int32, device=env.device)
    secs = {}
    for render in (False, True, False, True):
        if env.device.type == "cuda":
            torch.cuda.synchronize(env.device)
        t0 = time.perf_counter()
        for _ in range(repeats):
            step_frames(buttons, frames, release, render_last=render)
        if env.device.type == "cuda":
            torch.cuda.synchronize(env.device)
        secs[render] = (time.perf_counter() - t0) / repeats  # second pass wins (warm)
    return max(0.0, secs[True] - secs[False])


def _algo_overrides(config_cls: type, num_envs: int) -> list[str]:
    names = {f.name for f in attrs.fields(config_cls)}
    out = [f"algo.num_envs={num_envs}"] if "num_envs" in names else []
    # the profile measures training alone: no evaluation or checkpoint in between
    return [*out, "run.eval_every=0", "run.checkpoint_every=0"]


# Records the default profile trains for: the first is warm-up, the other three are measured.
DEFAULT_RECORDS = 4
# Env steps per env between records when the algorithm's config names no known interval.
FALLBACK_STEPS_PER_RECORD = 64


def env_steps_per_record(algo_cfg: Any, num_envs: int) -> int:
    """Env steps between two metrics records, from the algorithm's config.

    ``rollout_steps`` (PPO: one record per update), ``update_every`` x ``log_every``
    (A2C: one record per ``log_every`` updates), ``record_every`` (Dreamer: env
    iterations per record); otherwise ``FALLBACK_STEPS_PER_RECORD`` steps per env.
    ``num_envs`` is the config's own when it has one.
    """
    n = int(getattr(algo_cfg, "num_envs", num_envs))
    if hasattr(algo_cfg, "rollout_steps"):
        per_env = int(algo_cfg.rollout_steps)
    elif hasattr(algo_cfg, "update_every"):
        per_env = int(algo_cfg.update_every) * int(getattr(algo_cfg, "log_every", 1))
    elif hasattr(algo_cfg, "record_every"):
        per_env = int(algo_cfg.record_every)
    else:
        per_env = FALLBACK_STEPS_PER_RECORD
    return n * per_env


def default_profile_steps(algo_cfg: Any, num_envs: int) -> int:
    """``--steps`` left out: ``DEFAULT_RECORDS`` records' worth of env steps."""
    return DEFAULT_RECORDS * env_steps_per_record(algo_cfg, num_envs)


def profile_run(host: Any, algo: str, env: str, num_envs: int, device: str, steps: int | None,
                overrides: tuple[str, ...], trace_dir: Path | None = None) -> dict[str, Any]:
    """Train briefly with timers in place; return the profile record."""
    from gbx.config import build_config, to_dict
    from gbx.resolve import require_algorithm
    from gbx.runner import device_name, prepare, versions

    registry = host.registry
    algo_cls = require_algorithm(registry, algo).config_cls
    sets = [*_algo_overrides(algo_cls, num_envs), *overrides]
    base = build_config(registry, flags={"algo": algo, "env": env, "device": device},
                        overrides=sets)
    if steps is None:
        steps = default_profile_steps(base.algo, num_envs)
    with tempfile.TemporaryDirectory(prefix="gbx-profile-") as tmp:
        config = build_config(registry, flags={"algo": algo, "env": env, "device": device,
                                               "steps": steps, "run_dir": f"{tmp}/run"},
                              overrides=sets)
        run, _ = prepare(config, host)
        timer = PhaseTimer(run.device)
        envs: list[Any] = []
        found: dict[str, str] = {}
        make_env = run.make_env

        def instrumented_make_env(n: int, *, seed_offset: int = 0,
                                  evaluation: bool = False) -> Any:
            e = make_env(n, seed_offset=seed_offset, evaluation=evaluation)
            found.update(instrument_env(e, timer))
            envs.append(e)
            return e

        run.make_env = instrumented_make_env  # type: ignore[method-assign,assignment]
        record = run.record
        marks: dict[str, float] = {}

        def marking_record(metrics: Any) -> None:
            record(metrics)
            if not timer.enabled:  # the first update is over: measure from here
                timer.enabled = True
                marks["t0"] = time.perf_counter()
                marks["step0"] = run.last_step

        run.record = marking_record  # type: ignore[method-assign]
        trainer = require_algorithm(registry, algo).trainer_cls(run.config.algo, run)
        found["collect"] = _patch(trainer, COLLECT_METHODS, "collect", timer) or ""
        found["update"] = _patch(trainer, UPDATE_METHODS, "update", timer) or ""
        top_ops = None
        with ForwardHooks(timer):
            if trace_dir is not None:
                top_ops = _train_traced(trainer, run.device, trace_dir)
            else:
                trainer.train()
        if run.device.type == "cuda":
            torch.cuda.synchronize(run.device)
        wall = time.perf_counter() - marks.get("t0", time.perf_counter())
        measured_steps = run.last_step - int(marks.get("step0", run.last_step))
        phases = timer.totals()
        env_cfg = run.config.env
        fps = getattr(env_cfg, "frames_per_step", None)
        render = None
        if envs and fps:
            render = render_estimate(envs[0], fps, getattr(env_cfg, "release_after_frames", 0))
        for e in envs:
            e.close()
    for p in phases.values():
        p["share_of_wall"] = round(p["total_s"] / wall, 4) if wall > 0 else None
    out: dict[str, Any] = {
        "bench": "profile",
        "algo": algo,
        "env": env,
        "num_envs": num_envs,
        "device": str(run.device),
        "device_name": device_name(run.device),
        "timing": "cuda events" if run.device.type == "cuda" else "perf_counter",
        "measured_wall_s": round(wall, 4),
        "measured_env_steps": measured_steps,
        "env_steps_per_s": round(measured_steps / wall, 2) if wall > 0 else None,
        "phases": phases,
        "wrapped": found,
        "config": to_dict(run.config),
        "versions": versions(),
    }
    if render is not None and "emulation" in phases:
        calls = phases["emulation"]["calls"]
        out["render_estimate_s"] = round(render * calls, 6)
        out["emulation_without_render_s"] = round(
            max(0.0, phases["emulation"]["total_s"] - render * calls), 6)
    if top_ops is not None:
        out["top_ops"] = top_ops
    return out


def _train_traced(trainer: Any, device: torch.device, trace_dir: Path) -> list[dict[str, Any]]:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        trainer.train()
    trace_dir.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_dir / "trace.json"))
    key = "device_time_total" if device.type == "cuda" else "cpu_time_total"
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, key, 0.0), reverse=True)
    return [{"op": e.key, "calls": e.count, f"{key}_ms": round(getattr(e, key, 0.0) / 1000, 3)}
            for e in events[:15]]


@click.command("profile")
@click.option("--algo", required=True, help="algorithm name")
@click.option("--env", required=True, help="env name")
@click.option("--envs", "num_envs", type=click.IntRange(min=1), default=256, show_default=True,
              help="envs stepped together (algo.num_envs)")
@click.option("--device", default="auto", show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="env steps to train (default: 4 metrics records: 4 updates of PPO, "
                   "4 x log_every updates of A2C, 4 x record_every iterations of Dreamer, "
                   "64 steps per env per record otherwise); timing starts at the first "
                   "record")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="config override, e.g. --set algo.rollout_steps=64")
@click.option("--trace", "trace_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="also run torch.profiler; write DIR/trace.json")
@click.pass_context
def profile_cmd(ctx: click.Context, algo: str, env: str, num_envs: int, device: str,
                steps: int | None, overrides: tuple[str, ...], trace_dir: Path | None) -> None:
    """Time spent in emulation, render, reset, policy forward and update (one JSON record)."""
    host = ctx.find_root().obj
    click.echo(json.dumps(profile_run(host, algo, env, num_envs, device, steps, overrides,
                                      trace_dir)))
