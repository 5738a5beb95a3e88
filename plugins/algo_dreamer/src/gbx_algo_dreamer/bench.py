"""``gbx bench dreamer``: env stepping, replay sampling, world-model forward/backward and
whole-update timings of dreamer_v3, one JSON record per measurement."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import torch

from gbx_algo_dreamer.config import DreamerConfig
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


def run_bench(device: torch.device, env: str, cfg: DreamerConfig, repeats: int
              ) -> list[dict[str, Any]]:
    ctx = LocalContext(registry_env_factory(env, device), device)
    trainer = DreamerTrainer(cfg, ctx)
    trainer._ensure_started()
    common = {"bench": "dreamer", "device": str(device), "env": env, "size": cfg.size,
              "num_envs": cfg.num_envs, "batch": [cfg.batch_size, cfg.batch_length]}
    # fill enough replay for sampling
    while not trainer._ready():
        trainer._collect_step()
    env_obj = trainer.env
    actions = torch.zeros(cfg.num_envs, dtype=torch.int64, device=device)
    out = []
    t_env = _time(lambda: env_obj.step(actions), device, repeats * 4)
    out.append({**common, "metric": "env_steps_per_s", "value": cfg.num_envs / t_env})
    t_collect = _time(trainer._collect_step, device, repeats * 2)
    out.append({**common, "metric": "collect_env_steps_per_s",
                "value": cfg.num_envs / t_collect})
    t_sample = _time(trainer._sample, device, repeats * 4)
    out.append({**common, "metric": "replay_sample_ms", "value": 1e3 * t_sample})
    batch = trainer._sample()

    def wm_fwd_bwd() -> None:
        res = trainer.wm.loss(batch.obs, batch.actions, batch.rewards, batch.is_first,
                              batch.is_terminal, trainer.bins, kl_dyn=cfg.kl_dyn,
                              kl_rep=cfg.kl_rep, free_bits=cfg.free_bits, generator=trainer.gen)
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
    return out


def print_records(records: list[dict[str, Any]]) -> None:
    for rec in records:
        print(json.dumps(rec), flush=True)
