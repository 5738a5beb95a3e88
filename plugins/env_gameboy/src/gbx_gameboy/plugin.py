"""gbx hook implementations of the Game Boy plugin (kept short: each defers to a module)."""

from __future__ import annotations

from typing import Any

from gbx import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    from gbx_gameboy.cli import gameboy

    cli.add_command(gameboy)


@hookimpl
def register_benchmarks(register: Any) -> None:
    from gbx_gameboy.bench import emulator_bench
    from gbx_gameboy.env_bench import env_bench

    register("emulator", emulator_bench)
    register("env", env_bench)


@hookimpl
def register_fuzz_targets(register: Any) -> None:
    from gbx.registry import register_target_table
    from gbx_gameboy import fuzz_targets
    from gbx_gameboy.fuzz_goal import fuzz_goal_file

    register("goal-file", fuzz_goal_file,
             description="malformed goal folders, templates and meta.json for the goal env")
    register_target_table(register, fuzz_targets.TARGETS)


# --- environments: register_envs lives in env.py ---
from gbx_gameboy.env import register_envs  # noqa: E402, F401
