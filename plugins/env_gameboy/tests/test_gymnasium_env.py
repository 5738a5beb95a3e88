"""The Gymnasium adapter: spaces, same-step autoreset, Gymnasium's checker, and PPO through it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gymnasium = pytest.importorskip("gymnasium", reason="the adapter needs gbx-env-gameboy[gymnasium]")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from gbx.errors import ConfigError, PluginNotInstalledError  # noqa: E402
from gbx_gameboy.game.solutions import SOLUTIONS, action_indices  # noqa: E402
from gbx_gameboy.gymnasium_env import GbxVectorEnv, build_env, gymnasium_ids  # noqa: E402

SMALL_TOY = {"height": 8, "width": 8, "max_steps": 3}


def test_ids_are_registered_and_spaces_declared() -> None:
    assert set(gymnasium_ids()) == {"gbx/toy", "gbx/quest-1", "gbx/quest-2", "gbx/quest-3",
                                    "gbx/quest-4"}
    assert all(i in gymnasium.registry for i in gymnasium_ids())
    # The "module:id" form imports the adapter itself (Gymnasium 1.x loads no plugins).
    envs = gymnasium.make_vec("gbx_gameboy.gymnasium_env:gbx/toy", num_envs=3, device="cpu",
                              config={"stack_k": 2})
    assert isinstance(envs, GbxVectorEnv) and envs.num_envs == 3
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert envs.single_observation_space == gymnasium.spaces.Box(0, 3, (2, 72, 80), np.uint8)
    assert envs.observation_space.shape == (3, 2, 72, 80)
    assert envs.single_action_space == gymnasium.spaces.Discrete(7)
    assert envs.action_space == gymnasium.spaces.MultiDiscrete([7, 7, 7])
    obs, info = envs.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.dtype == torch.uint8 and info == {}
    assert envs.observation_space.contains(obs.numpy())
    envs.close()


def test_same_step_autoreset_matches_the_gbx_env() -> None:
    """Observations, final_obs, masks and truncation equal the raw env's, step for step."""
    raw = build_env("toy", 4, "cpu", 7, SMALL_TOY)
    envs = GbxVectorEnv("toy", 4, device="cpu", seed=7, config=SMALL_TOY)
    assert torch.equal(envs.reset()[0], raw.reset())
    gen = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(7):
        actions = torch.randint(0, 7, (4,), generator=gen)
        obs, reward, term, trunc, infos = envs.step(actions)
        r_obs, r_reward, r_done, r_trunc, r_info = raw.step(actions)
        assert torch.equal(obs, r_obs) and torch.equal(reward, r_reward)
        assert torch.equal(term, r_done) and torch.equal(trunc, r_trunc)
        mask = r_info["reset_mask"]
        assert torch.equal(infos["_final_obs"], mask) and torch.equal(infos["_final_info"], mask)
        assert torch.equal(infos["final_obs"], r_info["final_obs"])
        assert torch.equal(infos["final_info"]["dist"], r_info["dist"])
        assert infos["_dist"].all()
        # A finished env already shows its next episode; its last frame is in final_obs.
        if mask.any():
            assert not torch.equal(infos["final_obs"][mask], obs[mask])
        ended += int(mask.sum())
    assert ended >= 8  # max_steps=3: every env truncated at least twice
    # Copies by default: the env's own buffer moves on, the returned batch does not.
    kept = obs.clone()
    envs.step(torch.zeros(4, dtype=torch.int64))
    assert torch.equal(obs, kept)
    envs.close()


def test_numpy_view_works_with_gymnasium_episode_statistics() -> None:
    envs = gymnasium.make_vec("gbx/toy", num_envs=4, device="cpu", numpy=True, config=SMALL_TOY)
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(envs)
    obs, _ = envs.reset(seed=3)
    envs.action_space.seed(3)
    lengths: list[int] = []
    for _ in range(6):
        obs, reward, term, trunc, infos = envs.step(envs.action_space.sample())
        assert isinstance(obs, np.ndarray) and envs.observation_space.contains(obs)
        assert reward.dtype == np.float32 and term.dtype == np.bool_
        assert isinstance(infos["final_obs"], np.ndarray)
        if "episode" in infos:
            lengths += infos["episode"]["l"][infos["_episode"]].tolist()
    # Random play on a 4x4 board: episodes end by the goal or by the 3-step limit.
    assert lengths and max(lengths) <= 3 and len(lengths) >= 8
    envs.close()


@pytest.mark.parametrize("env_id", ["gbx/toy", "gbx/quest-1"])
def test_single_env_view_passes_gymnasium_env_checker(env_id: str) -> None:
    # Spaces, seeded reset and step determinism, no returned data shared between calls
    # (the quest env hands out its frame-stack buffer; the adapter copies it).
    check_env(gymnasium.make(env_id, disable_env_checker=True).unwrapped)


def test_single_env_view_returns_the_last_frame_of_an_episode() -> None:
    env = gymnasium.make("gbx/toy", config=SMALL_TOY, disable_env_checker=True)
    obs, _ = env.reset(seed=5)
    for _ in range(3):  # max_steps=3: the third step truncates and returns the last frame
        last, reward, term, trunc, info = env.step(0)
    assert trunc and not term and "dist" in info
    assert np.array_equal(last, obs)  # action 0 (A) does not move the player
    env.close()


