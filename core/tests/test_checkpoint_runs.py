"""Checkpoints in a run: bounded count, partial files cleaned, damaged ones refused or skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from gbx_testplugins import EVENTS

from gbx import checkpoint_file
from gbx.artifacts import latest_checkpoint, list_checkpoints, load_checkpoint


@pytest.fixture(autouse=True)
def _clear_events():
    EVENTS.clear()
    yield
    EVENTS.clear()


def run_args(run_dir: Path, *extra: str) -> list[str]:
    return ["run", "--algo", "counter", "--env", "toy", "--device", "cpu", "--steps", "64",
            "--run-dir", str(run_dir), "--observer", "recorder", *extra]


def _damage(path: Path, how: str) -> None:
    raw = path.read_bytes()
    if how == "flip":
        path.write_bytes(raw[:-40] + bytes([raw[-40] ^ 1]) + raw[-39:])
    elif how == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.write_text("not a checkpoint\n")


def test_run_dir_holds_at_most_keep_checkpoints_plus_the_one_being_written(
        invoke, tmp_path, monkeypatch) -> None:
    run_dir = tmp_path / "r"
    folder = run_dir / "checkpoints"
    seen: list[int] = []
    save = checkpoint_file.torch.save

    def counting_save(obj, fh):  # called while the new file is being written
        seen.append(len([p for p in folder.iterdir() if p.name != "latest"]))
        return save(obj, fh)

    monkeypatch.setattr(checkpoint_file.torch, "save", counting_save)
    result = invoke(*run_args(run_dir, "--steps", "256", "--set", "run.keep_checkpoints=2"))
    assert result.exit_code == 0, result.output
    assert len(seen) == 8 and max(seen) == 3  # two kept + the temporary file
    assert [p.name for p in list_checkpoints(folder)] == ["ckpt_000000000256.pt",
                                                          "ckpt_000000000224.pt"]
    assert latest_checkpoint(run_dir).name == "ckpt_000000000256.pt"


def test_partial_files_of_a_killed_write_are_removed_on_start_and_resume(
        invoke, tmp_path) -> None:
    run_dir = tmp_path / "r"
    (run_dir / "checkpoints").mkdir(parents=True)
    stale = [run_dir / "checkpoints" / ".ckpt_000000000032.pt.abc123.tmp",
             run_dir / ".meta.json.x1.tmp"]
    for p in stale:
        p.write_bytes(b"partial")
    result = invoke(*run_args(run_dir))
    assert result.exit_code == 0, result.output
    assert not any(p.exists() for p in stale)
    leftover = run_dir / "checkpoints" / ".ckpt_000000000096.pt.zz.tmp"
    leftover.write_bytes(b"partial")
    resumed = invoke(*run_args(run_dir, "--steps", "96")[:-2], "--resume", str(run_dir))
    assert resumed.exit_code == 0, resumed.output
    assert not leftover.exists() and "removed" in resumed.output
    assert not list(run_dir.rglob("*.tmp"))


@pytest.mark.parametrize("how", ["flip", "truncate", "empty", "foreign"])
def test_resume_falls_back_to_the_previous_good_checkpoint(invoke, tmp_path, how) -> None:
    run_dir = tmp_path / "r"
    assert invoke(*run_args(run_dir)).exit_code == 0
    newest = latest_checkpoint(run_dir)
    _damage(newest, how)
    result = invoke("run", "--resume", str(run_dir), "--steps", "96")
    assert result.exit_code == 0, result.output
    assert f"{newest}" in result.output and "falling back" in result.output
    assert "ckpt_000000000032.pt" in result.output  # the one it resumed from
    assert load_checkpoint(run_dir)["state"]["steps"] == 96


@pytest.mark.parametrize("how", ["flip", "truncate", "empty", "foreign"])
def test_damaged_only_checkpoint_is_one_line_exit_2(invoke, tmp_path, how) -> None:
    run_dir = tmp_path / "r"
    assert invoke(*run_args(run_dir, "--steps", "32")).exit_code == 0
    ckpt = latest_checkpoint(run_dir)
    _damage(ckpt, how)
    for args in (["eval", "--checkpoint", str(ckpt)],
                 ["eval", "--checkpoint", str(run_dir)],
                 ["run", "--resume", str(run_dir)]):
        result = invoke(*args)
        lines = [ln for ln in result.output.splitlines() if ln.startswith("gbx: error:")]
        assert result.exit_code == 2, (args, result.output)
        assert len(lines) == 1 and str(ckpt) in lines[0] and "Traceback" not in result.output


def test_run_dir_that_is_a_file_or_uncreatable_is_one_line_exit_2(invoke, tmp_path) -> None:
    afile = tmp_path / "file"
    afile.write_text("x")
    result = invoke(*run_args(afile))
    assert result.exit_code == 2 and "is an existing file" in result.output
    under_file = afile / "sub"
    result = invoke(*run_args(under_file))
    assert result.exit_code == 2 and "cannot create run directory" in result.output


@pytest.mark.parametrize(("name", "data", "message"), [
    ("latin1.toml", b'[run]\ntag = "caf\xe9"\n', "is not UTF-8 text"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ("deep.toml", b"a = " + b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ("deeper.json", b'{"run": {"tag": ' + b"[" * 40 + b"]" * 40 + b"}}", "deeper than 16"),
])
def test_unreadable_config_files_are_one_line_exit_2(invoke, tmp_path, name, data,
                                                      message) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    for command in ("config", "run"):
        result = invoke(command, "--config", str(path))
        assert result.exit_code == 2 and message in result.output, result.output
        assert result.output.count("\n") == 1
