from __future__ import annotations

import attrs
import pytest
import torch
from fakes import FakeContext, load_state

from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.trainer import DreamerTrainer
from gbx_toolkit.guard import NonFiniteError


def _cfg(**kw) -> DreamerConfig:
    base = dict(size="tiny", num_envs=4, batch_size=4, batch_length=8, train_ratio=16.0,
                replay_capacity=512, learning_starts=32, record_every=8, total_env_steps=48)
    base.update(kw)
    return DreamerConfig(**base)


def _params(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def test_one_training_run_updates_everything_and_records(tmp_path):
    ctx = FakeContext(tmp_path)
    tr = DreamerTrainer(_cfg(), ctx)
    wm0, actor0, critic0 = (_params(tr.wm), _params(tr.behavior.actor),
                            _params(tr.behavior.critic))
    ctx.run(tr)
    assert tr.opt_steps >= 1
    assert not torch.equal(wm0, _params(tr.wm))
    assert not torch.equal(actor0, _params(tr.behavior.actor))
    assert not torch.equal(critic0, _params(tr.behavior.critic))
    rec = ctx.records[-1]
    for key in ("env_steps", "opt_steps", "train_sps", "replay_size", "replay_ratio",
                "ready_steps", "loss_model", "loss_actor", "loss_critic", "obs_nll",
                "reward_nll", "continue_nll", "kl_dyn", "kl_rep", "kl_total",
                "free_bits_applied", "prior_entropy", "posterior_entropy", "action_entropy",
                "value_mean", "value_std", "advantage_mean", "advantage_std", "return_p05",
                "return_p95", "return_scale", "entropy_mean", "reward_mean", "done_rate"):
        assert key in rec, key
    assert rec["env_steps"] == 48
    # updates begin once learning_starts env steps are in: 16 of the 48 env steps trained
    assert rec["replay_ratio"] == pytest.approx(16.0)
    assert len(ctx.checkpoints) == 1


def test_checkpoint_round_trip_resumes_exactly(tmp_path):
    cfg = _cfg(total_env_steps=40)
    a = DreamerTrainer(cfg, FakeContext(tmp_path / "a"))
    a.ctx.run(a)
    state = load_state(a.ctx.checkpoints[-1])
    b = DreamerTrainer(cfg, FakeContext(tmp_path / "b", seed=123))
    b.load_state_dict(state)
    assert torch.equal(state["bins"], b.bins) and b.bins.numel() == 255
    assert b.env_steps == a.env_steps and b.opt_steps == a.opt_steps
    assert torch.equal(a.replay.obs, b.replay.obs)
    # the same next update from both (same replay sample, same weights, same optimiser)
    sa, sb = a.update(), b.update()
    for key in ("loss_model", "loss_actor", "loss_critic"):
        assert torch.equal(sa[key], sb[key]), key
    assert torch.equal(_params(a.wm), _params(b.wm))


def test_checkpoint_with_other_bins_is_refused(tmp_path):
    a = DreamerTrainer(_cfg(total_env_steps=8), FakeContext(tmp_path / "a"))
    state = a.state_dict()
    b = DreamerTrainer(_cfg(bins=101, total_env_steps=8), FakeContext(tmp_path / "b"))
    with pytest.raises(ValueError, match="bins"):
        b.load_state_dict(state)


def test_nonfinite_loss_raises_with_batch_payload(tmp_path, monkeypatch):
    ctx = FakeContext(tmp_path)
    tr = DreamerTrainer(_cfg(total_env_steps=64), ctx)
    with torch.no_grad():
        tr.wm.reward.out.bias.fill_(float("nan"))
    with pytest.raises(NonFiniteError) as info:
        tr.train()
    payload = info.value.batch_stats
    assert payload["replay_slots"] and payload["actions"] and "obs_stats" in payload
    assert info.value.trace_id
    context = tr.failure_context(steps=5)  # what the run loop puts in the failure bundle
    assert context["frames"].shape == (5, *tr.replay.obs_shape[1:])
    assert int(context["frames"].max()) <= 3
    assert context["actions"].shape == (5,)


def test_standing_still_and_recon_check_modes(tmp_path):
    ctx = FakeContext(tmp_path)
    tr = DreamerTrainer(_cfg(mode="standing_still", fixed_action=2), ctx)
    tr.train()
    hist = torch.tensor([r["action_hist"] for r in ctx.records]).sum(0)
    assert hist.tolist() == [0, 0, 48, 0, 0]
    assert "loss_actor" not in ctx.records[-1] and "loss_model" in ctx.records[-1]
    ctx2 = FakeContext(tmp_path / "r")
    tr2 = DreamerTrainer(_cfg(mode="recon_check"), ctx2)
    tr2.train()
    rec = ctx2.records[-1]
    assert 0.0 <= rec["heldout_recon_accuracy"] <= 1.0 and rec["heldout_obs_nll"] > 0
    assert tr2.heldout_streams.tolist() == [3]


def test_memory_estimate_refuses_cleanly(tmp_path):
    cfg = _cfg(replay_capacity=4_000_000_000, num_envs=4)
    with pytest.raises(MemoryError, match="will not fit"):
        DreamerTrainer(cfg, FakeContext(tmp_path))


def test_size_presets_follow_the_table():
    s = DreamerConfig(size="S").preset()
    assert (s.deter, s.units, s.depth, s.layers, s.stoch, s.classes) == (512, 512, 32, 2, 32, 32)
    m = attrs.evolve(DreamerConfig(), size="M", units=700).preset()
    assert (m.deter, m.units, m.depth) == (1024, 700, 48)
    with pytest.raises(ValueError):
        DreamerConfig(size="XXL")


def test_act_and_evaluate(tmp_path):
    tr = DreamerTrainer(_cfg(), FakeContext(tmp_path))
    obs = torch.zeros(3, 1, 16, 16, dtype=torch.uint8)
    a = tr.act(obs)
    assert a.shape == (3,) and a.dtype == torch.int64
    summary = tr.evaluate(4)
    assert summary["episodes"] == 4 and "random_success_rate" in summary


def test_checkpoint_holds_the_running_episode_sums(tmp_path):
    cfg = _cfg(total_env_steps=40)
    a = DreamerTrainer(cfg, FakeContext(tmp_path / "a"))
    a.ctx.run(a)
    sums = a.metrics.state_dict()
    assert bool((sums["ep_length"] > 0).any())  # episodes are running at the checkpoint
    state = load_state(a.ctx.checkpoints[-1])
    b = DreamerTrainer(cfg, FakeContext(tmp_path / "b", seed=123))
    b.load_state_dict(state)
    for key, value in b.metrics.state_dict().items():
        assert torch.equal(value, sums[key]), key
