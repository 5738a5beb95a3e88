"""gbx savestates: one env's complete state in a small, checked file.

File layout (all integers little-endian)::

    magic      8 bytes   b"GBXSTATE"
    version    u32       FORMAT_VERSION
    meta_len   u32       length of the JSON metadata that follows
    meta       JSON      {"rom": {title, header_checksum, global_checksum, sha256},
                          "arrays": [{name, dtype, shape, nbytes}, ...], "created_by": ...}
    payload    bytes     the arrays, in the order listed, C order
    digest     32 bytes  SHA-256 of everything above

Loading checks, in order: magic, version, sizes (truncation), digest
(corruption), then that the state was made for the ROM the batch runs. Every
refusal is a :class:`SaveStateError` with a one-line message.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gbx.config import write_atomic
from gbx.errors import GbxError
from gbx_gameboy.apu import apu_power_on_rows
from gbx_gameboy.snapshot import EnvState, capture, check_compatible, write_env
from gbx_gameboy.state_bounds import sanitize

MAGIC = b"GBXSTATE"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sII")
_DIGEST_BYTES = 32
_DTYPES = {"uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64, "int16": torch.int16}


class SaveStateError(GbxError, ValueError):
    """A savestate that cannot be loaded (bad file, corrupt, or made for another ROM)."""


@dataclass(frozen=True)
class RomId:
    """What identifies the ROM a state belongs to."""

    title: str
    header_checksum: int
    global_checksum: int
    sha256: str

    @classmethod
    def of(cls, cart: Any) -> RomId:
        return cls(cart.title, int(cart.header_checksum), int(cart.global_checksum), cart.sha256)

    def describe(self) -> str:
        return f"{self.title!r} (sha256 {self.sha256[:12]}…)"


@dataclass(frozen=True)
class SaveState:
    rom: RomId
    arrays: EnvState  # host tensors, env axis removed
    sha256: str  # of the whole file


def encode(rom: RomId, arrays: Mapping[str, torch.Tensor]) -> bytes:
    """Serialise one env's arrays for ``rom`` (pure function)."""
    host = {k: v.detach().to("cpu").contiguous() for k, v in arrays.items()}
    meta: dict[str, Any] = {
        "rom": {
            "title": rom.title,
            "header_checksum": rom.header_checksum,
            "global_checksum": rom.global_checksum,
            "sha256": rom.sha256,
        },
        "arrays": [
            {
                "name": k,
                "dtype": str(v.dtype).removeprefix("torch."),
                "shape": list(v.shape),
                "nbytes": v.numel() * v.element_size(),
            }
            for k, v in host.items()
        ],
        "created_by": "gbx_gameboy",
    }
    for a in meta["arrays"]:
        if a["dtype"] not in _DTYPES:
            raise ValueError(f"state array {a['name']!r} has unsupported dtype {a['dtype']}")
    meta_bytes = json.dumps(meta, sort_keys=True).encode()
    body = bytearray(_PREFIX.pack(MAGIC, FORMAT_VERSION, len(meta_bytes)))
    body += meta_bytes
    for v in host.values():
        body += v.numpy().astype(v.numpy().dtype.newbyteorder("<"), copy=False).tobytes()
    return bytes(body + hashlib.sha256(body).digest())


def is_gbx_state(data: bytes) -> bool:
    return data[: len(MAGIC)] == MAGIC


