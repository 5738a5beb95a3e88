"""The Makefile and the CI script behave as documented."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_setup_installs_core_the_toolkit_and_every_plugin_but_not_the_example() -> None:
    out = subprocess.run(["make", "-n", "-B", "setup"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    install = next(line for line in out.splitlines() if "install --no-build-isolation" in line)
    assert "-e core" in install and "-e toolkit" in install
    for pyproject in REPO.glob("plugins/*/pyproject.toml"):
        assert f"-e plugins/{pyproject.parent.name}" in install
    assert "examples" not in install


@pytest.mark.parametrize(("make_exit", "expected"), [(0, 0), (1, 2), (5, 2)])
def test_ci_script_fails_when_make_test_fails(tmp_path: Path, make_exit: int,
                                              expected: int) -> None:
    # The fake make records its targets: CI runs `make test`, the slow suite, the wheel installs.
    calls = tmp_path / "calls"
    fake = tmp_path / "make"
    fake.write_text(
        f"#!/bin/sh\necho \"$1\" >> {calls}\n"
        f"case \"$1\" in test) exit {make_exit};; test-slow|wheels-smoke) exit 0;; "
        "*) exit 99;; esac\n"
    )
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    rc = subprocess.run([str(REPO / ".ci" / "run")], env=env).returncode
    assert (rc != 0) == (expected != 0)
    ran = calls.read_text().split()
    assert ran == (["test", "test-slow", "wheels-smoke"] if make_exit == 0 else ["test"])
