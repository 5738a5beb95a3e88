"""docs/plugin-authoring.md's import table for code written against the older core layout:
every new import exists, every old module is gone from the core."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugin-authoring.md"


def _rows() -> list[tuple[str, str]]:
    section = DOC.read_text(encoding="utf-8").split("## 7. The shared RL toolkit", 1)[1]
    section = section.split("\n## ", 1)[0]  # that section's table only
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


def test_the_schedule_section_names_what_exists() -> None:
    """Section 8's table: the record schema is the core's, saved runs load through it."""
    section = DOC.read_text(encoding="utf-8").split("## 8. ", 1)[1]
    assert "`gbx.records`" in section and "`gbx.saved.load_trainer(" in section
    from gbx.records import Stamper
    from gbx.saved import load_trainer

    assert callable(load_trainer) and callable(Stamper)
    if importlib.util.find_spec("gbx_observers") is not None:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("gbx_observers.schema")
