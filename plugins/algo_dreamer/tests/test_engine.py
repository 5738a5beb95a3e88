"""algo.engine=overlapped on the CPU: the same schedule as on CUDA, run sequentially."""

from __future__ import annotations

import pytest
import torch
from fakes import dot_context, load_state, small_cfg

from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.engine import OverlappedEngine, PlayerWeights, SyncEngine
from gbx_algo_dreamer.replay import RESERVED, Replay
from gbx_algo_dreamer.trainer import DreamerTrainer


def _cfg(**kw) -> DreamerConfig:
    return small_cfg(**{"engine": "overlapped", "overlap_chunk": 4, **kw})


def _params(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def test_engine_option_is_validated_and_sizes_the_replay_reserve():
    assert DreamerConfig().engine == "sync"
    with pytest.raises(ValueError):
        DreamerConfig(engine="threads")
    with pytest.raises(ValueError, match="overlap_chunk"):
        _cfg(overlap_chunk=0)
    # 8-step sequences plus 2 slots per staged step of a 16-step chunk: 40 per stream
    with pytest.raises(ValueError, match="at least 160"):
        _cfg(replay_capacity=156, overlap_chunk=16)
    assert _cfg(replay_capacity=160, overlap_chunk=16).replay_reserve() == 32
    assert _cfg(engine="sync").replay_reserve() == RESERVED


def test_overlapped_trains_like_sync_records_and_replay_ratio(tmp_path):
    runs = {}
    for engine in ("sync", "overlapped"):
        ctx = dot_context(tmp_path / engine)
        tr = DreamerTrainer(_cfg(engine=engine), ctx)
        actor0, wm0 = _params(tr.behavior.actor), _params(tr.wm)
        ctx.run(tr)
        assert not torch.equal(actor0, _params(tr.behavior.actor))
        assert not torch.equal(wm0, _params(tr.wm))
        runs[engine] = (tr, ctx.records)
    (sync, sync_recs), (over, over_recs) = runs["sync"], runs["overlapped"]
    assert isinstance(sync.engine, SyncEngine) and isinstance(over.engine, OverlappedEngine)
    assert set(over_recs[-1]) == set(sync_recs[-1])
    assert over_recs[-1]["env_steps"] == sync_recs[-1]["env_steps"] == 48
    # every earned update ran (the last chunk's are drained before the last record)
    assert over.opt_steps == sync.opt_steps >= 1
    assert over.pending_env_steps == 0 and over.train_budget == sync.train_budget
    assert over_recs[-1]["replay_ratio"] == pytest.approx(16.0)
    assert over_recs[-1]["replay_ratio_target"] == 16.0
    assert len(over.ctx.checkpoints) == 1


def test_overlapped_player_acts_with_the_chunk_snapshot(tmp_path):
    tr = DreamerTrainer(_cfg(total_env_steps=96), dot_context(tmp_path))
    weights = tr.player.behavior
    assert isinstance(weights, PlayerWeights)
    assert weights.actor is not tr.behavior.actor
    snapshots: list[torch.Tensor] = []
    calls: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    refresh = weights.refresh

    def tracking_refresh() -> None:
        refresh()
        snapshots.append(_params(tr.behavior.actor).clone())

    def on_act(module: torch.nn.Module, args: object) -> None:
        calls.append((len(snapshots) - 1, _params(module).clone(),
                      _params(tr.behavior.actor).clone()))

    weights.refresh = tracking_refresh  # type: ignore[method-assign]
    weights.actor.register_forward_pre_hook(on_act)
    tr.train()
    assert len(snapshots) == 96 // (4 * 4) and len(calls) == 96 // 4
    for chunk, used, _live in calls:
        assert torch.equal(used, snapshots[chunk])  # the chunk's snapshot, always
    # updates changed the live actor in the middle of chunks, and the player did not follow
    assert any(not torch.equal(used, live) for _, used, live in calls)
    # the next chunk picks the updated weights up
    assert not torch.equal(snapshots[0], snapshots[-1])


def test_overlapped_checkpoint_round_trip_resumes_exactly(tmp_path):
    cfg = _cfg(total_env_steps=40, checkpoint_replay=True)
    a = DreamerTrainer(cfg, dot_context(tmp_path / "a"))
    a.ctx.run(a)
    state = load_state(a.ctx.checkpoints[-1])
    b = DreamerTrainer(cfg, dot_context(tmp_path / "b", seed=123))
    b.load_state_dict(state)
    assert (b.env_steps, b.opt_steps) == (a.env_steps, a.opt_steps)
    assert torch.equal(a.replay.obs, b.replay.obs)
    # one more chunk with its updates, then the drain: bit-identical on both
    for tr in (a, b):
        tr.engine.advance(4)
        tr.engine.advance(4)
        tr.engine.drain()
    assert a.opt_steps == b.opt_steps > state["counters"]["opt_steps"]
    assert torch.equal(_params(a.wm), _params(b.wm))
    assert torch.equal(_params(a.behavior), _params(b.behavior))
    assert torch.equal(a.replay.obs, b.replay.obs)
    assert torch.equal(a.replay.committed, b.replay.committed)


def test_mid_run_checkpoint_keeps_the_earned_updates(tmp_path):
    tr = DreamerTrainer(_cfg(total_env_steps=0, checkpoint_replay=True), dot_context(tmp_path))
    tr._ensure_started()
    while tr.pending_env_steps == 0:
        tr.engine.advance(4)
    state = tr.state_dict()
    assert state["counters"]["pending_env_steps"] == tr.pending_env_steps > 0
    other = DreamerTrainer(_cfg(total_env_steps=0, checkpoint_replay=True),
                           dot_context(tmp_path / "o"))
    other.load_state_dict(state)
    assert other.pending_env_steps == tr.pending_env_steps


def test_a_staged_chunk_is_never_sampled_even_across_the_ring_wrap():
    chunk, n, shape = 4, 3, (1, 4, 8)
    replay = Replay(n, 16, shape, "cpu", reserved=RESERVED * chunk)
    frame = torch.zeros(n, *shape, dtype=torch.uint8)
    no = torch.zeros(n, dtype=torch.bool)
    replay.stage_first(frame)
    replay.commit()
    for t in range(1, 40):  # wraps the ring twice
        replay.stage(frame, torch.ones(n, dtype=torch.int64), torch.full((n,), float(t)), no,
                     no, frame)
        replay.commit()
    # a whole chunk staged and not committed, every step a reset: 2 slots per step
    poison = torch.full((n,), -999.0)
    for _ in range(chunk):
        replay.stage(frame, torch.ones(n, dtype=torch.int64), poison, no, ~no, frame)
    g = torch.Generator().manual_seed(0)
    for _ in range(100):
        batch = replay.sample(8, 4, g)
        assert (batch.rewards >= 0).all()
        assert (batch.rewards[:, 1:] - batch.rewards[:, :-1] == 1).all()
    replay.commit()
    assert (replay.sample(64, 2, g).rewards == -999.0).any()


def test_bench_times_both_engine_loops_and_their_ratio():
    from gbx_algo_dreamer.bench import run_engines

    cfg = DreamerConfig(size="tiny", num_envs=4, batch_size=2, batch_length=8,
                        train_ratio=4.0, replay_capacity=512, learning_starts=32,
                        overlap_chunk=2)
    records = run_engines(torch.device("cpu"), "toy", cfg, ["sync", "overlapped"], 4)
    by = {(r.get("engine"), r["metric"]): r["value"] for r in records}
    for engine in ("sync", "overlapped"):
        assert by[(engine, "loop_env_steps_per_s")] > 0
        assert by[(engine, "loop_replay_ratio")] == pytest.approx(4.0)
    ratio = by[(None, "overlapped_over_sync_env_sps")]
    assert ratio == pytest.approx(by[("overlapped", "loop_env_steps_per_s")]
                                  / by[("sync", "loop_env_steps_per_s")])


def test_stopped_from_outside_keeps_the_earned_updates_for_resume(tmp_path):
    cfg = _cfg(total_env_steps=0, record_every=4, checkpoint_replay=True)
    ctx = dot_context(tmp_path / "a", max_records=3)  # like --steps: stop after 3 records
    a = DreamerTrainer(cfg, ctx)
    ctx.run(a)
    steps = [r["env_steps"] for r in ctx.records]
    assert steps == [16, 32, 48]  # one record per chunk boundary, none repeated
    assert ctx.records[-1]["replay_ratio"] == pytest.approx(16.0)
    state = load_state(ctx.checkpoints[-1])
    counters = state["counters"]
    assert counters["pending_env_steps"] == 16 and counters["opt_steps"] == a.opt_steps
    b = DreamerTrainer(cfg, dot_context(tmp_path / "b"))
    b.load_state_dict(state)
    b.engine.advance(4)  # the pending updates run first, beside the next chunk
    assert b.trained_env_steps == counters["trained_env_steps"] + 16
    assert b.opt_steps == counters["opt_steps"] + 16 * 16 // (4 * 8)


def test_the_runs_schedule_evaluates_between_chunks_without_changing_training():
    """With the overlapped engine, the run evaluates and checkpoints at records (streams
    joined); the evaluation has its own random streams, so training is the same with and
    without it."""
    from gbx.testing import InMemoryRunContext, comparable
    from gbx.toy import ToyConfig

    cfg = _cfg(record_every=4)
    runs = {}
    for every in (0, 32):
        ctx = InMemoryRunContext(cfg, steps=48, seed=2, env_config=ToyConfig(height=24, width=32),
                                 eval_every=every, checkpoint_every=32, eval_episodes=2)
        runs[every] = (ctx.run(DreamerTrainer(cfg, ctx)), ctx)
    (plain, plain_ctx), (evaluated, ctx) = runs[0], runs[32]
    assert plain_ctx.evals == [] and [e["env_steps"] for e in ctx.evals] == [32]
    assert ctx.evals[0]["episodes"] == 2 and ctx.evals[0]["greedy"] is True
    assert [s for s, _ in ctx.checkpoints] == [32, 48]
    assert [comparable(r) for r in ctx.records] == [comparable(r) for r in plain_ctx.records]
    assert torch.equal(_params(plain.behavior.actor), _params(evaluated.behavior.actor))
