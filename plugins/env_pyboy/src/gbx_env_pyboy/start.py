"""The PyBoy start state of an env: the same snapshot the Warp backend starts from.

The Warp env builds its start snapshot on a one-env batch: load ``env.state`` (a gbx
or PyBoy savestate; power-on when empty) and, unless the state holds a rendered
frame, run one rendered frame. Here the very same steps run once on the Warp CPU
emulator, and :func:`gbx_gameboy.pyboy_state.save_pyboy_state` turns that snapshot
into a PyBoy ``.state``; the start screen comes from the same batch. Both are cached
under ``$GBX_CACHE_DIR/pyboy-start`` (default ``~/.cache/gbx``), so only the first env
build pays for it. The cache key (:func:`cache_key`) is the bytes the start depends on,
the ROM and the savestate, and the versions ``gbx_gameboy`` declares for what it makes
of them: the PyBoy state format and conversion, and its savestate format.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import attrs
import numpy as np

from gbx.config import write_atomic

FORMAT = 1  # bump when the way start states are made changes


@attrs.frozen
class StartState:
    """A PyBoy savestate and the screen (shades ``uint8 [144, 160]``) it shows."""

    pyboy_state: bytes
    screen: np.ndarray
    sha256: str


def cache_dir() -> Path:
    root = os.environ.get("GBX_CACHE_DIR") or Path.home() / ".cache" / "gbx"
    return Path(root) / "pyboy-start"


def converter_versions() -> dict[str, int]:
    """The versions ``gbx_gameboy`` declares for the start states it converts."""
    from gbx_gameboy import pyboy_state, savestate

    return {"pyboy_state": pyboy_state.PYBOY_STATE_VERSION,
            "conversion": pyboy_state.CONVERSION_VERSION,
            "savestate": savestate.FORMAT_VERSION}


def cache_key(rom: bytes, state: bytes | None, versions: dict[str, int]) -> str:
    """The cache key of the start state made from ``rom`` and ``state`` (None: power-on)
    by a converter of ``versions`` (a pure function of its arguments)."""
    tag = json.dumps({"format": FORMAT, **versions}, sort_keys=True)
    h = hashlib.sha256(f"gbx-pyboy-start/{tag}".encode())
    h.update(hashlib.sha256(rom).digest())
    h.update(hashlib.sha256(state).digest() if state is not None else b"-")
    return h.hexdigest()


def _digest(rom: Path, state: str) -> str:
    data = Path(state).expanduser().read_bytes() if state else None
    return cache_key(rom.read_bytes(), data, converter_versions())


def build(rom: Path, state: str) -> StartState:
    """Make the start state on the Warp CPU emulator (no cache)."""
    from gbx_gameboy import pyboy_state
    from gbx_gameboy.capture import new_batch

    batch = new_batch(rom, state or None, "cpu")
    data = pyboy_state.save_pyboy_state(batch, 0)
    screen = batch.fb[0].cpu().numpy().astype(np.uint8).copy()
    return StartState(data, screen, hashlib.sha256(data).hexdigest())


def load_or_build(rom: Path, state: str) -> StartState:
    """The cached start state for ``(rom, state)``, built on the first call."""
    key = _digest(rom, state)
    folder = cache_dir()
    state_path, screen_path = folder / f"{key}.state", folder / f"{key}.npy"
    if state_path.is_file() and screen_path.is_file():
        data = state_path.read_bytes()
        screen = np.load(screen_path)
        return StartState(data, screen, hashlib.sha256(data).hexdigest())
    start = build(rom, state)
    buf = io.BytesIO()
    np.save(buf, start.screen)
    write_atomic(screen_path, buf.getvalue())
    write_atomic(state_path, start.pyboy_state)
    write_atomic(folder / f"{key}.json", json.dumps(
        {"rom": str(rom), "state": state, "format": FORMAT, **converter_versions()}).encode())
    return start
