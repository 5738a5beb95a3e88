"""Helpers for plugin authors' tests.

``check_env(env)`` drives any env through resets and random steps and checks
every output against the :class:`gbx.api.Env` contract, including autoreset::

    from gbx.testing import check_env

    def test_my_env_follows_the_contract():
        check_env(make_my_env(MyConfig(), num_envs=4, device="cpu", seed=0))
"""

from __future__ import annotations

from typing import Any

import torch

from gbx.envcheck import EnvContractError, check_reset_output, check_step_output


def check_env(env: Any, *, steps: int = 64, seed: int = 0) -> dict[str, int]:
    """Check ``env`` over ``steps`` random steps; return counts of done/trunc seen.

    Raises :class:`gbx.envcheck.EnvContractError` on the first violation.
    """
    for attr in ("num_envs", "num_actions", "obs_shape", "device"):
        if not hasattr(env, attr):
            raise EnvContractError(f"env has no attribute {attr!r}")
    if not isinstance(env.num_actions, int) or env.num_actions < 1:
        raise EnvContractError(f"num_actions must be a positive int, got {env.num_actions!r}")
    device = torch.device(env.device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    obs = env.reset()
    check_reset_output(env, obs)
    counts = {"done": 0, "trunc": 0}
    for _ in range(steps):
        actions = torch.randint(0, env.num_actions, (env.num_envs,), generator=gen).to(device)
        out = env.step(actions)
        check_step_output(env, out)
        counts["done"] += int(out[2].sum())
        counts["trunc"] += int(out[3].sum())
        if "final_obs" in out[4]:
            # Envs that did not finish must not report a different final observation.
            keep = ~out[4]["reset_mask"]
            if bool(keep.any()) and not torch.equal(out[4]["final_obs"][keep], out[0][keep]):
                raise EnvContractError("info['final_obs'] differs from obs for a running env")
    env.close()
    return counts
