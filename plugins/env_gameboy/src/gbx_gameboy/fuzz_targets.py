"""Fuzz targets of the Game Boy plugin's binary inputs (ROM headers, savestates).

``TARGETS``: ``(name, target)`` pairs registered by the plugin's hook; empty here.
"""

from __future__ import annotations

from typing import Any

TARGETS: tuple[Any, ...] = ()
