"""Installed distributions never reach into a source checkout.

Package files (the bundled ROM, the stages' files, fixtures) are found through
``importlib.resources``; a path built from a module's ``__file__`` or walked up with
``parents[...]`` would point into the checkout and break a wheel install. Every
data file inside a package folder is declared as package data, so the wheel carries it.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC_TREES = sorted([REPO / "core" / "src", REPO / "toolkit" / "src", *REPO.glob("plugins/*/src"),
                    *REPO.glob("examples/*/src")])
# `__file__` of any module, and any `parents[...]` or `.parent.parent` walk that starts
# from one (run folders are walked up from checkpoint paths, which is fine).
_FILE_WALK = re.compile(r"__file__|\.parents\s*\[")
_CHAIN = re.compile(r"\.parent\.parent")


def _offences(text: str) -> list[str]:
    bad = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if _FILE_WALK.search(code) or (_CHAIN.search(code) and "__file__" in code):
            bad.append(f"{number}: {line.strip()}")
    return bad


def test_the_checker_catches_file_walks() -> None:
    assert _offences("ROOT = Path(__file__).resolve().parents[4] / 'states'")
    assert _offences("GAME = Path(__file__).parent.parent / 'roms'")
    assert _offences("root = Path(gbx_gameboy.__file__).parent")
    assert not _offences("run_dir = ckpt_path.parent.parent")
    assert not _offences("# the docs mention __file__ here")


def test_no_source_tree_walks_into_the_checkout() -> None:
    assert len(SRC_TREES) >= 7, SRC_TREES
    found = {}
    for tree in SRC_TREES:
        for path in tree.rglob("*.py"):
            bad = _offences(path.read_text(encoding="utf-8"))
            if bad:
                found[str(path.relative_to(REPO))] = bad
    assert not found, f"use importlib.resources instead of __file__ paths: {found}"


def _distributions() -> list[Path]:
    return sorted(p.parent for p in [REPO / "core" / "pyproject.toml",
                                     REPO / "toolkit" / "pyproject.toml",
                                     *REPO.glob("plugins/*/pyproject.toml"),
                                     *REPO.glob("examples/*/pyproject.toml")])


@pytest.mark.parametrize("dist", _distributions(), ids=lambda p: p.name)
def test_every_data_file_in_a_package_is_declared_package_data(dist: Path) -> None:
    tool = tomllib.loads((dist / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = tool.get("package-data", {})
    missing = []
    for package in (p for p in (dist / "src").iterdir() if (p / "__init__.py").is_file()):
        globs = declared.get(package.name, [])
        for path in package.rglob("*"):
            if (not path.is_file() or path.suffix in {".py", ".pyc"}
                    or "__pycache__" in path.parts):
                continue
            rel = path.relative_to(package).as_posix()
            # setuptools globs match within one folder level per `*`, as fnmatch does here.
            if not any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/")
                       for g in globs):
                missing.append(rel)
    assert not missing, f"{dist.name}: add to [tool.setuptools.package-data]: {missing}"
