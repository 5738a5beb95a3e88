"""docs/plugin-authoring.md's import table for code written against the older core layout:
every new import exists, every old module is gone from the core."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugin-authoring.md"


def _rows() -> list[tuple[str, str]]:
    section = DOC.read_text(encoding="utf-8").split("## 7. The shared RL toolkit", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`gbx."):
            rows.append((cells[0], cells[1]))
    return rows


def test_the_table_is_read() -> None:
    assert len(_rows()) >= 8


@pytest.mark.parametrize(("old", "new"), _rows())
def test_old_module_is_gone_and_new_names_import(old: str, new: str) -> None:
    old_modules = re.findall(r"`(gbx\.\w+)", old)
    new_modules = re.findall(r"`(gbx(?:_\w+)?\.\w+)`", new)
    names = re.findall(r"`(\w+)`", old)
    assert new_modules, new
    for module in new_modules:
        importlib.import_module(module)
    for module in old_modules:
        if module in new_modules:  # the row names what stays in the core
            continue
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(module)
    # A row of single names (the memory check) names where each of them now lives.
    if len(new_modules) == 1 and names:
        mod = importlib.import_module(new_modules[0])
        for name in names:
            assert hasattr(mod, name), f"{new_modules[0]} has no {name}"
