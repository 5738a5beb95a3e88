"""The CPU device runs a launch as chunks of envs on several threads, bit-identical to one."""

from __future__ import annotations

import pytest
import torch

from gbx_gameboy.cpu_threads import chunk_bounds, default_threads, resolve_threads
from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.tiles import env_rows


def test_chunks_are_whole_tiles_covering_every_env_once() -> None:
    assert chunk_bounds(1, 4) == [(0, 1)]
    assert chunk_bounds(64, 2) == [(0, 32), (32, 64)]
    assert chunk_bounds(70, 2) == [(0, 32), (32, 70)]  # 3 tiles over 2 workers
    assert chunk_bounds(100, 3) == [(0, 32), (32, 64), (64, 100)]
    for n, k in ((1000, 7), (33, 2), (4096, 16)):
        b = chunk_bounds(n, k)
        assert b[0][0] == 0 and b[-1][1] == n and len(b) <= k
        assert all(e0 % 32 == 0 and e0 < e1 for e0, e1 in b)
        assert all(b[i][1] == b[i + 1][0] for i in range(len(b) - 1))


def test_thread_count_resolution() -> None:
    assert resolve_threads(None) == resolve_threads(0) == default_threads() >= 1
    assert resolve_threads(3) == 3
    with pytest.raises(ValueError, match="threads must be >= 0"):
        resolve_threads(-1)


def _played(threads: int, n: int) -> dict[str, torch.Tensor]:
    """n envs of the bundled game, booted then stepped with a different random button
    sequence per env (so they diverge), on ``threads`` worker threads."""
    batch = GameBoyBatch(str(DEFAULT_ROM), n, "cpu", threads=threads)
    batch.run_frames(30)
    chunks = batch._chunks.get("cpu")  # the recorded launches and pool, built at the first launch
    gen = torch.Generator().manual_seed(7)
    for _ in range(4):
        buttons = torch.randint(0, 256, (n,), generator=gen, dtype=torch.int32)
        batch.step_frames(buttons, 6, release_after=3)
    assert chunks is not None and batch._chunks["cpu"] is chunks, \
        "chunks rebuilt after the first launch"
    assert chunks.workers == batch.cpu_workers == min(threads, (n + 31) // 32)
    return {k: v.clone() for k, v in batch.state_tensors().items()}


def test_two_and_three_threads_give_the_one_thread_state_bit_for_bit() -> None:
    n = 70  # three tiles, the last one partial: uneven chunks
    one = _played(1, n)
    mem0 = env_rows(one["mem"], 0)
    assert any(not torch.equal(mem0, env_rows(one["mem"], e)) for e in range(1, n)), \
        "the envs did not diverge: the test would not see a mix-up of envs"
    for threads in (2, 3):
        other = _played(threads, n)
        for name, tensor in one.items():
            assert torch.equal(tensor, other[name]), f"{name} differs with {threads} threads"
