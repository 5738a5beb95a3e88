"""The one way this package imports Warp: configured quiet before anything initialises it.

Warp prints a start-up banner (version, devices) and per-module load messages on stdout
when it initialises. That breaks tools whose stdout is machine-readable, such as
``gbx bench emulator`` (one JSON line). Older Warp versions silence these with
``wp.config.quiet``; newer ones (1.19 and later) route them through a logger whose
threshold is ``wp.config.log_level``, and ignore ``quiet``. Every module of the package
gets ``wp`` from :func:`import_warp`, so whichever module is imported first, Warp is
quiet before ``wp.init()`` runs. Warnings (log level WARNING) still go to stderr.
"""

from __future__ import annotations

from types import ModuleType


def import_warp() -> ModuleType:
    """Import Warp, silence its informational output and return the module."""
    import warp as wp

    wp.config.quiet = True  # Warp before the log-level API
    level = getattr(wp, "LOG_WARNING", None)
    if level is not None and getattr(wp.config, "log_level", level) < level:
        wp.config.log_level = level
    return wp
