"""Entry point of the ``gbx-explore`` distribution (``[project.entry-points.gbx] explore``)."""

from __future__ import annotations

from typing import Any

from gbx import hookimpl
from gbx_explore.config import ArchiveConfig
from gbx_explore.explorer import make_archive_explorer


@hookimpl
def register_explorers(register: Any) -> None:
    register(
        "archive",
        make_archive_explorer,
        ArchiveConfig,
        description="Go-Explore style restarts from a device archive of pixel cells, "
                    "plus a count-based novelty bonus",
    )
