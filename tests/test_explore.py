"""The archive explorer with the on-policy trainers on the toy env: it reaches a sparse goal
that plain training does not, its statistics reach the records, a checkpoint resumes it
bit for bit, evaluation ignores it, and an env without the capability is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from gbx_explore.config import ArchiveConfig
from gbx_explore.explorer import ArchiveExplorer

from gbx.api import SnapshotEnv, StatefulEnv
from gbx.config import build_config
from gbx.plugins import load_plugins
from gbx.registry import EnvSpec
from gbx.testing import InMemoryRunContext, comparable, count_host_reads, roundtrip
from gbx.toy import ToyConfig, ToyEnv, make_toy_env
from gbx_algo_a2c.config import A2CConfig
from gbx_algo_a2c.trainer import A2CTrainer
from gbx_algo_ppo.config import PPOConfig
from gbx_algo_ppo.trainer import PPOTrainer

torch.set_num_threads(1)  # small shared CPUs: tiny convolutions run faster on one thread
SMALL = {"channels": (8, 16, 16), "hidden": 32}
# Sparse: from the top-left cell of an 8x8 board the goal needs 14 moves right/down, and an
# episode lasts 16 steps: random play practically never gets there. Small 40x40 frames keep
# the network cheap; the cells are 8x8 blocks of 5x5 pixels.
SPARSE = ToyConfig(grid=8, random_start=False, progress_scale=0.0, max_steps=16, height=40,
                   width=40)
EXPLORE_KEYS = ("explore_archive_size", "explore_cells_discovered",
                "explore_archive_start_frac", "explore_reward_extrinsic_mean",
                "explore_reward_intrinsic_mean", "explore_bytes")


def _ppo(**over: Any) -> PPOConfig:
    base: dict[str, Any] = dict(num_envs=32, rollout_steps=32, minibatches=2, update_epochs=1,
                                lr=1e-3, model_options=SMALL)
    base.update(over)
    return PPOConfig(**base)


def _wrap(**over: Any) -> Any:
    cfg = ArchiveConfig(**{"capacity": 256, **over})
    return lambda env: ArchiveExplorer(cfg, env, seed=1)


def _successes(records: list[dict[str, Any]]) -> int:
    return sum(round(r.get("success_rate", 0.0) * r["episodes"]) for r in records)


def test_the_archive_reaches_a_sparse_goal_that_plain_ppo_does_not() -> None:
    cfg = _ppo()
    budget = cfg.batch_size * 4
    plain = InMemoryRunContext(cfg, steps=budget, env_config=SPARSE)
    PPOTrainer(cfg, plain).train()
    explored = InMemoryRunContext(cfg, steps=budget, env_config=SPARSE,
                                  wrap_training=_wrap(bonus=0.0, cell_rows=8, cell_cols=8))
    PPOTrainer(cfg, explored).train()
    assert _successes(plain.records) == 0
    assert _successes(explored.records) > 0
    last = explored.records[-1]
    assert last["explore_archive_size"] > 16  # cells of a large part of the 64-cell board
    assert 0.2 < last["explore_archive_start_frac"] < 0.8  # start_fraction 0.5
    assert not any(k.startswith("explore_") for k in plain.records[-1])


@pytest.mark.slow
def test_ppo_with_the_archive_learns_to_reach_the_sparse_goal_from_the_real_start() -> None:
    """Not only reached in training: the learnt policy, played from the task's real start
    state (evaluation envs are never explored), gets there; without the archive it does
    not. Sampled actions: 40 updates are too few for a reliable greedy policy here."""
    board = ToyConfig(grid=6, random_start=False, progress_scale=0.0, max_steps=14,
                      height=40, width=40)
    cfg = _ppo(update_epochs=2, ent_coef=0.01)
    rates = {}
    for name, wrap in (("archive", _wrap(bonus=0.0, cell_rows=8, cell_cols=8)),
                       ("plain", None)):
        ctx = InMemoryRunContext(cfg, steps=cfg.batch_size * 40, env_config=board,
                                 wrap_training=wrap)
        trainer = PPOTrainer(cfg, ctx)
        trainer.train()
        rates[name] = trainer.evaluate(32, greedy=False, baseline=False)["success_rate"]
    assert rates["plain"] == 0.0
    assert rates["archive"] >= 0.25, rates


def test_records_carry_extrinsic_and_intrinsic_rewards_apart() -> None:
    cfg = _ppo(num_envs=8, rollout_steps=16)
    ctx = InMemoryRunContext(cfg, steps=cfg.batch_size * 2, env_config=ToyConfig(),
                             wrap_training=_wrap(bonus=0.5))
    PPOTrainer(cfg, ctx).train()
    for rec in ctx.records:
        assert all(isinstance(rec[k], int | float) for k in EXPLORE_KEYS)
        # the trainer learns from the sum; the records keep the parts apart
        parts = rec["explore_reward_extrinsic_mean"] + rec["explore_reward_intrinsic_mean"]
        assert parts == pytest.approx(rec["reward_mean"], rel=1e-5, abs=1e-7)
        assert 0.0 < rec["explore_reward_intrinsic_mean"] <= 0.5
    assert ctx.records[-1]["explore_bytes"] > 256 * 72 * 80


def test_a_bonus_of_zero_adds_nothing() -> None:
    env = ArchiveExplorer(ArchiveConfig(capacity=16, bonus=0.0),
                          make_toy_env(ToyConfig(), 4, "cpu", 0), seed=0)
    twin = make_toy_env(ToyConfig(), 4, "cpu", 0)
    env.reset()
    twin.reset()
    actions = torch.tensor([6, 4, 6, 4])
    _, reward, _, _, info = env.step(actions)
    _, twin_reward, _, _, _ = twin.step(actions)
    assert torch.equal(reward, twin_reward) and not bool(info["reward_intrinsic"].any())


def test_the_novelty_bonus_is_beta_over_the_root_of_the_visits() -> None:
    # Every env stands still on the same cell (A does nothing): visits grow by 4 per step.
    config = ToyConfig(random_start=False, max_steps=100)
    env = ArchiveExplorer(ArchiveConfig(capacity=16, bonus=0.3),
                          make_toy_env(config, 4, "cpu", 0), seed=0)
    env.reset()  # the start cell: 4 visits
    for step in range(1, 4):
        _, _, _, _, info = env.step(torch.zeros(4, dtype=torch.int64))
        visits = 4 + 4 * step
        expect = torch.full((4,), 0.3 / visits**0.5)
        assert torch.allclose(info["reward_intrinsic"], expect)


def test_collecting_with_the_explorer_reads_nothing_from_the_device() -> None:
    cfg = _ppo(num_envs=8, rollout_steps=8)
    ctx = InMemoryRunContext(cfg, steps=cfg.batch_size, env_config=ToyConfig(max_steps=4),
                             wrap_training=_wrap())
    trainer = PPOTrainer(cfg, ctx)
    trainer._setup_training()
    with count_host_reads(forbid=True):
        trainer._collect()
    assert trainer.metrics is not None
    with count_host_reads(forbid=False) as reads:
        record = trainer.metrics.summary()
    assert reads == ["tolist"]  # the explorer's statistics come in the record's one read
    assert record["explore_archive_size"] > 0


def test_a2c_uses_the_explorer_too() -> None:
    cfg = A2CConfig(num_envs=8, update_every=8, model_options=SMALL)
    ctx = InMemoryRunContext(cfg, steps=cfg.num_envs * cfg.update_every * 2,
                             env_config=ToyConfig(), wrap_training=_wrap())
    A2CTrainer(cfg, ctx).train()
    assert all(k in ctx.records[-1] for k in EXPLORE_KEYS)


@pytest.mark.parametrize("explore_steps", [0, 2])
def test_resume_from_a_checkpoint_continues_the_archive_bit_for_bit(explore_steps: int) -> None:
    cfg = _ppo(num_envs=4, rollout_steps=8)
    budget = cfg.batch_size * 3
    env_config = ToyConfig(max_steps=6, height=40, width=40)
    wrap = _wrap(cell_rows=8, cell_cols=8, explore_steps=explore_steps)
    full = InMemoryRunContext(cfg, steps=budget, env_config=env_config, wrap_training=wrap,
                              checkpoint_every=cfg.batch_size)
    full_trainer = full.run(PPOTrainer(cfg, full))
    step, state = full.checkpoints[0]
    torch.manual_seed(12345)  # the checkpoint must restore every random stream
    again = InMemoryRunContext(cfg, steps=budget, env_config=env_config, wrap_training=wrap,
                               checkpoint_every=cfg.batch_size)
    resumed = PPOTrainer(cfg, again)
    resumed.load_state_dict(roundtrip(state))
    again.run(resumed, resume_step=step)
    assert [comparable(r) for r in again.records] == [comparable(r) for r in full.records[1:]]
    end, end_again = full_trainer.state_dict(), resumed.state_dict()
    mine, theirs = end["env"]["env"]["explore"], end_again["env"]["env"]["explore"]
    for key, table in mine["archive"].items():
        assert torch.equal(table, theirs["archive"][key]), key
    for key, saved in mine["slots"].items():
        assert torch.equal(saved, theirs["slots"][key]), key
    assert torch.equal(mine["steps"], theirs["steps"]) and mine["t"] == theirs["t"]
    assert torch.equal(mine["since"], theirs["since"])
    assert torch.equal(mine["from_cell"], theirs["from_cell"])
    assert int(mine["archive"]["discovered"]) > 0


def _bursts(start_fraction: float, n: int = 8) -> tuple[ArchiveExplorer, list[Any]]:
    """An explorer whose cell starts end after 3 steps; the toy episodes last 10."""
    config = ToyConfig(grid=8, random_start=False, progress_scale=0.0, max_steps=10,
                       height=40, width=40)
    env = ArchiveExplorer(ArchiveConfig(capacity=64, bonus=0.0, cell_rows=8, cell_cols=8,
                                        explore_steps=3, start_fraction=start_fraction),
                          make_toy_env(config, n, "cpu", 0), seed=3)
    start = env.reset().clone()
    gen = torch.Generator().manual_seed(0)
    steps = []
    for _ in range(30):
        actions = torch.randint(3, 7, (n,), generator=gen)  # moves only
        obs, _, done, trunc, info = env.step(actions)
        steps.append((obs.clone(), done.clone(), trunc.clone(), info["reset_mask"].clone(),
                      info["archive_start"].clone(), start))
    return env, steps


def test_explore_steps_end_the_bursts_from_archived_cells() -> None:
    """Every episode from a cell ends, truncated, after explore_steps steps; the episodes
    from the start state run to the env's max_steps."""
    env, steps = _bursts(start_fraction=1.0)
    since_start = torch.zeros(env.num_envs, dtype=torch.int64)
    from_cell = torch.zeros(env.num_envs, dtype=torch.bool)
    cut = 0
    for _obs, done, trunc, reset, picked, _ in steps:
        since_start += 1
        expected_cut = from_cell & (since_start == 3) & ~done
        assert torch.equal(trunc & from_cell & ~done, expected_cut)
        assert bool((reset == (done | trunc)).all())
        cut += int(expected_cut.sum())
        # the first episodes (from the start) last the env's 10 steps unless they succeed
        assert not bool((trunc & ~from_cell & (since_start < 10)).any())
        from_cell = torch.where(reset, picked, from_cell)
        since_start = torch.where(reset, 0, since_start)
    assert cut > 0 and bool(from_cell.any())


