"""The observers' config sections: ``observer.console`` and ``observer.gif``.

Registered with the observers (``gbx_observers.plugin``), so ``[observer.gif]`` in a
config file, ``--set observer.gif.steps=50`` and ``gbx config --explain`` reach them,
validated like every other section.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import attrs

from gbx.config import in_range, option

# Environment variables that once tuned these observers, and the keys that replace them.
# One that is still set is refused, so a setting the user believes in is never ignored.
REPLACED_VARIABLES = {
    "GBX_CONSOLE_EVERY": "observer.console.every",
    "GBX_GIF_STEPS": "observer.gif.steps",
    "GBX_GIF_SCALE": "observer.gif.scale",
}


def refuse_replaced_variables(keys: Mapping[str, str] = REPLACED_VARIABLES,
                              environ: Mapping[str, str] | None = None) -> None:
    """Raise ``ValueError`` naming the config key that replaces a set variable of ``keys``."""
    environ = os.environ if environ is None else environ
    for variable, key in keys.items():
        if variable in environ:
            raise ValueError(f"{variable} is not read: unset it and pass "
                             f"--set {key}={environ[variable]} (or set {key} in a config file)")


def _own(prefix: str) -> dict[str, str]:
    return {v: k for v, k in REPLACED_VARIABLES.items() if k.startswith(prefix)}


@attrs.frozen
class ConsoleConfig:
    """``observer.console``: how often a plain (non-terminal) console prints a line."""

    every: int = option(10, "print one plain line every N records (not on a terminal)",
                        in_range(1))

    def __attrs_post_init__(self) -> None:
        # Checked when the section is resolved, so the run stops before it starts.
        refuse_replaced_variables(_own("observer.console."))


@attrs.frozen
class GifConfig:
    """``observer.gif``: the rollout GIF drawn at every evaluation."""

    steps: int = option(200, "env steps per rollout GIF", in_range(1))
    scale: int = option(2, "pixels per Game Boy pixel in the GIF (nearest neighbour)",
                        in_range(1, 8))

    def __attrs_post_init__(self) -> None:
        refuse_replaced_variables(_own("observer.gif."))
