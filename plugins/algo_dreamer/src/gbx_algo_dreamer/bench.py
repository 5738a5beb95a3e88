"""``gbx bench dreamer``: env stepping, replay sampling, world-model forward/backward and
whole-update timings of dreamer_v3 (eager, compiled or both: ``algo.compile``), and the
training loop of each engine (``sync``, ``overlapped``) at the configured train ratio; one
JSON record per measurement."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from typing import Any

import attrs
import torch

from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.precision import update_numerics
from gbx_algo_dreamer.trainer import DreamerTrainer
from gbx_algo_dreamer.validate import LocalContext, registry_env_factory


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn: Callable[[], Any], device: torch.device, repeats: int) -> float:
    """Mean seconds per call after one warm-up call (device synchronised)."""
    fn()
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / repeats


def _machine(device: torch.device) -> dict[str, Any]:
    """The machine behind a record beyond the code: the GPU's name and the torch, CUDA
    and cuDNN builds (on the CPU the torch build), so records from several machines show
    what differed between them."""
    if device.type != "cuda":
        return {"torch": torch.__version__}
    return {"gpu": torch.cuda.get_device_name(device), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}


def _common(device: torch.device, env: str, cfg: DreamerConfig) -> dict[str, Any]:
    cfg = cfg.for_device(device)  # records show the values that ran, not "auto"
    return {"bench": "dreamer", "device": str(device), **_machine(device), "env": env,
            "size": cfg.size,
            "num_envs": cfg.num_envs, "batch": [cfg.batch_size, cfg.batch_length],
            "compile": cfg.compile, "fuse_steps": cfg.fuse_steps,
            "matmul_precision": cfg.matmul_precision, "conv_dtype": cfg.conv_dtype,
            "cudnn_benchmark": cfg.cudnn_benchmark, "update_order": cfg.update_order,
            "update_graph": cfg.update_graph}


def profile_updates(update: Callable[[], Any], device: torch.device, updates: int,
                    top: int = 25) -> dict[str, Any]:
    """Where ``updates`` calls of ``update`` spend their time, per update: on CUDA the GPU
    kernels (launches, busy time, the ``top`` kernels by time), on the CPU the operators
    (calls, their own CPU time)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    _sync(device)
    with profile(activities=activities) as prof:
        for _ in range(updates):
            update()
        _sync(device)
    totals: dict[str, list[float]] = {}  # name -> [calls, microseconds]
    if cuda:
        for e in prof.events():
            if e.device_type == DeviceType.CUDA:
                row = totals.setdefault(e.name, [0, 0.0])
                row[0] += 1
                row[1] += e.device_time
    else:
        for e in prof.key_averages():
            totals[e.key] = [e.count, e.self_cpu_time_total]
    rows = sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]
    return {"profiled_updates": updates, "clock": "gpu" if cuda else "cpu",
            "calls_per_update": sum(c for c, _ in totals.values()) / updates,
            "busy_ms_per_update": sum(us for _, us in totals.values()) / 1e3 / updates,
            "top": [{"name": name, "calls_per_update": calls / updates,
                     "ms_per_update": us / 1e3 / updates}
                    for name, (calls, us) in rows]}


def run_bench(device: torch.device, env: str, cfg: DreamerConfig, repeats: int,
              profile: int = 0) -> list[dict[str, Any]]:
    """Component timings (sync engine): env, collection, sampling, model, update; with
    ``profile`` > 0 also where that many updates spend their time
    (:func:`profile_updates`)."""
    ctx = LocalContext(registry_env_factory(env, device), device)
    trainer = DreamerTrainer(attrs.evolve(cfg, engine="sync"), ctx)
    cfg = trainer.cfg  # with the device's values of the auto settings
    trainer._ensure_started()
    common = _common(device, env, cfg)

    def collect() -> None:
        trainer.collect_step()
        trainer.replay.commit()

    # fill enough replay for sampling
    while not trainer.ready():
        collect()
    env_obj = trainer.env
    actions = torch.zeros(cfg.num_envs, dtype=torch.int64, device=device)
    out = []
    t_env = _time(lambda: env_obj.step(actions), device, repeats * 4)
    out.append({**common, "metric": "env_steps_per_s", "value": cfg.num_envs / t_env})
    t_collect = _time(collect, device, repeats * 2)
    out.append({**common, "metric": "collect_env_steps_per_s",
                "value": cfg.num_envs / t_collect})
    t_sample = _time(trainer._sample, device, repeats * 4)
    out.append({**common, "metric": "replay_sample_ms", "value": 1e3 * t_sample})
    batch = trainer._sample()

    def wm_fwd_bwd() -> None:
        with update_numerics(cfg.matmul_precision, bool(cfg.cudnn_benchmark)):
            res = trainer.wm.loss(batch.obs, batch.actions, batch.rewards, batch.is_first,
                                  batch.is_terminal, trainer.bins, kl_dyn=cfg.kl_dyn,
                                  kl_rep=cfg.kl_rep, free_bits=cfg.free_bits,
                                  generator=trainer.gen)
            trainer.wm.zero_grad(set_to_none=True)
            res.loss.backward()

    out.append({**common, "metric": "model_fwd_bwd_ms",
                "value": 1e3 * _time(wm_fwd_bwd, device, repeats)})
    t_update = _time(trainer.update, device, repeats)
    out.append({**common, "metric": "update_ms", "value": 1e3 * t_update})
    out.append({**common, "metric": "train_steps_per_s", "value": 1.0 / t_update})
    per_env_step = cfg.updates_per_env_step()
    # one env step of the batch plus its share of updates at the configured train ratio
    e2e = t_collect + per_env_step * cfg.num_envs * t_update
    out.append({**common, "metric": "env_sps_at_train_ratio", "value": cfg.num_envs / e2e,
                "train_ratio": cfg.train_ratio})
    if device.type == "cuda":
        out.append({**common, "metric": "max_memory_gib",
                    "value": torch.cuda.max_memory_allocated(device) / 2**30})
    if profile:
        where = profile_updates(trainer.update, device, profile)
        out.append({**common, "metric": "update_profile",
                    "value": where["busy_ms_per_update"], **where})
    return out