def decode(data: bytes, source: str = "savestate") -> SaveState:
    """Parse and verify a gbx savestate; raise :class:`SaveStateError` on any problem."""
    if len(data) < _PREFIX.size or not is_gbx_state(data):
        raise SaveStateError(f"{source} is not a gbx savestate (missing the GBXSTATE header)")
    _, version, meta_len = _PREFIX.unpack_from(data)
    if version != FORMAT_VERSION:
        raise SaveStateError(
            f"{source} has savestate format version {version}; this gbx reads version "
            f"{FORMAT_VERSION} (save it again with a matching gbx)"
        )
    meta_end = _PREFIX.size + meta_len
    if len(data) < meta_end + _DIGEST_BYTES:
        raise SaveStateError(f"{source} is truncated ({len(data)} bytes, header cut off)")
    try:
        meta = json.loads(data[_PREFIX.size:meta_end])
        specs = meta["arrays"]
        payload = sum(int(a["nbytes"]) for a in specs)
        if min((int(a["nbytes"]) for a in specs), default=0) < 0:
            raise ValueError("negative array size")
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
        raise SaveStateError(f"{source} is corrupt (unreadable metadata: {exc!r})") from None
    want = meta_end + payload + _DIGEST_BYTES
    if len(data) != want:
        what = "truncated" if len(data) < want else "corrupt (trailing bytes)"
        raise SaveStateError(f"{source} is {what}: {len(data)} bytes, expected {want}")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.sha256(body).digest() != digest:
        raise SaveStateError(f"{source} is corrupt (checksum mismatch)")
    try:
        arrays = _arrays(data, specs, meta_end, source)
        r = meta["rom"]
        rom = RomId(
            str(r["title"]), int(r["header_checksum"]), int(r["global_checksum"]), str(r["sha256"])
        )
    except SaveStateError:
        raise
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        # Only a crafted file reaches here: its digest matched.
        raise SaveStateError(
            f"{source} has invalid metadata ({type(exc).__name__}: {exc}); "
            "save the state again with gbx"
        ) from None
    return SaveState(rom=rom, arrays=arrays, sha256=hashlib.sha256(data).hexdigest())


def _arrays(data: bytes, specs: Any, off: int, source: str) -> EnvState:
    """The payload arrays that ``specs`` (the metadata's list) describe, from byte ``off``."""
    arrays: EnvState = {}
    for a in specs:
        name, shape, n = str(a["name"]), [int(d) for d in a["shape"]], int(a["nbytes"])
        dtype = _DTYPES.get(a["dtype"])
        if dtype is None:
            raise SaveStateError(
                f"{source} holds array {name!r} of unknown dtype {a['dtype']}"
            )
        np_dtype = np.dtype(str(dtype).removeprefix("torch.")).newbyteorder("<")
        if min(shape, default=0) < 0 or n != int(np.prod(shape)) * np_dtype.itemsize:
            raise ValueError(f"array {name!r}: shape {shape} does not hold {n} bytes")
        arr = np.frombuffer(data, dtype=np_dtype, count=n // np_dtype.itemsize, offset=off)
        arrays[name] = torch.from_numpy(arr.astype(np_dtype.newbyteorder("="))).reshape(shape)
        off += n
    return arrays


def check_rom(state: SaveState, cart: Any, source: str = "savestate") -> None:
    """Refuse a state made for a different ROM than ``cart``."""
    mine = RomId.of(cart)
    if state.rom.sha256 != mine.sha256:
        raise SaveStateError(
            f"{source} was made for ROM {state.rom.describe()}, but this batch runs "
            f"{mine.describe()}; load it with the ROM it was made for"
        )


def read_state(path: str | Path) -> SaveState:
    path = Path(path)
    if not path.is_file():
        raise SaveStateError(f"savestate not found: {path}")
    return decode(path.read_bytes(), source=str(path))


def save_state(batch: Any, env: int, path: str | Path) -> Path:
    """Write env ``env`` of ``batch`` to ``path`` in the gbx format."""
    arrays = capture(batch.state_tensors(), env)
    return write_atomic(path, encode(RomId.of(batch.cart), arrays))


def load_into(
    batch: Any, state: SaveState, env: int | None = None, source: str = "savestate"
) -> None:
    """Copy a decoded state into env ``env`` (all envs when None): one device copy per array."""
    check_rom(state, batch.cart, source)
    tensors = batch.state_tensors()
    arrays = with_apu(state.arrays, tensors)
    try:
        check_compatible(tensors, arrays)
    except ValueError as exc:
        raise SaveStateError(f"{source} does not fit this emulator build: {exc}") from None
    # Clamped into the hardware's ranges: the file may have been crafted (state_bounds.py).
    write_env(tensors, env, sanitize(arrays, batch.cart))


def with_apu(arrays: EnvState, batch: Mapping[str, torch.Tensor]) -> EnvState:
    """States saved before the APU had state of its own lack ``apu``: such a state gets
    the power-on APU state (caught up at its first access), its registers as saved."""
    if "apu" in arrays or "apu" not in batch:
        return arrays
    rows = torch.from_numpy(apu_power_on_rows(post_boot=False))
    return {**arrays, "apu": rows}


def load_state(batch: Any, path: str | Path, env: int | None = None) -> SaveState:
    """Read a gbx savestate file and load it into ``batch``; return the decoded state."""
    state = read_state(path)
    load_into(batch, state, env, source=str(path))
    return state
