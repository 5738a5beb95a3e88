"""DreamerV3 for gbx: a world model learned from replayed screens and an actor-critic
trained inside it. Registered as the algorithm ``dreamer_v3``."""

from __future__ import annotations

__all__: list[str] = []
