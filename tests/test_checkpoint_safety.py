"""Crafted and damaged checkpoints given to `gbx eval`, `gbx gif` and `gbx run --resume`.

A pickle that would touch a marker file when unpickled must run nothing; a damaged
file must give one line and exit 2. In-process CLI with the installed plugins.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("gbx_observers", reason="`gbx gif` comes with the observers plugin")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core" / "tests"))

from test_checkpoint_file import malicious_files  # noqa: E402

from gbx.cli import build_cli  # noqa: E402
from gbx.config import build_config, to_dict  # noqa: E402
from gbx.plugins import load_plugins  # noqa: E402


@pytest.fixture(scope="module")
def cli():
    return build_cli(load_plugins())


def _run_dir_with(tmp_path: Path, checkpoint: Path) -> Path:
    """A run directory whose only checkpoint is ``checkpoint`` (for --resume)."""
    host = load_plugins()
    config = build_config(host.registry, flags={"algo": "ppo", "env": "toy", "device": "cpu"})
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(to_dict(config)))
    target = run_dir / "checkpoints" / "ckpt_000000000064.pt"
    target.write_bytes(checkpoint.read_bytes())
    return run_dir


def _commands(path: Path, run_dir: Path, out: Path) -> dict[str, list[str]]:
    return {"eval": ["eval", "--checkpoint", str(path), "--episodes", "1"],
            "gif": ["gif", "--checkpoint", str(path), "--out", str(out), "--steps", "2"],
            "resume": ["run", "--resume", str(run_dir), "--device", "cpu"]}


def _one_line_exit_2(result, name: str) -> None:
    errors = [ln for ln in result.output.splitlines() if ln.startswith("gbx: error:")]
    assert result.exit_code == 2, result.output
    assert len(errors) == 1 and name in errors[0], result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("kind", ["legacy", "wrapped"])
def test_a_malicious_checkpoint_runs_nothing(cli, tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "marker"
    path = malicious_files(tmp_path, marker)[kind]
    run_dir = _run_dir_with(tmp_path, path)
    for name, args in _commands(path, run_dir, tmp_path / "gif").items():
        result = CliRunner().invoke(cli, args)
        target = "ckpt_000000000064.pt" if name == "resume" else path.name
        _one_line_exit_2(result, target)
        assert not marker.exists(), (name, kind)


@pytest.mark.parametrize("data", [b"", b"GBXCKPT {\"format\": 2", b"\x89PNG\r\n\x1a\n" * 8])
def test_empty_truncated_or_foreign_files_are_one_line_exit_2(cli, tmp_path: Path,
                                                              data: bytes) -> None:
    path = tmp_path / "bad.pt"
    path.write_bytes(data)
    run_dir = _run_dir_with(tmp_path, path)
    for name, args in _commands(path, run_dir, tmp_path / "gif").items():
        _one_line_exit_2(CliRunner().invoke(cli, args),
                         "ckpt_000000000064.pt" if name == "resume" else path.name)


def test_log_validate_of_a_non_utf8_log_is_one_line_exit_2(cli, tmp_path: Path) -> None:
    log = tmp_path / "train_log.jsonl"
    log.write_bytes(b'{"meta": {}}\n{"step": 1, "x": "\xff\xfe"}\n')
    result = CliRunner().invoke(cli, ["log", "validate", str(log)])
    _one_line_exit_2(result, "line 2 is not UTF-8")


def test_the_third_party_example_state_round_trips_through_the_safe_format() -> None:
    """The example plugin's trainer (examples/third_party_algo) checkpoints and restores."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "third_party_algo"
                           / "src"))
    from gbx.testing import InMemoryRunContext
    from gbx_example_random import RandomConfig, RandomTrainer

    ctx = InMemoryRunContext(RandomConfig(), stop_after_records=2, checkpoint_every=64)
    ctx.run(RandomTrainer(RandomConfig(), ctx))
    step, state = ctx.checkpoints[-1]  # serialised and read back by the checkpoint format
    again = RandomTrainer(RandomConfig(), InMemoryRunContext(RandomConfig()))
    again.load_state_dict(state)
    assert again.steps == step > 0 and again.state_dict()["rng"].equal(state["rng"])
