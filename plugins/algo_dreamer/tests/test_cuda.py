"""CUDA-only checks: the hot path (collect + update) never waits for the device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gbx.testing import no_cuda_syncs
from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.trainer import DreamerTrainer
from gbx_algo_dreamer.validate import LocalContext, registry_env_factory

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "cuda-graphs"])
def test_collect_and_update_do_not_sync(tmp_path: Path, compiled: bool):
    dev = torch.device("cuda")
    ctx = LocalContext(registry_env_factory("toy", dev), dev, run_dir=tmp_path)
    cfg = DreamerConfig(size="tiny", num_envs=8, batch_size=4, batch_length=16,
                        replay_capacity=4096, learning_starts=0, compile=compiled)
    tr = DreamerTrainer(cfg, ctx)
    tr._ensure_started()
    for _ in range(20):
        tr.collect_step()
    tr.update()  # warm-up: lazy initialisation (and the graph capture) may sync once
    with no_cuda_syncs():
        for _ in range(3):
            tr.collect_step()
            tr.update()
    assert tr.opt_steps == 4


def test_overlapped_chunks_do_not_sync(tmp_path: Path):
    dev = torch.device("cuda")
    ctx = LocalContext(registry_env_factory("toy", dev), dev, run_dir=tmp_path)
    cfg = DreamerConfig(size="tiny", num_envs=8, batch_size=4, batch_length=16,
                        replay_capacity=4096, learning_starts=0,
                        train_ratio=64.0, engine="overlapped", overlap_chunk=4)
    tr = DreamerTrainer(cfg, ctx)
    tr._ensure_started()
    while tr.opt_steps < 2:  # warm-up: lazy initialisation may sync once
        tr.engine.advance(cfg.overlap_chunk)
    torch.cuda.synchronize()
    opt0 = tr.opt_steps
    with no_cuda_syncs():
        for _ in range(3):  # snapshot, fork, collection beside updates, join, commit
            tr.engine.advance(cfg.overlap_chunk)
        tr.engine.drain()
    # 8 envs x 4 iterations x 64 / (4 x 16) = 32 updates earned per chunk
    assert tr.opt_steps - opt0 >= 3 * 32
    torch.cuda.synchronize()
    assert int(tr.replay.committed.min()) >= 16 + 3 * 4
    rec = tr._record(0.0, 0)
    assert rec["replay_ratio"] == pytest.approx(64.0, rel=0.05)
