"""Plugin loading through real entry points, seen from the `gbx` command.

Fake distributions are plain ``*.dist-info`` folders put on ``PYTHONPATH``, so
importlib.metadata finds their entry points exactly as for installed ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def fake_dist(root: Path, dist: str, entry: str, target: str, module_code: str | None) -> None:
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[gbx]\n{entry} = {target}\n")
    if module_code is not None:
        (root / f"{target}.py").write_text(module_code)


def gbx(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GBX_")}
    environ["PYTHONPATH"] = str(root)
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "gbx", *args], capture_output=True, text=True,
                          env=environ, timeout=120)


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    fake_dist(tmp_path, "gbx-broken", "broken", "gbx_broken_mod",
              "import a_module_that_does_not_exist\n")
    return tmp_path


def test_broken_plugin_is_one_warning_and_help_still_works(broken_site: Path) -> None:
    out = gbx(broken_site, "--help")
    assert out.returncode == 0 and "run" in out.stdout
    warnings = [line for line in out.stderr.splitlines() if "broken" in line]
    assert len(warnings) == 1
    assert "gbx-broken" in warnings[0] and "a_module_that_does_not_exist" in warnings[0]


def test_strict_mode_exits_2_naming_the_plugin(broken_site: Path) -> None:
    out = gbx(broken_site, "--help", GBX_STRICT_PLUGINS="1")
    assert out.returncode == 2
    assert out.stderr.startswith("gbx: error: plugin 'broken' from gbx-broken failed to load")


def test_gbx_plugins_filter_skips_the_broken_one(broken_site: Path) -> None:
    out = gbx(broken_site, "plugins", "--json", GBX_PLUGINS="", GBX_STRICT_PLUGINS="1")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert "broken" not in {p["name"] for p in data["plugins"] + data["failures"]}
    assert {"name": "broken", "why": "gbx-broken, left out by GBX_PLUGINS"} in data["left_out"]


def test_a_name_two_distributions_register_fails_only_where_it_is_needed(
        tmp_path: Path) -> None:
    code = (
        "from gbx import hookimpl\n"
        "from gbx.toy import ToyConfig, make_toy_env\n"
        "@hookimpl\n"
        "def register_envs(register):\n"
        "    register('grid', make_toy_env, ToyConfig)\n"
    )
    fake_dist(tmp_path, "gbx-grid-one", "grid_one", "gbx_grid_one", code)
    fake_dist(tmp_path, "gbx-grid-two", "grid_two", "gbx_grid_two", code)
    listing = gbx(tmp_path, "plugins", GBX_PLUGINS="grid_one,grid_two")
    assert listing.returncode == 0, listing.stderr
    assert "env 'grid' is registered twice" in listing.stdout
    assert "gbx-grid-one" in listing.stdout and "gbx-grid-two" in listing.stdout
    run = gbx(tmp_path, "run", "--algo", "counter", "--env", "grid",
              GBX_PLUGINS="grid_one,grid_two")
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("gbx: error:")]
    assert run.returncode == 2 and len(errors) == 1 and "Traceback" not in run.stderr
    assert "'grid' is registered twice" in errors[0] and "gbx-grid-two" in errors[0]
    other = gbx(tmp_path, "config", "--env", "toy", "--algo", "ppo",
                GBX_PLUGINS="grid_one,grid_two,ppo")
    assert other.returncode == 0 and "[run]" in other.stdout, other.stderr


def test_a_second_ppo_and_a_raising_hook_leave_the_rest_working(tmp_path: Path) -> None:
    fake_dist(tmp_path, "gbx-ppo-fork", "ppo_fork", "gbx_ppo_fork", (
        "from gbx import hookimpl\n"
        "from gbx.toy import ToyConfig\n"
        "@hookimpl\n"
        "def register_algorithms(register):\n"
        "    register('ppo', object, ToyConfig)\n"))
    fake_dist(tmp_path, "gbx-raiser", "raiser", "gbx_raiser", (
        "from gbx import hookimpl\n"
        "@hookimpl\n"
        "def register_observers(register):\n"
        "    raise RuntimeError('observer setup exploded')\n"))
    listing = gbx(tmp_path, "plugins", "--json")
    assert listing.returncode == 0, listing.stderr
    assert "observer setup exploded" in listing.stdout and "gbx-ppo-fork" in listing.stdout
    warnings = [ln for ln in listing.stderr.splitlines() if "raiser" in ln]
    assert len(warnings) == 1 and "gbx-raiser" in warnings[0]
    run = gbx(tmp_path, "run", "--algo", "ppo", "--env", "toy", "--device", "cpu")
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("gbx: error:")]
    assert run.returncode == 2 and len(errors) == 1
    assert "algorithm 'ppo' is registered twice" in errors[0] and "gbx-algo-ppo" in errors[0]
    assert "gbx-ppo-fork" in errors[0]
