"""gbx-observers: run logs, progress, plots, rollout GIFs, TensorBoard and failure media."""

from __future__ import annotations

__version__ = "0.1.0"
