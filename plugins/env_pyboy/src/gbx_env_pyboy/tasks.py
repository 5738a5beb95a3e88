"""``pyboy-quest-1..4``: the bundled gbx quest stages on the PyBoy backend.

The stage table, start state, goal templates, tau, consecutive-step count and
step limits come from :mod:`gbx_gameboy.tasks` (the ``states/`` index), so
``gbx-quest-N`` and ``pyboy-quest-N`` are one task on two emulators.
"""

from __future__ import annotations

import functools
from typing import Any

from gbx.config import module_class
from gbx_env_pyboy.env import PyBoyGoalEnv, with_workers


@functools.cache
def stage_envs() -> tuple[tuple[str, type, str], ...]:
    """``(env name, config class, description)`` per bundled stage; empty without the index.

    Built once; the config classes are bound in this module (``PyBoyQuest1Config`` ...)
    so their instances pickle.
    """
    try:
        from gbx_gameboy.tasks import STAGE_CONFIGS, STAGE_TASKS
    except ImportError:
        return ()
    out = []
    for task in STAGE_TASKS:
        name = task.env_name.replace("gbx-", "pyboy-", 1)
        cls = with_workers(STAGE_CONFIGS[task.env_name], f"PyBoyQuest{task.number}Config",
                           f"The ``env`` section of ``{name}`` ({task.name}, on PyBoy).")
        module_class(cls, __name__)
        out.append((name, cls, f"gbx quest stage {task.number} on PyBoy: {task.description}"))
    return tuple(out)


def make_stage_env(env_name: str, num_envs: int, device: Any = "cpu", seed: int = 0,
                   **overrides: Any) -> PyBoyGoalEnv:
    """A ``pyboy-quest-N`` env with the stage's defaults (and field overrides)."""
    table = {name: cls for name, cls, _ in stage_envs()}
    if env_name not in table:
        raise ValueError(f"unknown PyBoy stage env {env_name!r}; choose one of "
                         f"{', '.join(table) or 'none (gbx_gameboy.tasks is missing)'}")
    return PyBoyGoalEnv(table[env_name](**overrides), num_envs, device, seed)
