"""The device memory check: refuse a batch that will not fit, in one line, before allocating it.

Envs call :func:`check_env_memory` before building their per-env buffers; trainers call
:func:`check_memory` before their rollout or replay storage. Both read the free memory of
the device (``torch.cuda.mem_get_info`` on a GPU, ``MemAvailable`` on the host) once,
outside any hot loop.
"""

from __future__ import annotations

import os

import torch

from gbx.errors import GbxError

__all__ = [
    "MemoryBudgetError",
    "available_bytes",
    "check_env_memory",
    "check_memory",
    "format_bytes",
]


class MemoryBudgetError(GbxError):
    """The run's buffers would not fit in the device's free memory."""


def available_bytes(device: torch.device) -> int | None:
    """Free memory on ``device`` (None when it cannot be determined)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "cpu":
        try:  # MemAvailable counts reclaimable page cache, unlike free pages
            with open("/proc/meminfo", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``; whole bytes below 1 KiB, GiB at most."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


def check_memory(
    required: int,
    device: torch.device,
    *,
    algo: str,
    fix: str,
    headroom: float = 0.9,
) -> str:
    """Return a one-line memory summary, or raise :class:`MemoryBudgetError` if it won't fit.

    ``algo`` prefixes the error, ``fix`` says what to lower, e.g.
    ``"the rollout will not fit; lower algo.num_envs or algo.rollout_steps"``.
    """
    free = available_bytes(device)
    if free is None:
        return f"needs ~{format_bytes(required)} on {device} (free memory unknown)"
    line = f"needs ~{format_bytes(required)} on {device}, {format_bytes(free)} free"
    if required > headroom * free:
        raise MemoryBudgetError(f"{algo} {line}: {fix}")
    return line


def check_env_memory(name: str, num_envs: int, bytes_per_env: int, device: torch.device) -> None:
    """Refuse an env batch whose buffers will not fit, before the env allocates them."""
    check_memory(
        num_envs * bytes_per_env, device, algo=f"{name} env with {num_envs} envs",
        fix="lower algo.num_envs",
    )
