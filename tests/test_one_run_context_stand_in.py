"""Tests stand in for the run loop with ``gbx.testing.InMemoryRunContext`` only: no test
module defines its own run context (a class with ``make_env`` or ``should_stop``)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN_CONTEXT_METHODS = {"make_env", "should_stop", "record_eval"}


def _test_files() -> list[Path]:
    trees = [REPO / "tests", REPO / "core" / "tests", *sorted(REPO.glob("plugins/*/tests")),
             *sorted(REPO.glob("examples/*/tests"))]
    return [p for tree in trees if tree.is_dir() for p in sorted(tree.rglob("*.py"))]


def _run_contexts(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            if methods & RUN_CONTEXT_METHODS:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    return found


def test_no_test_defines_its_own_run_context() -> None:
    files = _test_files()
    assert any(p.name == "test_seed_scheme.py" for p in files)
    offenders = [hit for p in files for hit in _run_contexts(p)]
    assert not offenders, f"use gbx.testing.InMemoryRunContext instead: {offenders}"


def test_the_stand_in_builds_envs_from_a_factory_and_lists_their_seeds() -> None:
    from gbx.testing import InMemoryRunContext
    from gbx.toy import ToyConfig, make_toy_env

    built: list[tuple[int, int]] = []

    def factory(num_envs: int, seed: int) -> object:
        built.append((num_envs, seed))
        return make_toy_env(ToyConfig(), num_envs, "cpu", seed)

    ctx = InMemoryRunContext(seed=5, env_factory=factory, run_id="r", stop_after_records=1)
    assert ctx.make_env(2, seed_offset=10).num_envs == 2
    assert built == [(2, 15)] and ctx.env_seeds == [15]
    assert InMemoryRunContext(seed=3).make_env(1).num_envs == 1  # the toy env by default
    assert not ctx.should_stop()
    ctx.record({"step": 1})
    assert ctx.should_stop() and ctx.run_id == "r" and ctx.trainer is None
