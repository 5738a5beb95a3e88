"""Every core of the CPU device on one run-kernel launch.

Warp runs a CPU launch on the calling thread, one task after another. The envs of a batch
are independent, so a launch is split into contiguous chunks of whole tiles (one per
worker), each run as its own launch of the same kernel (``env_base`` says where its envs
start) from a thread pool. Warp calls a compiled CPU kernel through ctypes, which releases
the GIL for the call, so the chunks run in parallel. Each env's result is the same
whatever the chunking: no env reads another's state.

The recorded launches and the pool are built once per batch; a step only sets the launch
parameters that changed and waits for the chunks.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from gbx_gameboy.layout import TILE, tiles_for
from gbx_gameboy.warp_setup import wp


def default_threads() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no sched_getaffinity on this platform
        return max(1, os.cpu_count() or 1)


def resolve_threads(threads: int | None) -> int:
    """``None`` or 0: every core (:func:`default_threads`); otherwise ``threads`` (>= 1)."""
    if threads is None or threads == 0:
        return default_threads()
    if threads < 0:
        raise ValueError(f"threads must be >= 0 (0: every core), got {threads}")
    return threads


def chunk_bounds(num_envs: int, workers: int) -> list[tuple[int, int]]:
    """``[(first env, end env), ...]``: at most ``workers`` contiguous chunks of whole
    tiles (so no two workers write the same cache line of a tiled row), as even as the
    tile count allows; the last chunk ends at ``num_envs``."""
    tiles = tiles_for(num_envs)
    k = max(1, min(workers, tiles))
    out = []
    for i in range(k):
        t0, t1 = tiles * i // k, tiles * (i + 1) // k
        out.append((t0 * TILE, min(t1 * TILE, num_envs)))
    return out


class ChunkedLaunch:
    """One recorded launch of ``kernel`` per chunk of envs, run together from a pool.

    ``kernel``'s last parameter must be ``env_base`` (the chunk's first env);
    ``inputs`` are the others, as first values (``launch`` replaces them per call).
    """

    def __init__(self, kernel: Any, device: str, num_envs: int, threads: int,
                 inputs: Sequence[Any]) -> None:
        self.bounds = chunk_bounds(num_envs, threads)
        self._launches = [
            wp.launch(kernel, dim=end - start, inputs=[*inputs, start], device=device,
                      record_cmd=True)
            for start, end in self.bounds
        ]
        self._pool: ThreadPoolExecutor | None = None
        if len(self._launches) > 1:
            self._pool = ThreadPoolExecutor(len(self._launches) - 1,
                                            thread_name_prefix="gbx-cpu-chunk")
            # The workers end with the batch that owns them.
            weakref.finalize(self, self._pool.shutdown, wait=False)

    @property
    def workers(self) -> int:
        return len(self._launches)

    def launch(self, inputs: Sequence[Any]) -> None:
        """Run every chunk with these parameter values (all but ``env_base``); returns
        when all are done. The calling thread runs the first chunk itself."""
        for cmd in self._launches:
            for i, value in enumerate(inputs):
                cmd.set_param_at_index(i, value)
        pending: list[Future[None]] = []
        if self._pool is not None:
            pending = [self._pool.submit(cmd.launch) for cmd in self._launches[1:]]
        self._launches[0].launch()
        for fut in pending:
            fut.result()  # re-raises a chunk's error here
