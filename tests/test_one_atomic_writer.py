"""Every source tree writes files atomically through ``gbx.config.atomic_file`` only."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HELPER = REPO / "core" / "src" / "gbx" / "config.py"
RENAME = re.compile(r"\bos\.replace\(|\.rename\(|\bmkstemp\(")
# Files that may match, and why.
ALLOWED = {
    # A scratch copy of the cartridge for PyBoy to open, deleted afterwards: not a result file.
    REPO / "plugins" / "env_gameboy" / "src" / "gbx_gameboy" / "pyboy_state.py",
}


def _source_files() -> list[Path]:
    trees = [REPO / "core" / "src", REPO / "toolkit" / "src", *sorted(REPO.glob("plugins/*/src"))]
    return [p for tree in trees for p in sorted(tree.rglob("*.py"))]


def test_only_the_core_helper_renames_temporary_files() -> None:
    files = _source_files()
    assert HELPER in files
    offenders = [f"{p.relative_to(REPO)}:{n}" for p in files if p != HELPER and p not in ALLOWED
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if RENAME.search(line.split("#")[0]) and "``" not in line]
    assert not offenders, f"use gbx.config.write_atomic / atomic_file instead: {offenders}"
    assert RENAME.search(HELPER.read_text(encoding="utf-8"))
