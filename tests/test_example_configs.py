"""Every config file under examples/ resolves against the installed plugins: a typo or a
renamed key there would only show when a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbx.config import build_config, read_config_file
from gbx.plugins import load_plugins

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.toml"))


def test_there_are_example_configs() -> None:
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_config_resolves(path: Path) -> None:
    config = build_config(load_plugins().registry, base=read_config_file(path))
    assert config.run.algo and config.run.env
