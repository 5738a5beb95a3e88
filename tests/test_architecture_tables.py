"""docs/architecture.md's module tables name exactly the modules of the core and the toolkit."""

from __future__ import annotations

import re
from pathlib import Path

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


def test_core_table_matches_core_src() -> None:
    documented = _table_modules("Modules of the core", "gbx")
    present = _present_modules(REPO / "core" / "src" / "gbx", "gbx")
    assert documented == present, (f"in the table, not in core/src/gbx: "
                                   f"{sorted(documented - present)}; in core/src/gbx, not in "
                                   f"the table: {sorted(present - documented)}")


def test_toolkit_table_matches_toolkit_src() -> None:
    documented = _table_modules("Modules of the toolkit", "gbx_toolkit")
    present = _present_modules(REPO / "toolkit" / "src" / "gbx_toolkit", "gbx_toolkit")
    assert documented == present, (f"in the table, not in toolkit/src/gbx_toolkit: "
                                   f"{sorted(documented - present)}; in toolkit/src/gbx_toolkit, "
                                   f"not in the table: {sorted(present - documented)}")