def test_bursts_not_sent_to_a_cell_restart_from_a_start_state() -> None:
    env, steps = _bursts(start_fraction=0.0)
    # nothing starts from a cell, so nothing is cut: a plain run of 10-step episodes
    assert not any(bool(picked.any()) for *_, picked, _ in steps)
    for i, (_, _, trunc, *_) in enumerate(steps):
        assert bool(trunc.all()) == ((i + 1) % 10 == 0)
    half, steps = _bursts(start_fraction=0.5, n=16)
    homes = 0
    from_cell = torch.zeros(half.num_envs, dtype=torch.bool)
    since = torch.zeros(half.num_envs, dtype=torch.int64)
    for obs, done, _trunc, reset, picked, start in steps:
        since += 1
        ended_burst = from_cell & (since == 3) & ~done
        home = ended_burst & ~picked
        # a burst that does not go to another cell goes back to the state it started from
        assert torch.equal(obs[home], start[home])
        homes += int(home.sum())
        from_cell = torch.where(reset, picked, from_cell)
        since = torch.where(reset, 0, since)
    assert homes > 0


def test_the_explorer_saves_its_state_with_the_env() -> None:
    env = ArchiveExplorer(ArchiveConfig(capacity=8), make_toy_env(ToyConfig(), 4, "cpu", 0),
                          seed=0)
    assert isinstance(env, StatefulEnv) and not isinstance(env, SnapshotEnv)
    env.reset()
    state = env.env_state_dict()
    other = ArchiveExplorer(ArchiveConfig(capacity=16), make_toy_env(ToyConfig(), 4, "cpu", 0),
                            seed=0)
    with pytest.raises(ValueError, match="explore.capacity"):
        other.load_env_state_dict(state)


