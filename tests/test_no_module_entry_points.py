"""Every tool is a ``gbx`` subcommand: no module of a source tree runs as ``python -m`` itself.

``gbx/__main__.py`` (``python -m gbx``, the same command) is the only one.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ONLY = REPO / "core" / "src" / "gbx" / "__main__.py"
MAIN_BLOCK = re.compile(r"^\s*if\s+__name__\s*==\s*['\"]__main__['\"]", re.MULTILINE)


def test_only_gbx_main_has_a_main_block() -> None:
    trees = [REPO / "core" / "src", REPO / "toolkit" / "src", *sorted(REPO.glob("plugins/*/src"))]
    files = [p for tree in trees for p in sorted(tree.rglob("*.py"))]
    with_block = [p for p in files if MAIN_BLOCK.search(p.read_text(encoding="utf-8"))]
    assert with_block == [ONLY], [str(p.relative_to(REPO)) for p in with_block]
