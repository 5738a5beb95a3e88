"""docs/architecture.md's module tables name exactly the modules of the core and the toolkit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"


def _table_modules(heading: str, package: str) -> set[str]:
    """Module names in the first column of the table under ``## heading``."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names.update(re.findall(rf"`({re.escape(package)}(?:\.\w+)?)`", first))
    return names


def _present_modules(src: Path, package: str) -> set[str]:
    names = {package}  # the package itself (its __init__)
    names.update(f"{package}.{p.stem}" for p in src.glob("*.py")
                 if p.stem not in {"__init__", "__main__"})
    return names


@pytest.mark.parametrize(("heading", "package", "src"), [
    ("Modules of the core", "gbx", "core/src/gbx"),
    ("Modules of the toolkit", "gbx_toolkit", "toolkit/src/gbx_toolkit"),
])
def test_module_table_matches_the_source(heading: str, package: str, src: str) -> None:
    documented = _table_modules(heading, package)
    present = _present_modules(REPO / src, package)
    assert documented == present, (f"in the table, not in {src}: "
                                   f"{sorted(documented - present)}; in {src}, not in the "
                                   f"table: {sorted(present - documented)}")
