"""One-input fuzz targets for the Game Boy env's untrusted inputs.

Each target is ``target(rng, workdir) -> None``: it builds one input from ``rng`` (a
mutation of a valid ROM or savestate), writes it under ``workdir``, and feeds it to the
entry point a user reaches (``parse_cartridge`` on a path; ``load_start_state``, the
loader behind ``env.state``). An accepted input is then run for a few frames on the CPU.

* returns normally: the input was accepted (and ran) or parsed;
* raises :class:`gbx.errors.GbxError`: a clean, one-line refusal;
* raises anything else: a bug.

``TARGETS`` names them for the tests and any campaign that drives them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import torch

from gbx_gameboy import layout as L
from gbx_gameboy.cartridge import Cartridge, header_checksum, parse_cartridge

FRAMES = 2  # frames an accepted input runs
# Cartridge types the state targets use: no MBC, MBC1, MBC2, MBC3 with RTC, MBC5 (with RAM).
STATE_CART_TYPES = (0x00, 0x03, 0x06, 0x10, 0x1B)
# Values at the edges of the ranges the loaders must handle.
_EDGES = (0, 1, -1, 2, 3, 4, 143, 144, 153, 154, 255, 256, 0xFFFF, 0x10000, L.NEVER,
          L.NEVER + 1, 2**31 - 1, -(2**31), 2**29, -(2**29) - 1, L.CYCLES_PER_FRAME)


def _base_rom() -> bytes:
    from gbx_gameboy.env import DEFAULT_ROM

    return DEFAULT_ROM.read_bytes()


def _with_header(rom: bytes, cart_type: int, ram_code: int) -> bytes:
    """``rom`` with a new cartridge type and RAM size and a matching header checksum."""
    b = bytearray(rom)
    b[0x147], b[0x149] = cart_type, ram_code
    b[0x14D] = header_checksum(bytes(b))
    return bytes(b)


@cache
def _cart(cart_type: int) -> Cartridge:
    ram_code = 0 if cart_type == 0x00 else 3
    return parse_cartridge(_with_header(_base_rom(), cart_type, ram_code))


@cache
def _batch(cart_type: int) -> Any:
    """One 1-env CPU batch per cartridge, reused by every input (state loads overwrite it)."""
    from gbx_gameboy.machine import GameBoyBatch

    return GameBoyBatch(_cart(cart_type), 1, "cpu")


@cache
def _valid_state(cart_type: int, frames: int) -> dict[str, torch.Tensor]:
    """A state the emulator itself reached after ``frames`` frames (host tensors)."""
    from gbx_gameboy.snapshot import capture

    batch = _batch(cart_type)
    batch.reset()
    batch.run_frames(frames, render_last=True)
    return {k: v.cpu() for k, v in capture(batch.state_tensors(), 0).items()}


def _edge_or_random(rng: random.Random, bits: int, signed: bool) -> int:
    if rng.random() < 0.5:
        v = rng.choice(_EDGES)
    else:
        v = rng.getrandbits(bits)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not signed:
        v &= hi
    return max(lo, min(hi, v))


def _run(batch: Any) -> None:
    batch.run_frames(FRAMES, render_last=True)
    batch.synchronize()
    ly = int(batch.read_memory(0, 0xFF44))
    if ly > 153:
        raise AssertionError(f"LY {ly} after running a loaded state")


# ----------------------------------------------------------------------------- ROM header
def rom_header(rng: random.Random, workdir: Path) -> None:
    """A ROM image with mutated header flags (type, sizes, checksum) or size, parsed from a
    file; an accepted one runs a few frames."""
    b = bytearray(_base_rom())
    if rng.random() < 0.8:
        from gbx_gameboy.cartridge import CART_TYPES

        b[0x147] = rng.choice(sorted(CART_TYPES)) if rng.random() < 0.8 else rng.randrange(256)
    if rng.random() < 0.6:
        b[0x149] = rng.randrange(7)
    if rng.random() < 0.3:
        code = rng.randrange(10)
        b[0x148] = code
        if code <= 3 and rng.random() < 0.7:  # a file of the declared size
            b = b + bytes(b[0x4000:0x8000]) * (((0x8000 << code) - len(b)) // 0x4000)
    for _ in range(rng.randrange(3)):
        b[rng.randrange(0x100, 0x150)] = rng.randrange(256)
    if rng.random() < 0.85:
        b[0x14D] = header_checksum(bytes(b))
    if rng.random() < 0.05:
        b = b[: rng.randrange(len(b))]
    path = workdir / "fuzz.gb"
    path.write_bytes(bytes(b))
    cart = parse_cartridge(path)
    if len(cart.data) <= 0x20000:  # large images parse; running them adds nothing
        from gbx_gameboy.machine import GameBoyBatch

        _run(GameBoyBatch(cart, 1, "cpu"))


# ----------------------------------------------------------------------------- gbx state
def _mutate_arrays(rng: random.Random, arrays: dict[str, torch.Tensor]) -> None:
    st, mem, tm = arrays["st"], arrays["mem"], arrays["tm"]
    for _ in range(rng.randrange(1, 8)):
        st[rng.randrange(L.ST_COUNT)] = _edge_or_random(rng, 32, signed=True)
    for _ in range(rng.randrange(4)):
        reg = rng.choice((L.LY, L.LCDC, L.STAT, L.TAC, L.TIMA, L.SCX, L.WY, L.WX, L.DMA, L.IF))
        mem[L.IO_OFF + reg] = rng.randrange(256)
    if rng.random() < 0.3:
        tm[rng.randrange(L.TM_COUNT)] = _edge_or_random(rng, 64, signed=True)
    if rng.random() < 0.2:  # garbage memory
        n = mem.numel()
        mem.copy_(torch.randint(0, 256, (n,), dtype=torch.uint8,
                                generator=torch.Generator().manual_seed(rng.getrandbits(32))))


def _mutate_meta(rng: random.Random, meta: dict[str, Any]) -> None:
    choice = rng.randrange(6)
    if choice == 0:
        meta.pop(rng.choice(sorted(meta)))
    elif choice == 1:
        meta["rom"] = rng.choice(([], "x", {"title": 1}, None))
    elif choice == 2 and meta["arrays"]:
        a = rng.choice(meta["arrays"])
        a[rng.choice(("name", "dtype", "shape", "nbytes"))] = rng.choice(
            (-1, 0, "int8", [2**40], [-3], None, "st", 1e300, [1, 2, 3])
        )
    elif choice == 3:
        meta["arrays"] = rng.choice(({}, [1], [{"name": "st"}], "x"))


def gbxstate(rng: random.Random, workdir: Path) -> None:
    """A gbx savestate of a valid state with mutated fields, metadata or bytes (re-signed
    so it reaches the field checks), loaded into a batch that then runs a few frames."""
    from gbx_gameboy import savestate

    cart_type = rng.choice(STATE_CART_TYPES)
    arrays = {k: v.clone() for k, v in _valid_state(cart_type, rng.choice((0, 3, 20))).items()}
    _mutate_arrays(rng, arrays)
    data = savestate.encode(savestate.RomId.of(_cart(cart_type)), arrays)
    if rng.random() < 0.2:
        n = int.from_bytes(data[12:16], "little")
        meta = json.loads(data[16:16 + n])
        _mutate_meta(rng, meta)
        raw = json.dumps(meta).encode()
        body = data[:12] + len(raw).to_bytes(4, "little") + raw + data[16 + n:-32]
        data = body + hashlib.sha256(body).digest()
    if rng.random() < 0.05:
        i = rng.randrange(len(data))
        data = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    _load_and_run(rng, data, workdir / "fuzz.gbxstate", cart_type)


def _load_and_run(rng: random.Random, data: bytes, path: Path, cart_type: int) -> None:
    """Cut the file short now and then, write it, load it as ``env.state`` is loaded, and
    run the batch a few frames."""
    from gbx_gameboy.env import load_start_state

    if rng.random() < 0.05:
        data = data[: rng.randrange(len(data))]
    path.write_bytes(data)
    batch = _batch(cart_type)
    load_start_state(batch, path)
    _run(batch)


# ----------------------------------------------------------------------------- PyBoy state
def pyboy_state(rng: random.Random, workdir: Path) -> None:
    """A PyBoy-format state written by gbx with mutated fields (any value of the field's
    width) or bytes, loaded into a batch that then runs a few frames."""
    from gbx_gameboy import pyboy_state as ps

    cart_type = rng.choice(STATE_CART_TYPES)
    cart = _cart(cart_type)
    state = _valid_state(cart_type, rng.choice((0, 3, 20)))
    fields = ps.from_gbx(state, cart, ps.blank_fields(cart))
    layout = ps.field_layout(cart, len(ps.encode(fields, cart)))
    for _ in range(rng.randrange(1, 10)):
        name, kind = rng.choice(layout)
        if isinstance(kind, str):
            fields[name] = _edge_or_random(rng, 8 * ps.INT_BYTES[kind], signed=False)
        else:
            fields[name] = rng.randbytes(len(fields[name]))
    fields["version"] = ps.PYBOY_STATE_VERSION if rng.random() < 0.95 else fields["version"]
    fields["bootrom_enabled"] = 0 if rng.random() < 0.95 else 1
    fields["cgb"] = fields["lcd_cgb"] = 0 if rng.random() < 0.95 else 1
    data = ps.encode(fields, cart)
    _load_and_run(rng, data, workdir / "fuzz.state", cart_type)


Target = Callable[[random.Random, Path], None]
TARGETS: tuple[tuple[str, Target], ...] = (
    ("rom-header", rom_header),
    ("gbxstate", gbxstate),
    ("pyboy-state", pyboy_state),
)