# ---------------------------------------------------------------------------------------
# Through the run loop: only training envs are explored; capability check
# ---------------------------------------------------------------------------------------


def _run(tmp_path: Path, env: str = "toy", host: Any = None) -> Any:
    from gbx.runner import prepare

    host = host or load_plugins()
    config = build_config(host.registry, flags={"env": env, "device": "cpu", "steps": 64,
                                                "run_dir": str(tmp_path / "run")},
                          overrides=["explore.name=archive", "explore.capacity=64",
                                     "algo.num_envs=4", "algo.rollout_steps=16",
                                     "algo.minibatches=2", "algo.update_epochs=1",
                                     "algo.model_options={channels=[8,16,16],hidden=32}",
                                     "env.random_start=false", "env.max_steps=8",
                                     "env.height=40", "env.width=40", "explore.cell_rows=8",
                                     "explore.cell_cols=8"])
    run, _ = prepare(config, host)
    return run


def test_evaluation_envs_start_from_the_real_start_state_with_the_archive_on(
        tmp_path: Path) -> None:
    run = _run(tmp_path)
    built: list[tuple[bool, Any]] = []
    make_env = run.make_env

    def spy(n: int, *, seed_offset: int = 0, training: bool = False) -> Any:
        env = make_env(n, seed_offset=seed_offset, training=training)
        built.append((training, env))
        return env

    run.make_env = spy
    trainer = PPOTrainer(run.config.algo, run)
    trainer.train()
    summary = trainer.evaluate(2, baseline=False)
    assert [type(e) for t, e in built if t] == [ArchiveExplorer]
    evals = [e for t, e in built if not t]
    assert evals and all(type(e) is ToyEnv for e in evals)
    assert summary["episodes"] == 2
    assert run.env_meta["explore"]["capacity"] == 64  # the training env's facts


