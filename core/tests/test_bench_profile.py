"""gbx bench profile: phases timed through the run loop with the test algorithm."""

from __future__ import annotations

import json

import torch
from torch import nn

from gbx.bench_profile import ForwardHooks, PhaseTimer


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
