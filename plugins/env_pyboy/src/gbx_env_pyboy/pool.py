"""A batch of PyBoy emulators in worker processes, shaped like the Warp batch.

:class:`PyBoyPool` offers what the ``gameboy`` env uses of its emulator batch:
``step_frames(buttons, frames, release, render_last)`` and ``fb`` (shades
``uint8 [N, 144, 160]`` of the last step), plus ``restore(mask, index)`` (the
env's masked restore to the start snapshot). Envs are split into contiguous
slices, one per worker; buttons, reset flags and screens live in shared memory,
so a step is one small message per worker each way.

A restore does not touch PyBoy at once: it flags the envs (the worker loads the
start state before their next step) and puts the start screen into ``fb``,
which is exactly what PyBoy would show after loading it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import weakref
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gbx_env_pyboy.start import StartState
from gbx_env_pyboy.worker import SCREEN, WorkerSpec, run

PYBOY_BUTTON = {"RIGHT": "right", "LEFT": "left", "UP": "up", "DOWN": "down", "A": "a",
                "B": "b", "SELECT": "select", "START": "start"}


def names_by_mask(bits: dict[str, int]) -> tuple[tuple[str, ...], ...]:
    """For every button byte 0..255: the PyBoy names of the buttons it presses."""
    return tuple(
        tuple(PYBOY_BUTTON[b] for b, bit in bits.items() if bit and mask & bit)
        for mask in range(256)
    )


def split(num_envs: int, workers: int) -> list[tuple[int, int]]:
    """Contiguous ``[lo, hi)`` slices of ``num_envs`` over ``workers`` (sizes differ by <= 1)."""
    workers = max(1, min(workers, num_envs))
    base, extra = divmod(num_envs, workers)
    out, lo = [], 0
    for w in range(workers):
        hi = lo + base + (1 if w < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def start_method() -> str:
    """``fork`` where it exists: workers run only numpy and PyBoy (never torch or CUDA),
    and a forked worker neither re-imports the user's main script nor pays for a fresh
    interpreter. ``GBX_PYBOY_START_METHOD`` picks another one."""
    wanted = os.environ.get("GBX_PYBOY_START_METHOD")
    if wanted:
        return wanted
    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def default_workers(num_envs: int) -> int:
    return max(1, min(len(os.sched_getaffinity(0)), num_envs))


def _release(procs: list[Any], conns: list[Any], blocks: list[SharedMemory]) -> None:
    for c in conns:
        try:
            c.send(("close",))
        except (OSError, BrokenPipeError):
            pass
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.terminate()
            p.join(timeout=5)
    for b in blocks:
        try:
            b.close()
        except BufferError:  # a view is still alive; the unlink below frees the name anyway
            pass
        b.unlink()


class PyBoyPool:
    """``num_envs`` PyBoy emulators in ``workers`` processes."""

    def __init__(self, rom: Path, start: StartState, num_envs: int, workers: int,
                 device: torch.device, button_bits: dict[str, int]) -> None:
        self.num_envs = n = num_envs
        self.device = device
        self.slices = split(n, workers)
        self.workers = len(self.slices)
        self._blocks = [SharedMemory(create=True, size=n * SCREEN[0] * SCREEN[1]),
                        SharedMemory(create=True, size=n * 4),
                        SharedMemory(create=True, size=n)]
        fb_np = np.ndarray((n, *SCREEN), dtype=np.uint8, buffer=self._blocks[0].buf)
        self._buttons = np.ndarray((n,), dtype=np.int32, buffer=self._blocks[1].buf)
        self._reset = np.ndarray((n,), dtype=np.uint8, buffer=self._blocks[2].buf)
        self.host_fb = torch.from_numpy(fb_np)
        self.fb = self.host_fb if device.type == "cpu" else torch.empty(
            (n, *SCREEN), dtype=torch.uint8, device=device)
        self._start_fb = torch.from_numpy(start.screen).to(device)
        self._faulted = torch.zeros(n, dtype=torch.bool, device=device)
        self._reset[:] = 1
        self.fb.copy_(self._start_fb.expand_as(self.fb))
        table = names_by_mask(button_bits)
        ctx: Any = mp.get_context(start_method())
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        self._finalizer = weakref.finalize(self, _release, self._procs, self._conns,
                                           self._blocks)
        for lo, hi in self.slices:
            parent, child = ctx.Pipe()
            spec = WorkerSpec(str(rom), start.pyboy_state, lo, hi, n, self._blocks[0].name,
                              self._blocks[1].name, self._blocks[2].name, table)
            proc = ctx.Process(target=run, args=(child, spec), daemon=True,
                               name=f"gbx-pyboy-{lo}-{hi}")
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        self._gather("start")

    def _gather(self, what: str) -> None:
        errors = []
        for (lo, hi), conn in zip(self.slices, self._conns, strict=True):
            try:
                msg = conn.recv()
            except EOFError:
                msg = ("error", "the worker process exited")
            if msg[0] == "error":
                errors.append(f"envs {lo}..{hi - 1}: {msg[1]}")
        if errors:
            raise RuntimeError(f"PyBoy worker failed during {what}:\n" + "\n".join(errors))

    def step_frames(self, buttons: torch.Tensor, frames: int, release: int,
                    render_last: bool = True) -> None:
        """Every env: hold ``buttons`` (int32 masks) ``release`` frames, run ``frames``.

        ``render_last=False`` skips drawing the last frame (``fb`` then keeps the previous
        screen); only timing tools ask for that.
        """
        self._buttons[:] = buttons.cpu().numpy()
        for conn in self._conns:
            conn.send(("step", int(frames), int(release), bool(render_last)))
        self._gather("step")
        if self.fb is not self.host_fb:
            self.fb.copy_(self.host_fb)

    def faulted(self) -> torch.Tensor:
        """bool [N], all False: PyBoy has no fault lock (the Warp batch's counterpart)."""
        return self._faulted

    def restore(self, mask: torch.Tensor, index: int = 0) -> None:
        """Send the envs in ``mask`` back to the start state (``index`` must be 0)."""
        if index != 0:
            raise ValueError("the pyboy backend has one start state (index 0)")
        self._reset |= mask.cpu().numpy().astype(np.uint8)
        torch.where(mask.view(-1, 1, 1), self._start_fb, self.fb, out=self.fb)

    def close(self) -> None:
        self.fb = self.host_fb = None  # type: ignore[assignment]
        self._buttons = self._reset = None  # type: ignore[assignment]
        self._finalizer()
