"""The ``gbx`` entry point of gbx-env-pyboy: envs and the backend benchmark."""

from __future__ import annotations

from typing import Any

from gbx import hookimpl


@hookimpl
def register_envs(register: Any) -> None:
    from gbx_env_pyboy.env import (
        PyBoyConfig,
        PyBoyGoalConfig,
        PyBoyGoalEnv,
        make_pyboy_env,
        make_pyboy_goal_env,
    )
    from gbx_env_pyboy.tasks import stage_envs

    register("pyboy", make_pyboy_env, PyBoyConfig,
             description="Game Boy ROM on PyBoy in CPU worker processes; pixel observations")
    register("pyboy-goal", make_pyboy_goal_env, PyBoyGoalConfig,
             description="pyboy env; reward and done from the distance to a goal screen")
    for name, cls, description in stage_envs():
        def make(config: Any, num_envs: int, device: Any, seed: int) -> PyBoyGoalEnv:
            return PyBoyGoalEnv(config, num_envs, device, seed)

        register(name, make, cls, description=description)


@hookimpl
def register_benchmarks(register: Any) -> None:
    from gbx_env_pyboy.bench import backends_bench

    register("backends", backends_bench)
