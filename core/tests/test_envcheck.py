from __future__ import annotations

import pytest
import torch

from gbx.envcheck import EnvContractError, check_step_output
from gbx.testing import check_env
from gbx.toy import ToyConfig, ToyEnv


def good_output(env):
    env.reset()
    return env.step(torch.zeros(env.num_envs, dtype=torch.int64))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: (o[0].float(), *o[1:]), "obs: expected dtype torch.uint8"),
        (lambda o: (o[0][:1], *o[1:]), "obs: expected shape"),
        (lambda o: (o[0], o[1].double(), *o[2:]), "reward: expected dtype torch.float32"),
        (lambda o: (o[0], o[1], o[2].int(), *o[3:]), "done: expected dtype torch.bool"),
        (lambda o: (*o[:4], {}), "missing 'reset_mask'"),
        (lambda o: o[:4], "5-tuple"),
        (lambda o: (o[0], o[1] * float("nan"), *o[2:]), "NaN"),
        (lambda o: (o[0] + 4, *o[1:]), "shades must be 0..3"),
        (lambda o: (*o[:4], {**o[4], "reset_mask": ~o[4]["reset_mask"]}), "done | trunc"),
    ],
)
def test_contract_violations_are_named(mutate, message: str) -> None:
    env = ToyEnv(ToyConfig(), 4, "cpu", seed=0)
    check_step_output(env, good_output(env))
    with pytest.raises(EnvContractError, match=message.replace("|", r"\|")):
        check_step_output(env, mutate(good_output(env)))


def test_check_env_rejects_a_cropped_reset_observation() -> None:
    class Cropped(ToyEnv):
        def reset(self) -> torch.Tensor:
            return super().reset()[:, :, :10]

    with pytest.raises(EnvContractError, match=r"reset\(\) obs: expected shape"):
        check_env(Cropped(ToyConfig(), 2, "cpu", seed=0))


def test_check_env_rejects_an_env_without_reset_mask() -> None:
    class NoMask(ToyEnv):
        def step(self, actions):
            obs, r, d, t, info = super().step(actions)
            return obs, r, d, t, {"dist": info["dist"]}

    with pytest.raises(EnvContractError, match="reset_mask"):
        check_env(NoMask(ToyConfig(), 2, "cpu", seed=0))
