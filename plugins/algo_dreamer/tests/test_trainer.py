from __future__ import annotations

import attrs
import pytest
import torch
from fakes import dot_context, load_state, small_cfg

from gbx.memory import MemoryBudgetError
from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.trainer import DreamerTrainer
from gbx_toolkit.guard import NonFiniteError


def _params(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def test_one_training_run_updates_everything_and_records(tmp_path):
    ctx = dot_context(tmp_path)
    tr = DreamerTrainer(small_cfg(), ctx)
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
    cfg = small_cfg(total_env_steps=40, checkpoint_replay=True)
    a = DreamerTrainer(cfg, dot_context(tmp_path / "a"))
    a.ctx.run(a)
    state = load_state(a.ctx.checkpoints[-1])
    b = DreamerTrainer(cfg, dot_context(tmp_path / "b", seed=123))
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
    a = DreamerTrainer(small_cfg(total_env_steps=8), dot_context(tmp_path / "a"))
    state = a.state_dict()
    b = DreamerTrainer(small_cfg(bins=101, total_env_steps=8), dot_context(tmp_path / "b"))
    with pytest.raises(ValueError, match="bins"):
        b.load_state_dict(state)


def test_nonfinite_loss_raises_with_batch_payload(tmp_path, monkeypatch):
    ctx = dot_context(tmp_path)
    tr = DreamerTrainer(small_cfg(total_env_steps=64), ctx)
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
    ctx = dot_context(tmp_path)
    tr = DreamerTrainer(small_cfg(mode="standing_still", fixed_action=2), ctx)
    tr.train()
    hist = torch.tensor([r["action_hist"] for r in ctx.records]).sum(0)
    assert hist.tolist() == [0, 0, 48, 0, 0]
    assert "loss_actor" not in ctx.records[-1] and "loss_model" in ctx.records[-1]
    ctx2 = dot_context(tmp_path / "r")
    tr2 = DreamerTrainer(small_cfg(mode="recon_check"), ctx2)
    tr2.train()
    rec = ctx2.records[-1]
    assert 0.0 <= rec["heldout_recon_accuracy"] <= 1.0 and rec["heldout_obs_nll"] > 0
    assert tr2.heldout_streams.tolist() == [3]


def test_memory_estimate_refuses_cleanly(tmp_path):
    cfg = small_cfg(replay_capacity=4_000_000_000, num_envs=4)
    # the shared toolkit's refusal: a GbxError, one line, naming what to lower
    with pytest.raises(MemoryBudgetError, match=r"^dreamer_v3 needs .* will not fit; lower "
                       r"algo.replay_capacity, algo.batch_size or algo.size$"):
        DreamerTrainer(cfg, dot_context(tmp_path))


def test_size_presets_follow_the_table():
    s = DreamerConfig(size="S").preset()
    assert (s.deter, s.units, s.depth, s.layers, s.stoch, s.classes) == (512, 512, 32, 2, 32, 32)
    m = attrs.evolve(DreamerConfig(), size="M", units=700).preset()
    assert (m.deter, m.units, m.depth) == (1024, 700, 48)
    with pytest.raises(ValueError):
        DreamerConfig(size="XXL")


def test_act_and_evaluate(tmp_path):
    tr = DreamerTrainer(small_cfg(), dot_context(tmp_path))
    obs = torch.zeros(3, 1, 16, 16, dtype=torch.uint8)
    a = tr.act(obs)
    assert a.shape == (3,) and a.dtype == torch.int64
    summary = tr.evaluate(4)
    assert summary["episodes"] == 4 and "random_success_rate" in summary


def test_checkpoint_holds_the_running_episode_sums(tmp_path):
    cfg = small_cfg(total_env_steps=40)
    a = DreamerTrainer(cfg, dot_context(tmp_path / "a"))
    a.ctx.run(a)
    sums = a.metrics.state_dict()
    assert bool((sums["ep_length"] > 0).any())  # episodes are running at the checkpoint
    state = load_state(a.ctx.checkpoints[-1])
    b = DreamerTrainer(cfg, dot_context(tmp_path / "b", seed=123))
    b.load_state_dict(state)
    for key, value in b.metrics.state_dict().items():
        assert torch.equal(value, sums[key]), key


def test_evaluation_uses_its_own_seed_stream(tmp_path):
    """Evaluating and acting draw from the EVAL_RNG stream: they never move the training
    generator, and two evaluations of one policy replay the same episodes."""
    tr = DreamerTrainer(small_cfg(), dot_context(tmp_path))
    before = tr.gen.get_state()
    first = tr.evaluate(4, greedy=False)
    assert torch.equal(tr.gen.get_state(), before)
    assert tr.evaluate(4, greedy=False) == first
    tr.act(torch.zeros(2, 1, 16, 16, dtype=torch.uint8), greedy=False)  # e.g. a rollout GIF
    assert torch.equal(tr.gen.get_state(), before)


def test_checkpoint_keeps_the_shared_rng_and_env_batch_layout(tmp_path):
    """The RNG streams and the live env batch are saved by the shared toolkit
    (gbx_toolkit.rl_common), like PPO's and A2C's."""
    from gbx_toolkit.rl_common import capture_rng_state

    tr = DreamerTrainer(small_cfg(), dot_context(tmp_path))
    assert tr.state_dict()["live"] is None  # nothing to save before the first reset
    tr._ensure_started()
    state = tr.state_dict()
    assert set(state["rng"]) == set(capture_rng_state(tr.gen))
    assert set(state["live"]) == {"obs", "env", "metrics", "is_first"}


def test_engine_modules_do_not_import_each_other_in_a_cycle():
    """The engines drive the trainer through the narrow ``engine.Learner`` protocol: no
    module of the plugin imports one that imports it back."""
    import ast
    import importlib.util
    from pathlib import Path

    package = Path(importlib.util.find_spec("gbx_algo_dreamer").origin).parent
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "gbx_algo_dreamer."):
                names.add(node.module.split(".")[1])
        graph[path.stem] = names

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert "trainer" not in graph["engine"]
    assert [m for m in graph if reaches(m, m, set())] == []


def test_training_envs_are_asked_for_as_training_envs(tmp_path):
    """Dreamer's replay is filled from training envs (curriculum start states, an explorer's
    archive starts); its evaluation envs are plain ones from the task's real start."""
    ctx = dot_context(tmp_path)
    ctx.made_envs.clear()
    tr = DreamerTrainer(small_cfg(), ctx)
    assert ctx.made_envs == [(tr.env.num_envs, True)]
    tr.evaluate(2, greedy=True)
    assert ctx.made_envs[1:] and all(not training for _, training in ctx.made_envs[1:])
