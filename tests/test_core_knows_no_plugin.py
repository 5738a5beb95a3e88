"""The core is the contract: it imports no plugin or toolkit package and names none of the
repository's other distributions or their folders (its errors get their hints from what the
installed plugins declare)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE_SRC = REPO / "core" / "src" / "gbx"


def _core_modules() -> list[Path]:
    return sorted(CORE_SRC.rglob("*.py"))


def _other_distributions() -> dict[str, str]:
    """Distribution name -> its folder, for every distribution of the repository but the core."""
    found = {}
    for pyproject in sorted([*REPO.glob("toolkit/pyproject.toml"),
                             *REPO.glob("plugins/*/pyproject.toml"),
                             *REPO.glob("examples/*/pyproject.toml")]):
        name = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"]
        found[name] = str(pyproject.parent.relative_to(REPO))
    return found


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return names


def test_the_scan_sees_the_core_and_the_other_distributions() -> None:
    assert len(_core_modules()) > 20
    dists = _other_distributions()
    assert {"gbx-toolkit", "gbx-algo-ppo", "gbx-observers"} <= set(dists)


def test_no_core_module_imports_a_plugin_or_toolkit_package() -> None:
    bad = {}
    for path in _core_modules():
        plugin_imports = sorted(m for m in _imported_modules(path)
                                if m.split(".")[0].startswith("gbx_"))
        if plugin_imports:
            bad[str(path.relative_to(REPO))] = plugin_imports
    assert not bad, f"the core imports plugin or toolkit packages: {bad}"


def _core_modules_naming(needles: set[str]) -> dict[str, list[str]]:
    """Core module -> the needles its text holds (modules holding none left out)."""
    found = {}
    for path in _core_modules():
        text = path.read_text(encoding="utf-8")
        hits = sorted(n for n in needles if n in text)
        if hits:
            found[str(path.relative_to(REPO))] = hits
    return found


def test_no_core_module_names_another_distribution_its_package_or_folder() -> None:
    dists = _other_distributions()
    found = _core_modules_naming({*dists, *dists.values(), "gbx_"})
    assert not found, f"the core names other distributions: {found}"


def test_no_core_module_names_a_plugin_observer_or_its_files() -> None:
    from gbx.plugins import load_plugins

    registry = load_plugins(environ={}).registry
    theirs = [s for s in registry.observers.values() if s.provider.distribution != "gbx-core"]
    if not theirs:
        pytest.skip("no observer plugin is installed")
    needles = {f'"{s.name}"' for s in theirs} | {p for s in theirs for p in s.outputs.values()}
    found = _core_modules_naming(needles)
    assert not found, f"the core names plugin observers or their files: {found}"
