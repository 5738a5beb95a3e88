"""Fixtures of the observer tests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest


@pytest.fixture
def run(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(run_id="run-a", run_dir=tmp_path / "run")
