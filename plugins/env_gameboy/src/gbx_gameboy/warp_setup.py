"""The one way this package imports Warp: configured quiet before anything initialises it.

Warp prints a start-up banner (version, devices) and per-module load messages on stdout
when it initialises. That breaks tools whose stdout is machine-readable, such as
``gbx bench emulator`` (one JSON line). Older Warp versions silence these with
``wp.config.quiet``; newer ones (1.19 and later) route them through a logger whose
threshold is ``wp.config.log_level``, and ignore ``quiet``. Every module of the package
imports ``wp`` from this module, so whichever module is imported first, Warp is
quiet before ``wp.init()`` runs. Warnings (log level WARNING) still go to stderr.
"""

from __future__ import annotations

from types import ModuleType

import warp as wp


def import_warp() -> ModuleType:
    """Silence Warp's informational output (idempotent) and return the module."""
    wp.config.quiet = True  # Warp before the log-level API
    level = getattr(wp, "LOG_WARNING", None)
    if level is not None and getattr(wp.config, "log_level", level) < level:
        wp.config.log_level = level
    return wp


# Importing ``wp`` from here (``from gbx_gameboy.warp_setup import wp``) configures it.
import_warp()

__all__ = ["import_warp", "wp"]
