"""Fuzz targets of the core's file inputs (checkpoints, plugin registration, config files).

``TARGETS``: ``(name, target)`` pairs registered by :mod:`gbx.fuzz`; empty here.
"""

from __future__ import annotations

from typing import Any

TARGETS: tuple[Any, ...] = ()
