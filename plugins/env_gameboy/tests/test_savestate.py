"""gbx savestate files: round trip, and clear refusals of bad files."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from gbx_gameboy.savestate import (
    RomId,
    SaveStateError,
    decode,
    encode,
    load_state,
    read_state,
    save_state,
)
from gbx_gameboy.snapshot import capture
from gbx_gameboy.tiles import tile_envs


@dataclass
class FakeCart:
    title: str = "GAME"
    header_checksum: int = 0x12
    global_checksum: int = 0x3456
    sha256: str = "ab" * 32


class FakeBatch:
    """Just what savestates use: named state tensors and the cartridge."""

    def __init__(self, n: int, seed: int, cart: FakeCart | None = None) -> None:
        g = torch.Generator().manual_seed(seed)
        self.cart = cart or FakeCart()
        self._state = {  # the batch's layout: tiled per-env arrays and env-first fb
            "mem": tile_envs(torch.randint(0, 256, (n, 300), generator=g, dtype=torch.uint8)),
            "st": tile_envs(
                torch.randint(-2**31, 2**31 - 1, (n, 45), generator=g, dtype=torch.int32)
            ),
            "tm": tile_envs(torch.randint(-2**62, 2**62, (n, 4), generator=g, dtype=torch.int64)),
            "fb": torch.randint(0, 4, (n, 6, 8), generator=g, dtype=torch.uint8),
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return self._state


def resign(data: bytes, edit: Callable[[dict[str, Any]], object]) -> bytes:
    """``data`` with its JSON metadata edited and a matching digest (a crafted file)."""
    n = int.from_bytes(data[12:16], "little")
    meta = json.loads(data[16:16 + n])
    edit(meta)
    raw = json.dumps(meta).encode()
    body = data[:12] + len(raw).to_bytes(4, "little") + raw + data[16 + n:-32]
    return body + hashlib.sha256(body).digest()


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_round_trip_into_one_env_and_all_envs(tmp_path: Path) -> None:
    from gbx_gameboy.env import DEFAULT_ROM
    from gbx_gameboy.machine import GameBoyBatch

    src = GameBoyBatch(DEFAULT_ROM, 3)
    src.run_frames(7, render_last=True)
    p = save_state(src, 2, tmp_path / "s.gbxstate")
    dst = GameBoyBatch(DEFAULT_ROM, 5)
    dst.run_frames(2)
    untouched = capture(dst.state_tensors(), 0)
    st = load_state(dst, p, env=4)
    # A state the emulator wrote is in range: loading it changes nothing (bit for bit).
    assert same(capture(dst.state_tensors(), 4), capture(src.state_tensors(), 2))
    assert same(capture(dst.state_tensors(), 0), untouched)
    assert len(st.sha256) == 64 and st.rom.title == src.cart.title
    load_state(dst, p)
    assert all(same(capture(dst.state_tensors(), e), st.arrays) for e in range(5))


def test_refusals_are_one_line(tmp_path: Path) -> None:
    src = FakeBatch(1, seed=0)
    data = encode(RomId.of(src.cart), capture(src.state_tensors(), 0))
    cases = {
        "truncated": data[:-100],
        "header cut off": data[:20],
        "checksum mismatch": data[:-50] + bytes([data[-50] ^ 1]) + data[-49:],
        "unreadable metadata": data[:17] + b"\xff" + data[18:],
        "not a gbx savestate": b"\x1d" + data[1:],
        "version": data[:8] + (7).to_bytes(4, "little") + data[12:],
        "invalid metadata": resign(data, lambda m: m.pop("rom")),
        "shape": resign(data, lambda m: m["arrays"][0].update(shape=[3])),
    }
    for expected, bad in cases.items():
        with pytest.raises(SaveStateError, match=expected) as e:
            decode(bad, "x.state")
        assert "\n" not in str(e.value)
    other = FakeBatch(1, seed=0, cart=FakeCart(title="OTHER", sha256="cd" * 32))
    p = tmp_path / "s.gbxstate"
    p.write_bytes(data)
    with pytest.raises(SaveStateError, match=r"made for ROM 'GAME'.*runs 'OTHER'"):
        load_state(other, p)
    with pytest.raises(SaveStateError, match="not found"):
        read_state(tmp_path / "missing.state")


def test_state_from_another_build_is_refused(tmp_path: Path) -> None:
    src = FakeBatch(1, seed=0)
    arrays = capture(src.state_tensors(), 0)
    arrays["st"] = arrays["st"][:40]
    p = tmp_path / "s.gbxstate"
    p.write_bytes(encode(RomId.of(src.cart), arrays))
    with pytest.raises(SaveStateError, match=r"does not fit.*'st'"):
        load_state(FakeBatch(2, seed=3), p)
