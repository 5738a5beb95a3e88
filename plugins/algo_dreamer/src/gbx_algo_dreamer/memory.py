"""Device memory estimate of a dreamer_v3 run, checked before anything is allocated."""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

from gbx.errors import GbxError
from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.replay import Replay

_FLOAT = 4
_OPT_COPIES = 4  # weights, gradients, two Adam moments


class ReplayMemoryError(GbxError, MemoryError):
    """The run would not fit in device memory (reported as one line, no failure bundle)."""


def parameter_count(cfg: DreamerConfig, obs_shape: tuple[int, int, int],
                    num_actions: int) -> int:
    """Parameters of world model + actor + critic (+ slow critic), built on the meta device."""
    from gbx_algo_dreamer.behavior import Behavior
    from gbx_algo_dreamer.world_model import WorldModel

    with torch.device("meta"):
        wm = WorldModel(obs_shape, num_actions, cfg.preset(), cfg.unimix, cfg.bins)
        beh = Behavior(wm.rssm.feat_dim, num_actions, cfg)
    return sum(p.numel() for p in wm.parameters()) + sum(p.numel() for p in beh.parameters())


def estimate(cfg: DreamerConfig, obs_shape: tuple[int, int, int], num_actions: int
             ) -> dict[str, int]:
    """Bytes for replay, parameters with optimiser state, and training activations."""
    size = cfg.preset()
    frames, height, width = obs_shape
    replay = Replay.bytes_needed(cfg.num_envs, cfg.replay_capacity // cfg.num_envs, obs_shape)
    # the overlapped engine's player acts with its own copy of the weights (counted in
    # full, an upper bound: it copies only the encoder, RSSM, actor and critic)
    copies = _OPT_COPIES + (1 if cfg.engine == "overlapped" else 0)
    params = parameter_count(cfg, obs_shape, num_actions) * _FLOAT * copies
    steps = cfg.batch_size * cfg.batch_length
    pixels = frames * height * width
    # conv stacks hold about 3 activations of 4 bytes per pixel-channel, encoder + decoder,
    # plus the decoder's 4 shade logits per pixel (logits, log-softmax, gradient)
    conv = steps * pixels * size.depth * 3 * _FLOAT // 2 + steps * pixels * 4 * 3 * _FLOAT
    latent = steps * (size.deter + size.stoch * size.classes + size.units) * 12 * _FLOAT
    imag = steps * (cfg.horizon + 1) * (size.deter + size.stoch * size.classes
                                        + size.units * size.layers * 3) * 4 * _FLOAT
    return {"replay_bytes": replay, "param_bytes": params,
            "activation_bytes": conv + latent + imag,
            "total_bytes": replay + params + conv + latent + imag}


def free_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    pages = os.sysconf("SC_AVPHYS_PAGES") if hasattr(os, "sysconf") else 0
    return int(pages * os.sysconf("SC_PAGE_SIZE")) if pages else 1 << 62


def check_memory(cfg: DreamerConfig, obs_shape: tuple[int, int, int], num_actions: int,
                 device: torch.device) -> dict[str, Any]:
    """Print the estimate and refuse (``MemoryError``, one line) if it will not fit."""
    est = estimate(cfg, obs_shape, num_actions)
    free = free_bytes(device)
    gib = 1 << 30
    line = (f"dreamer_v3 memory estimate on {device}: replay {est['replay_bytes'] / gib:.2f} "
            f"GiB + params/optimiser {est['param_bytes'] / gib:.2f} GiB + activations "
            f"{est['activation_bytes'] / gib:.2f} GiB = {est['total_bytes'] / gib:.2f} GiB "
            f"(free {free / gib:.1f} GiB)")
    print(line, file=sys.stderr, flush=True)  # stderr: keeps --json output clean
    if est["total_bytes"] > cfg.memory_fraction * free:
        raise ReplayMemoryError(line + ": will not fit; lower algo.replay_capacity, "
                          "algo.batch_size or algo.size")
    return {**est, "free_bytes": free}
