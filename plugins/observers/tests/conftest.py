"""Fixtures of the observer tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gbx.testing import InMemoryRunContext

# Tests are imported by path (--import-mode=importlib), so this folder is not on
# sys.path by itself; the helper modules next to the tests are imported by name.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def run(tmp_path: Path) -> InMemoryRunContext:
    """The run handle observers are built with (the shared stand-in of the run loop)."""
    return InMemoryRunContext(run_id="run-a", run_dir=tmp_path / "run")
