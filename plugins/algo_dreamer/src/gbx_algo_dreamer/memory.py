"""Device memory estimate of a dreamer_v3 run, checked before anything is allocated."""

from __future__ import annotations

import sys

import torch

from gbx.memory import check_memory as check_free_memory
from gbx.memory import format_bytes
from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.replay import Replay

_FLOAT = 4
_OPT_COPIES = 4  # weights, gradients, two Adam moments


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


def check_memory(cfg: DreamerConfig, obs_shape: tuple[int, int, int], num_actions: int,
                 device: torch.device) -> dict[str, int]:
    """Print the estimate and refuse the run (the shared toolkit's
    :class:`gbx.memory.MemoryBudgetError`, one line) if it will not fit."""
    est = estimate(cfg, obs_shape, num_actions)
    parts = (f"replay {format_bytes(est['replay_bytes'])} + params/optimiser "
             f"{format_bytes(est['param_bytes'])} + activations "
             f"{format_bytes(est['activation_bytes'])}")
    line = check_free_memory(
        est["total_bytes"], device, algo="dreamer_v3", headroom=cfg.memory_fraction,
        fix=f"{parts} will not fit; lower algo.replay_capacity, algo.batch_size or algo.size")
    print(f"dreamer_v3 memory estimate: {parts}; {line}", file=sys.stderr, flush=True)
    return est