def test_quest_stage_through_make_vec_reaches_its_goal() -> None:
    envs = gymnasium.make_vec("gbx/quest-1", num_envs=2, device="cpu",
                              config={"info_mode": "full"})
    start, _ = envs.reset(seed=0)
    moves = action_indices(SOLUTIONS["leave_house"])
    for i, move in enumerate(moves):
        obs, reward, term, trunc, infos = envs.step(torch.tensor([move, 0]))
        assert term.tolist() == [i == len(moves) - 1, False] and not trunc.any()
    assert infos["_final_obs"].tolist() == [True, False]
    assert torch.equal(obs[0], start[0]) and not torch.equal(infos["final_obs"][0], start[0])
    assert float(infos["final_info"]["dist"][0]) < 0.05
    envs.close()


def test_bad_input_is_one_line_errors() -> None:
    with pytest.raises(PluginNotInstalledError, match="env 'nope' is not installed"):
        GbxVectorEnv("nope", 2, device="cpu")
    with pytest.raises(ConfigError, match="grid"):
        GbxVectorEnv("toy", 2, device="cpu", config={"grid": 99})
    envs = GbxVectorEnv("toy", 2, device="cpu", numpy=True)
    envs.reset()
    with pytest.raises(ValueError, match=r"expected integers 0\.\.6, got 0\.\.9"):
        envs.step(np.array([0, 9]))
    with pytest.raises(ValueError, match=r"expected shape \(2,\)"):
        envs.step(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="pass one int"):
        envs.reset(seed=[1, 2])
    envs.close()


# --------------------------------------------------------------------------- CleanRL-style PPO
class Agent(torch.nn.Module):
    def __init__(self, obs_size: int, actions: int) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(obs_size, 64),
                                        torch.nn.Tanh())
        self.pi = torch.nn.Linear(64, actions)
        self.v = torch.nn.Linear(64, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.distributions.Categorical, torch.Tensor]:
        h = self.body(obs.float() / 3.0)
        return torch.distributions.Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)


@pytest.fixture
def one_thread():
    """Tiny networks: extra torch threads only add hand-off cost on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_cleanrl_style_ppo_learns_the_toy_env_through_the_adapter(one_thread) -> None:
    torch.manual_seed(0)
    n, t, updates, gamma, lam, clip = 16, 32, 6, 0.95, 0.9, 0.2
    envs = gymnasium.make_vec("gbx/toy", num_envs=n, device="cpu",
                              config={"height": 8, "width": 8, "max_steps": 16})
    obs_shape = envs.single_observation_space.shape
    agent = Agent(int(np.prod(obs_shape)), int(envs.single_action_space.n))
    before = [p.detach().clone() for p in agent.parameters()]
    opt = torch.optim.Adam(agent.parameters(), lr=3e-3)
    obs_buf = torch.zeros(t, n, *obs_shape, dtype=torch.uint8)
    act_buf = torch.zeros(t, n, dtype=torch.int64)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros(t, n) for _ in range(4))
    next_obs, _ = envs.reset(seed=0)
    goals_per_update: list[int] = []
    losses: list[float] = []
    for _ in range(updates):
        goals = 0
        for step in range(t):
            with torch.no_grad():
                dist, value = agent(next_obs)
                action = dist.sample()
            obs_buf[step], act_buf[step] = next_obs, action
            logp_buf[step], val_buf[step] = dist.log_prob(action), value
            next_obs, reward, term, trunc, infos = envs.step(action)
            # Truncated episodes bootstrap from the value of their last observation.
            with torch.no_grad():
                final_value = agent(infos["final_obs"])[1]
            rew_buf[step] = reward + gamma * final_value * trunc
            done_buf[step] = (term | trunc).float()
            goals += int(term.sum())
        goals_per_update.append(goals)
        with torch.no_grad():  # GAE
            next_value = agent(next_obs)[1]
            adv = torch.zeros(t, n)
            last = torch.zeros(n)
            for step in reversed(range(t)):
                nv = next_value if step == t - 1 else val_buf[step + 1]
                delta = rew_buf[step] + gamma * nv * (1 - done_buf[step]) - val_buf[step]
                last = delta + gamma * lam * (1 - done_buf[step]) * last
                adv[step] = last
            ret = adv + val_buf
        b_obs, b_act = obs_buf.flatten(0, 1), act_buf.flatten()
        b_logp, b_adv, b_ret = logp_buf.flatten(), adv.flatten(), ret.flatten()
        for _epoch in range(4):
            for idx in torch.randperm(n * t).split(128):
                dist, value = agent(b_obs[idx])
                ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
                a = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - clip, 1 + clip)).mean()
                loss = pg + 0.5 * (value - b_ret[idx]).pow(2).mean() - 0.01 * dist.entropy().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
    envs.close()
    assert all(np.isfinite(losses))
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.parameters(), strict=True))
    # Random play reaches the goal ~7 times per rollout; after 6 updates it is ~100 times.
    first, last = goals_per_update[0], sum(goals_per_update[-3:]) / 3
    assert last > 4 * first, goals_per_update


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensors_stay_on_the_cuda_device_and_numpy_view_matches() -> None:
    gpu = gymnasium.make_vec("gbx/quest-1", num_envs=4, device="cuda")
    cpu = gymnasium.make_vec("gbx/quest-1", num_envs=4, device="cpu", numpy=True)
    obs, _ = gpu.reset(seed=0)
    ref, _ = cpu.reset(seed=0)
    assert obs.is_cuda and np.array_equal(obs.cpu().numpy(), ref)
    actions = torch.tensor([3, 4, 5, 6])
    obs, reward, term, trunc, infos = gpu.step(actions.cuda())
    ref, r_reward, *_ = cpu.step(actions.numpy())
    assert obs.is_cuda and reward.is_cuda and infos["final_obs"].is_cuda
    assert np.array_equal(obs.cpu().numpy(), ref) and np.array_equal(reward.cpu().numpy(), r_reward)
    gpu.close()
    cpu.close()
