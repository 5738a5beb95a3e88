"""The one atomic-write helper: bytes or text, umask permissions, nothing partial left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gbx.config import TMP_SUFFIX, write_atomic


def test_bytes_and_text_land_whole(tmp_path: Path) -> None:
    assert write_atomic(tmp_path / "a" / "b.bin", b"\x00\xff").read_bytes() == b"\x00\xff"
    assert write_atomic(tmp_path / "t.txt", "grün\n").read_bytes() == "grün\n".encode()
    write_atomic(tmp_path / "t.txt", "new")
    assert (tmp_path / "t.txt").read_text() == "new"


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_the_file_follows_the_umask(tmp_path: Path, mask: int) -> None:
    previous = os.umask(mask)
    try:
        path = write_atomic(tmp_path / "f", b"x")
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = write_atomic(tmp_path / "keep", b"old")
    with pytest.raises(TypeError):
        write_atomic(path, 3)  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert not list(tmp_path.glob(f"*{TMP_SUFFIX}"))
