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


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_concurrent_update_gives_on_two_streams_what_it_gives_on_one(tmp_path: Path,
                                                                         compiled: bool):
    """``algo.update_order=concurrent`` runs the actor-critic on a side stream beside the
    world model's backward: the same updates as on the main stream alone, and no sync."""
    from gbx_algo_dreamer.engine import StreamPair

    dev = torch.device("cuda")
    results = []
    for two_streams in (False, True):
        ctx = LocalContext(registry_env_factory("toy", dev), dev,
                           run_dir=tmp_path / str(two_streams))
        cfg = DreamerConfig(size="tiny", num_envs=8, batch_size=4, batch_length=16,
                            replay_capacity=4096, learning_starts=0, compile=compiled,
                            update_order="concurrent", cudnn_benchmark=False)
        tr = DreamerTrainer(cfg, ctx)
        if not two_streams:
            tr.behavior_streams = StreamPair(torch.device("cpu"))  # the one-stream pair
        assert (tr.behavior_streams.side is not None) == two_streams
        tr._ensure_started()
        for _ in range(20):
            tr.collect_step()
        tr.update()  # warm-up: lazy initialisation (and the graph capture) may sync once
        with no_cuda_syncs():
            scalars = [tr.update() for _ in range(2)]
        results.append((scalars, [p.detach().clone() for p in tr.behavior.parameters()]))
    (one_scalars, one_params), (two_scalars, two_params) = results
    for one, two in zip(one_scalars, two_scalars, strict=True):
        for key in ("loss_model", "loss_actor", "loss_critic", "grad_norm_actor"):
            torch.testing.assert_close(two[key], one[key], rtol=1e-4, atol=1e-5)
    for one, two in zip(one_params, two_params, strict=True):
        torch.testing.assert_close(two, one, rtol=1e-4, atol=1e-5)
