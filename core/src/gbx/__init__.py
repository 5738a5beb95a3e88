"""gbx: a GPU-native reinforcement-learning lab for the Game Boy.

Plugins implement the hooks in :mod:`gbx.hookspecs` with :data:`hookimpl`.
"""

from __future__ import annotations

import pluggy

__version__ = "0.1.0"

hookimpl = pluggy.HookimplMarker("gbx")

__all__ = ["__version__", "hookimpl"]