def run_compile_variants(device: torch.device, env: str, cfg: DreamerConfig, repeats: int,
                         variants: list[bool], fuse_steps: bool | None = None,
                         profile: int = 0) -> list[dict[str, Any]]:
    """Component timings with each ``algo.compile`` value (a fresh trainer each, same seed;
    ``fuse_steps``: ``algo.fuse_steps`` in the compiled one, None: the device's default),
    plus the ratio of compiled to eager updates/s when both ran."""
    out: list[dict[str, Any]] = []
    per_s: dict[bool, float] = {}
    for compiled in variants:
        variant = attrs.evolve(cfg, compile=compiled, fuse_steps=fuse_steps if compiled else False,
                               update_graph=cfg.update_graph if compiled else False)
        records = run_bench(device, env, variant, repeats, profile)
        per_s[compiled] = next(r["value"] for r in records
                               if r["metric"] == "train_steps_per_s")
        out += records
        _release(device)
    if len(per_s) == 2:
        out.append({**_common(device, env, cfg), "compile": "both",
                    "metric": "compiled_over_eager_updates_per_s",
                    "value": per_s[True] / per_s[False]})
    return out


def _release(device: torch.device) -> None:
    gc.collect()  # the previous trainer's replay and models go before the next one
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def run_engine_bench(device: torch.device, env: str, cfg: DreamerConfig, engine: str,
                     iterations: int) -> list[dict[str, Any]]:
    """Time the training loop of one engine: ``iterations`` env iterations with their
    updates at ``cfg.train_ratio`` (earned updates drained, device synchronised)."""
    cfg = attrs.evolve(cfg, engine=engine)
    trainer = DreamerTrainer(cfg, LocalContext(registry_env_factory(env, device), device))
    cfg = trainer.cfg  # with the device's values of the auto settings
    trainer._ensure_started()
    while not trainer.ready():
        trainer.engine.advance(cfg.overlap_chunk)
    # warm-up: lazy initialisation, allocator growth and the first updates
    while trainer.opt_steps < 2:
        trainer.engine.advance(cfg.overlap_chunk)
    trainer.engine.drain()
    _sync(device)
    steps0, opt0, trained0 = trainer.env_steps, trainer.opt_steps, trainer.trained_env_steps
    start = time.perf_counter()
    target = trainer.iterations + iterations
    while trainer.iterations < target:
        trainer.engine.advance(target - trainer.iterations)
    trainer.engine.drain()
    _sync(device)
    elapsed = time.perf_counter() - start
    updates = trainer.opt_steps - opt0
    trained = max(trainer.trained_env_steps - trained0, 1)
    common = {**_common(device, env, cfg), "engine": engine, "train_ratio": cfg.train_ratio,
              "iterations": iterations}
    if engine == "overlapped":
        common["overlap_chunk"] = cfg.overlap_chunk
    out = [
        {**common, "metric": "loop_env_steps_per_s",
         "value": (trainer.env_steps - steps0) / elapsed},
        {**common, "metric": "loop_updates_per_s", "value": updates / elapsed},
        {**common, "metric": "loop_replay_ratio",
         "value": updates * cfg.batch_size * cfg.batch_length / trained},
    ]
    if device.type == "cuda":
        out.append({**common, "metric": "loop_max_memory_gib",
                    "value": torch.cuda.max_memory_allocated(device) / 2**30})
    return out


def run_engines(device: torch.device, env: str, cfg: DreamerConfig, engines: list[str],
                iterations: int) -> list[dict[str, Any]]:
    """Loop timings of each engine, one fresh trainer each (same seed), plus the ratio of
    overlapped to sync env steps/s when both ran."""
    out: list[dict[str, Any]] = []
    sps: dict[str, float] = {}
    for engine in engines:
        records = run_engine_bench(device, env, cfg, engine, iterations)
        sps[engine] = records[0]["value"]
        out += records
        _release(device)
    if "sync" in sps and "overlapped" in sps:
        out.append({**_common(device, env, cfg), "metric": "overlapped_over_sync_env_sps",
                    "value": sps["overlapped"] / sps["sync"], "train_ratio": cfg.train_ratio,
                    "overlap_chunk": cfg.overlap_chunk, "iterations": iterations})
    return out


def print_records(records: list[dict[str, Any]]) -> None:
    for rec in records:
        print(json.dumps(rec), flush=True)
