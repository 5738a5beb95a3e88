"""The checkpoint file format: safe types only, version and hash checked, old files refused."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from gbx import checkpoint_file as cf
from gbx.artifacts import write_checkpoint


def _payload(**state):
    return {"format": cf.FORMAT_VERSION, "step": 7, "run_id": "r", "config": {"run": {}},
            "state": state}


class _Touch:
    """Unpickling this touches a marker file: a stand-in for any code a pickle can run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def malicious_files(folder: Path, marker: Path) -> dict[str, Path]:
    """A bare pickle (earlier format) and the same pickle behind a valid format-2 header."""
    import hashlib

    buf = io.BytesIO()
    torch.save({"step": 1, "config": {}, "state": {"x": _Touch(marker)}}, buf)
    legacy = folder / "legacy.pt"
    legacy.write_bytes(buf.getvalue())
    body = buf.getvalue()
    wrapped = folder / "wrapped.pt"
    wrapped.write_bytes(cf._header(hashlib.sha256(body).hexdigest(), len(body)) + body)
    return {"legacy": legacy, "wrapped": wrapped}


def test_a_value_of_another_type_is_refused_at_write_with_its_key_path() -> None:
    with pytest.raises(cf.CheckpointError, match=r"checkpoint.state.opt.sched: a builtins.set"):
        cf.dumps(_payload(opt={"sched": {1, 2}}))


@pytest.mark.parametrize("offset", [0, 9, 40, cf.HEADER_SIZE + 3, -200, -1])
def test_a_flipped_byte_anywhere_is_an_error(offset: int) -> None:
    raw = bytearray(cf.dumps(_payload(w=torch.randn(64))))
    raw[offset] ^= 0x10
    with pytest.raises(cf.CheckpointError, match="^f.pt "):
        cf.loads(bytes(raw), "f.pt")


@pytest.mark.parametrize(("data", "message"), [
    (b"", "is empty"),
    (b"hello, world\n", "not a gbx checkpoint"),
    (b"GBXCKPT {", "truncated"),
    (b"PK\x03\x04" + b"\0" * 64, "gbx checkpoint migrate f.pt"),
])
def test_empty_foreign_and_old_files_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(cf.CheckpointError, match=message):
        cf.loads(data, "f.pt")


def test_truncated_and_other_version_files_are_refused() -> None:
    raw = cf.dumps(_payload(w=torch.randn(64)))
    with pytest.raises(cf.CheckpointError, match="truncated"):
        cf.loads(raw[: len(raw) // 2], "f.pt")
    other = raw.replace(b'"format": 2', b'"format": 9', 1)
    with pytest.raises(cf.CheckpointError, match="format 9"):
        cf.loads(other, "f.pt")


def test_a_malicious_pickle_runs_nothing_in_either_wrapping(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for kind, path in malicious_files(tmp_path, marker).items():
        with pytest.raises(cf.CheckpointError, match=str(path)):
            cf.read_file(path)
        assert not marker.exists(), kind
    # the test's pickle does run code when loaded the unsafe way (the test is not vacuous)
    torch.load(tmp_path / "legacy.pt", weights_only=False)
    assert marker.exists()


def test_migrate_asks_then_converts_an_old_file(invoke, tmp_path: Path) -> None:
    old = tmp_path / "old.pt"
    torch.save({"step": 3, "config": {"run": {}}, "state": {"w": np.ones(2)}}, old)
    refused = invoke("checkpoint", "migrate", str(old))  # no terminal: no confirmation
    assert refused.exit_code == 2 and "runs any code" in refused.output
    with pytest.raises(cf.CheckpointError, match="migrate"):
        cf.read_file(old)
    done = invoke("checkpoint", "migrate", str(old), "--yes")
    assert done.exit_code == 0, done.output
    assert torch.equal(cf.read_file(old)["state"]["w"], torch.ones(2, dtype=torch.float64))
    again = invoke("checkpoint", "migrate", str(old), "--yes")
    assert again.exit_code == 2 and "already in checkpoint format" in again.output


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_artifacts_follow_the_umask(tmp_path: Path, mask: int) -> None:
    previous = os.umask(mask)
    try:
        path = write_checkpoint(tmp_path, _payload(w=torch.zeros(2)))
    finally:
        os.umask(previous)
    for written in (path, path.parent / "latest"):
        assert stat.S_IMODE(written.stat().st_mode) == 0o666 & ~mask, written


def test_a_run_directory_follows_the_umask(invoke, tmp_path: Path) -> None:
    """Every file of a run (meta, config, checkpoints, logs of the observers) is 0666 & ~umask."""
    previous = os.umask(0o002)
    try:
        result = invoke("run", "--algo", "counter", "--env", "toy", "--device", "cpu", "--steps",
                        "64", "--run-dir", str(tmp_path / "r"), "--observer", "recorder")
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    files = [p for p in (tmp_path / "r").rglob("*") if p.is_file()]
    assert len(files) >= 4
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: 0o664
                                                                        for p in files}
