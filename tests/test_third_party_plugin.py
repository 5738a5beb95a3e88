"""A third-party plugin installed into a fresh venv is found; uninstalled, it is named missing.

The venv sees this interpreter's site-packages through a ``.pth`` file, so
nothing is downloaded: pip only installs the two local packages (editable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str | Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=180)
    if check and out.returncode != 0:
        pytest.fail(f"{args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


@pytest.mark.slow
def test_example_plugin_installs_runs_and_uninstalls(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_gbx_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    # Only the example's entry point: the parent env's plugins are not importable here.
    env.update(GBX_PLUGINS="random", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")

    _run(py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "-e", REPO / "core", "-e", REPO / "examples" / "third_party_algo", env=env)

    listing = json.loads(_run(py, "-m", "gbx", "plugins", "--json", env=env).stdout)
    random = [p for p in listing["plugins"] if p["name"] == "random"]
    assert random and random[0]["distribution"] == "gbx-example-random"
    assert random[0]["provides"]["algorithms"] == ["random"]

    run_dir = tmp_path / "run"
    args = ["-m", "gbx", "run", "--algo", "random", "--env", "toy", "--device", "cpu",
            "--steps", "256", "--observer", "print", "--set", "algo.greedy_bias=0.5"]
    _run(py, *args, "--run-dir", run_dir, env=env)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["algo"]["greedy_bias"] == 0.5
    assert (run_dir / "checkpoints" / "latest").is_file()

    _run(py, "-m", "pip", "uninstall", "-y", "-q", "gbx-example-random", env=env)
    gone = _run(py, *args, "--run-dir", tmp_path / "run2", env=env, check=False)
    assert gone.returncode == 2
    errors = [line for line in gone.stderr.splitlines() if line.startswith("gbx: error:")]
    assert len(errors) == 1 and "algorithm 'random' is not installed" in errors[0]
