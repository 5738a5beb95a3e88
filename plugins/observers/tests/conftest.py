"""Fixtures of the observer tests."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

# Tests are imported by path (--import-mode=importlib), so this folder is not on
# sys.path by itself; the helper modules next to the tests are imported by name.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def run(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(run_id="run-a", run_dir=tmp_path / "run")
