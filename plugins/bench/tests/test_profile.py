"""gbx bench profile: phases timed through the run loop with the test algorithm."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from gbx_bench.profile import ForwardHooks, PhaseTimer


def test_profile_times_env_steps_after_the_first_update(invoke) -> None:
    result = invoke("bench", "profile", "--algo", "counter", "--env", "toy", "--envs", "4",
                    "--device", "cpu", "--steps", "128")
    assert result.exit_code == 0, result.output
    rec = json.loads(result.output.strip().splitlines()[-1])
    assert rec["bench"] == "profile" and rec["num_envs"] == 4
    # counter records every 8 steps x 4 envs = 32 env steps; the first record starts timing
    assert rec["measured_env_steps"] == 96
    assert rec["phases"]["env_step"]["calls"] == 24
    assert 0 < rec["phases"]["env_step"]["share_of_wall"] <= 1
    assert rec["config"]["algo"]["num_envs"] == 4 and rec["versions"]["torch"]


def test_forward_hooks_split_acting_from_training() -> None:
    timer = PhaseTimer(torch.device("cpu"))
    timer.enabled = True
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    with ForwardHooks(timer):
        with torch.no_grad():
            model(torch.zeros(2, 3))
        model(torch.zeros(2, 3)).sum().backward()
    model(torch.zeros(2, 3))  # hooks removed: not counted
    totals = timer.totals()
    assert totals["policy_forward"]["calls"] == 1 and totals["train_forward"]["calls"] == 1


def test_default_steps_are_four_records_of_each_algorithm() -> None:
    """``--steps`` left out: 4 records (3 measured), from the algorithm's own intervals."""
    from types import SimpleNamespace as NS

    from gbx_bench.profile import default_profile_steps

    ppo = NS(num_envs=256, rollout_steps=128)
    assert default_profile_steps(ppo, 256) == 4 * 256 * 128  # 4 PPO updates
    a2c = NS(num_envs=256, update_every=5, log_every=10)
    assert default_profile_steps(a2c, 256) == 4 * 256 * 5 * 10  # 4 records = 40 windows
    dreamer = NS(num_envs=16, record_every=64)
    assert default_profile_steps(dreamer, 16) == 4 * 16 * 64
    assert default_profile_steps(NS(), 8) == 4 * 8 * 64  # unknown algorithm: fallback


def test_default_steps_with_the_real_configs() -> None:
    ppo = pytest.importorskip("gbx_algo_ppo.config")
    a2c = pytest.importorskip("gbx_algo_a2c.config")
    from gbx_bench.profile import default_profile_steps

    p = ppo.PPOConfig(num_envs=64)
    assert default_profile_steps(p, 64) == 4 * p.batch_size
    a = a2c.A2CConfig(num_envs=64, update_every=4, log_every=2)
    assert default_profile_steps(a, 64) == 4 * 2 * a.batch_size


def test_profile_without_steps_runs_four_records(invoke) -> None:
    result = invoke("bench", "profile", "--algo", "counter", "--env", "toy", "--envs", "4",
                    "--device", "cpu", "--set", "algo.chunk=8")
    assert result.exit_code == 0, result.output
    rec = json.loads(result.output.strip().splitlines()[-1])
    # counter names no known interval: the fallback, 4 x 64 steps x 4 envs; it records
    # every 8 x 4 env steps, so all but the first 32 are measured
    assert rec["measured_env_steps"] == 4 * 64 * 4 - 32