class _PlainToy:
    """The toy env without the optional capabilities."""

    def __init__(self, config: ToyConfig, num_envs: int, device: Any, seed: int) -> None:
        self._env = make_toy_env(config, num_envs, device, seed)
        self.num_envs, self.num_actions = num_envs, self._env.num_actions
        self.obs_shape, self.device = self._env.obs_shape, self._env.device

    def reset(self) -> torch.Tensor:
        return self._env.reset()

    def step(self, actions: torch.Tensor) -> Any:
        return self._env.step(actions)

    def close(self) -> None:
        self._env.close()


def test_an_env_without_snapshots_is_refused_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gbx.cli import build_cli

    host = load_plugins()
    toy = host.registry.envs["toy"]
    host.registry.envs["plain-toy"] = EnvSpec("plain-toy", _PlainToy, ToyConfig, "",
                                              toy.provider)
    result = CliRunner().invoke(build_cli(host), [
        "run", "--env", "plain-toy", "--device", "cpu", "--steps", "512", "--observer",
        "print", "--run-dir", str(tmp_path / "run"), "--set", "explore.name=archive",
        "--set", "algo.num_envs=8", "--set", "algo.rollout_steps=16"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("gbx: error")]
    assert len(lines) == 1
    assert "SnapshotEnv" in lines[0] and "plain-toy" in lines[0]
    assert "explore.name=none" in lines[0]


# ---------------------------------------------------------------------------------------
# The explore config section
# ---------------------------------------------------------------------------------------


def test_the_explore_section_is_validated_and_round_trips() -> None:
    from gbx.config import from_dict, to_dict
    from gbx.errors import ConfigError

    registry = load_plugins().registry
    off = build_config(registry, flags={"env": "toy"})
    assert not off.explore.enabled and to_dict(off)["explore"] == {"name": "none"}
    on = build_config(registry, flags={"env": "toy"},
                      overrides=["explore.bonus=0.25", "explore.name=archive"])
    assert on.explore.settings == ArchiveConfig(bonus=0.25)
    assert from_dict(to_dict(on), registry) == on
    for bad, match in ((["explore.name=archive", "explore.bonus=-1"], "explore.bonus"),
                       (["explore.name=archive", "explore.nope=1"], "explore.nope"),
                       (["explore.capacity=8"], "no explorer is selected")):
        with pytest.raises(ConfigError, match=match):
            build_config(registry, flags={"env": "toy"}, overrides=bad)
    with pytest.raises(Exception, match="explorer 'nope' is not installed"):
        build_config(registry, flags={"env": "toy"}, overrides=["explore.name=nope"])


def test_config_explain_lists_the_explorer_fields() -> None:
    from click.testing import CliRunner

    from gbx.cli import build_cli

    cli = build_cli(load_plugins())
    out = CliRunner().invoke(cli, ["config", "--env", "toy", "--explain"]).output
    assert "explore.name (str, default 'none')" in out and "explore.bonus" not in out
    out = CliRunner().invoke(cli, ["config", "--env", "toy", "--explain", "--set",
                                   "explore.name=archive"]).output
    assert "explore.bonus (float, default 0.01)" in out
    assert "explore.settings" not in out


# ---------------------------------------------------------------------------------------
# A real run killed and resumed with the archive on (slow: two subprocess runs each)
# ---------------------------------------------------------------------------------------

_KILL_PPO = ["algo.num_envs=8", "algo.rollout_steps=8", "algo.minibatches=2",
             "algo.update_epochs=1", "run.checkpoint_every=64",
             "algo.model_options={channels=[8,16,16], hidden=32}", "explore.name=archive",
             "explore.capacity=32", "explore.bonus=0.05"]


@pytest.mark.slow
@pytest.mark.parametrize(("env", "env_settings", "plugins"), [
    ("toy", ["env.max_steps=6"], "ppo,explore"),
    ("gbx-quest-1", ["env.max_steps=4", "env.stack_k=2"], "ppo,explore,gameboy,gameboy_tasks"),
])
def test_sigkill_then_resume_with_the_archive_is_exact(
        env: str, env_settings: list[str], plugins: str, tmp_path: Path) -> None:
    import os
    import random

    from gbx.testing import check_sigkill_resume

    if env not in load_plugins().registry.envs:
        pytest.skip(f"{env} is not installed")
    args = ["--algo", "ppo", "--env", env, "--device", "cpu", "--seed", "5", "--steps",
            str(6 * 8 * 8)]
    for item in (*_KILL_PPO, *env_settings):
        args += ["--set", item]
    seed = int(os.environ.get("GBX_TEST_KILL_SEED", random.randrange(1 << 30)))
    print(f"kill seed {seed}")
    check_sigkill_resume(args, tmp_path, plugins=plugins, total_steps=6 * 8 * 8,
                         expected_records=6, seed=seed, timeout=600)


# ---------------------------------------------------------------------------------------
# DreamerV3 with the archive: the same training envs, explored the same way
# ---------------------------------------------------------------------------------------


def _dreamer(**over: Any) -> Any:
    from gbx_algo_dreamer.config import DreamerConfig

    base: dict[str, Any] = dict(size="tiny", num_envs=4, batch_size=4, batch_length=8,
                                train_ratio=16.0, replay_capacity=512, learning_starts=32,
                                record_every=4, checkpoint_replay=True, total_env_steps=96)
    base.update(over)
    return DreamerConfig(**base)


def test_dreamer_trains_on_the_explored_envs_and_records_the_archive() -> None:
    from gbx_algo_dreamer.trainer import DreamerTrainer

    cfg = _dreamer()
    ctx = InMemoryRunContext(cfg, env_config=ToyConfig(max_steps=6, height=40, width=40),
                             wrap_training=_wrap(bonus=0.5, cell_rows=8, cell_cols=8))
    trainer = ctx.run(DreamerTrainer(cfg, ctx))
    assert isinstance(trainer.env, ArchiveExplorer)
    assert trainer.opt_steps > 0
    for rec in ctx.records:
        assert all(isinstance(rec[k], int | float) for k in EXPLORE_KEYS)
        parts = rec["explore_reward_extrinsic_mean"] + rec["explore_reward_intrinsic_mean"]
        assert parts == pytest.approx(rec["reward_mean"], rel=1e-5, abs=1e-7)
    assert sum(r["explore_archive_start_frac"] for r in ctx.records) > 0
    assert ctx.records[-1]["explore_archive_size"] > 1
    # every restart, from a cell or the start, opens a new sequence of the world model
    replay = trainer.replay
    assert int(replay.is_first.sum()) >= 4 + sum(round(r["reset_rate"] * 16)
                                                  for r in ctx.records)


def test_dreamer_resumed_with_the_archive_continues_bit_for_bit() -> None:
    from gbx_algo_dreamer.trainer import DreamerTrainer

    cfg = _dreamer()
    env_config = ToyConfig(max_steps=6, height=40, width=40)
    wrap = _wrap(bonus=0.05, cell_rows=8, cell_cols=8, explore_steps=2)

    def context() -> InMemoryRunContext:
        return InMemoryRunContext(cfg, env_config=env_config, wrap_training=wrap,
                                  checkpoint_every=48)

    full = context()
    full_trainer = full.run(DreamerTrainer(cfg, full))
    step, state = full.checkpoints[0]
    assert step == 48 and full_trainer.opt_steps > 0
    torch.manual_seed(12345)  # the checkpoint must restore every random stream
    again = context()
    resumed = DreamerTrainer(cfg, again)
    resumed.load_state_dict(roundtrip(state))
    again.run(resumed, resume_step=step)
    tail = [comparable(r) for r in full.records if r["env_steps"] > step]
    assert [comparable(r) for r in again.records] == tail
    assert "explore_archive_size" in again.records[-1]
    end, end_again = full_trainer.state_dict(), resumed.state_dict()
    mine, theirs = end["live"]["env"]["explore"], end_again["live"]["env"]["explore"]
    for key, table in mine["archive"].items():
        assert torch.equal(table, theirs["archive"][key]), key
    for key, saved in mine["slots"].items():
        assert torch.equal(saved, theirs["slots"][key]), key
    assert torch.equal(mine["steps"], theirs["steps"]) and mine["t"] == theirs["t"]
    for a, b in zip(full_trainer.wm.parameters(), resumed.wm.parameters(), strict=True):
        assert torch.equal(a, b)


def test_gbx_run_dreamer_with_the_archive(tmp_path: Path) -> None:
    """`gbx run --algo dreamer_v3 --set explore.name=archive` wraps Dreamer's training envs
    (no "had no effect" warning) and its log carries the explorer's fields."""
    import json

    from click.testing import CliRunner

    from gbx.cli import build_cli

    run_dir = tmp_path / "run"
    args = ["run", "--algo", "dreamer_v3", "--env", "toy", "--device", "cpu", "--steps", "64",
            "--observer", "jsonl", "--run-dir", str(run_dir)]
    for item in ("algo.size=tiny", "algo.num_envs=4", "algo.batch_size=4",
                 "algo.batch_length=8", "algo.learning_starts=32", "algo.record_every=4",
                 "algo.replay_capacity=512", "env.height=24", "env.width=32",
                 "env.max_steps=6", "run.final_eval_episodes=2", "explore.name=archive",
                 "explore.capacity=32", "explore.cell_rows=8", "explore.cell_cols=8"):
        args += ["--set", item]
    res = CliRunner().invoke(build_cli(load_plugins()), args)
    assert res.exit_code == 0, res.output
    assert "had no effect" not in res.output
    records = [json.loads(line) for line in (run_dir / "train_log.jsonl").open()]
    train = [r for r in records if "explore_archive_size" in r]
    assert len(train) == 4 and train[-1]["explore_archive_size"] > 0
    assert any("eval" in r for r in records)  # evaluated from the real start, unexplored
