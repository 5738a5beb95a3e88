"""The worker process: a slice of the batch, one PyBoy per env, stepped on command.

A worker owns envs ``lo..hi`` of the batch. It reads their button masks and reset
flags from shared memory, and writes their screens (shade indices, full 144x160)
into the shared framebuffer; the parent only sends ``("step", frames, release, render)``
and waits for ``("ok",)``. This module imports numpy and PyBoy only, so a spawned
worker starts quickly.
"""

from __future__ import annotations

import io
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from gbx_env_pyboy.shades import screen_to_shades

SCREEN = (144, 160)


@dataclass(frozen=True)
class WorkerSpec:
    rom: str
    start_state: bytes
    lo: int
    hi: int
    num_envs: int
    fb_name: str
    buttons_name: str
    reset_name: str
    # button mask (0..255) -> PyBoy button names, built from the action codec's bit table
    names_by_mask: tuple[tuple[str, ...], ...]


def _attach(name: str) -> SharedMemory:
    """Map a block the parent created.

    The parent owns (and unlinks) the blocks. Python 3.11 registers every attached
    block with the resource tracker, which would unlink it when this worker exits;
    registration is skipped for the attach.
    """
    from multiprocessing import resource_tracker

    register = resource_tracker.register
    resource_tracker.register = lambda *_a, **_k: None  # type: ignore[assignment]
    try:
        return SharedMemory(name=name, create=False)
    finally:
        resource_tracker.register = register  # type: ignore[assignment]


def step_one(emu: object, names: tuple[str, ...], frames: int, release: int,
             render: bool = True) -> None:
    """One env step on one PyBoy: hold ``names`` for ``release`` frames, run to ``frames``.

    Only the last frame is rendered (when ``render``), as on the Warp backend.
    """
    for n in names:
        emu.button_press(n)  # type: ignore[attr-defined]
    if release >= frames:
        emu.tick(frames, render)  # type: ignore[attr-defined]
        for n in names:
            emu.button_release(n)  # type: ignore[attr-defined]
        return
    if release > 0:
        emu.tick(release, False)  # type: ignore[attr-defined]
    for n in names:
        emu.button_release(n)  # type: ignore[attr-defined]
    emu.tick(frames - release, render)  # type: ignore[attr-defined]


def run(conn: Connection, spec: WorkerSpec) -> None:
    """Worker main loop (the process target)."""
    from pyboy import PyBoy

    blocks = [_attach(spec.fb_name), _attach(spec.buttons_name), _attach(spec.reset_name)]
    try:
        n = spec.num_envs
        fb = np.ndarray((n, *SCREEN), dtype=np.uint8, buffer=blocks[0].buf)[spec.lo:spec.hi]
        buttons = np.ndarray((n,), dtype=np.int32, buffer=blocks[1].buf)[spec.lo:spec.hi]
        reset = np.ndarray((n,), dtype=np.uint8, buffer=blocks[2].buf)[spec.lo:spec.hi]
        emus = []
        for _ in range(spec.hi - spec.lo):
            emu = PyBoy(spec.rom, window="null", sound_emulated=False)
            emu.set_emulation_speed(0)
            emus.append(emu)
        conn.send(("ready",))
        while True:
            msg = conn.recv()
            if msg[0] == "close":
                break
            try:
                _, frames, release, render = msg
                for i, emu in enumerate(emus):
                    if reset[i]:
                        emu.load_state(io.BytesIO(spec.start_state))
                        reset[i] = 0
                    step_one(emu, spec.names_by_mask[int(buttons[i]) & 0xFF], frames, release,
                             render)
                    screen_to_shades(emu.screen.ndarray, fb[i])
                conn.send(("ok",))
            except Exception:  # the parent raises it with the worker's traceback
                conn.send(("error", traceback.format_exc()))
        for emu in emus:
            emu.stop(save=False)
        del fb, buttons, reset
    finally:
        for b in blocks:
            b.close()
