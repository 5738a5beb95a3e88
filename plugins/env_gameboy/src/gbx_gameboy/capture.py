"""Goal templates and start states: play a button script, keep the screen or the state.

A goal directory holds what a goal env compares the screen with:

* ``goal.npy``: uint8 ``[H, W]`` shade indices, the observation the env itself
  extracts (``obs.extract_obs``, 72x80 = 2x2 max of the 144x160 screen);
* ``meta.json``: where it came from (ROM sha256, source state and its sha256,
  the button script), the distance metric and the default ``tau`` and
  ``consec_k`` of the task;
* ``goal.png``: the template scaled up, for a person to check.

Button scripts come in two forms, both played from a state:

* ``presses``: ``"START@60,A@120"`` (:func:`gbx_gameboy.actions.parse_presses`):
  each button held ``hold`` frames starting at that frame number;
* ``steps``: one button per env step (``"DOWN*5,LEFT*3,DOWN"``, see
  :func:`parse_steps`), each step ``frames_per_step`` frames with the button
  held for the first ``hold`` of them, exactly as the envs step.

Presses run first, then steps, then ``settle`` frames without input.
"""

from __future__ import annotations

import hashlib
import json
import tokenize
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import numpy as np
import torch

from gbx.errors import GbxError
from gbx_gameboy.actions import BUTTON_BITS, parse_presses
from gbx_gameboy.look_alikes import LookAlike, nearest_look_alike

DISTANCE_METRIC = "mean |frame - goal| / 3 over shade indices (gbx.goal_math.goal_distance)"
GOAL_FILE = "goal.npy"
META_FILE = "meta.json"
PNG_FILE = "goal.png"
PNG_SCALE = 4
DEFAULT_TAU = 0.02
DEFAULT_CONSEC_K = 1
FAILURE_KIND = "failure"  # meta.json "kind" of a failure screen (capture-goal --failure)


class GoalError(GbxError, ValueError):
    """A goal directory or template that cannot be used."""


def parse_steps(spec: str) -> list[str]:
    """``"DOWN*5,LEFT*3,A"`` -> one button name per env step (``NOOP`` allowed)."""
    out: list[str] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        button, star, count = item.partition("*")
        button = button.strip().upper()
        if button not in BUTTON_BITS or (star and not count.strip().isdigit()):
            raise ValueError(
                f"bad step {item!r}: write BUTTON or BUTTON*COUNT, e.g. DOWN*5, with BUTTON one "
                f"of {', '.join(BUTTON_BITS)}"
            )
        out.extend([button] * (int(count) if star else 1))
    return out


@dataclass(frozen=True)
class Script:
    """A button script: frame presses, then per-step buttons, then idle frames."""

    presses: tuple[tuple[str, int], ...] = ()
    steps: tuple[str, ...] = ()
    frames_per_step: int = 24
    hold: int = 8
    settle: int = 0

    @classmethod
    def parse(
        cls, press: str = "", steps: str = "", *, frames_per_step: int = 24, hold: int = 8,
        settle: int = 0,
    ) -> Script:
        if not 1 <= hold <= frames_per_step:
            raise ValueError(f"hold must be in 1..frames_per_step ({frames_per_step}), got {hold}")
        if settle < 0:
            raise ValueError(f"settle must be >= 0 frames, got {settle}")
        return cls(tuple(parse_presses(press)), tuple(parse_steps(steps)), frames_per_step,
                   hold, settle)

    def describe(self) -> dict[str, Any]:
        return {
            "presses": ",".join(f"{b}@{f}" for b, f in self.presses),
            "steps": _compact_steps(self.steps),
            "frames_per_step": self.frames_per_step,
            "hold_frames": self.hold,
            "settle_frames": self.settle,
        }


def _compact_steps(steps: Sequence[str]) -> str:
    """Inverse of :func:`parse_steps` with runs folded: ``DOWN*5,LEFT*3,DOWN``."""
    out: list[str] = []
    i = 0
    while i < len(steps):
        j = i
        while j < len(steps) and steps[j] == steps[i]:
            j += 1
        out.append(steps[i] if j - i == 1 else f"{steps[i]}*{j - i}")
        i = j
    return ",".join(out)


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def new_batch(rom: str | Path, state: str | Path | None, device: str = "cpu") -> Any:
    """A one-env batch at ``state`` (power-on when None) with a rendered screen."""
    from gbx_gameboy.env import load_start_state
    from gbx_gameboy.machine import GameBoyBatch

    batch = GameBoyBatch(str(rom), 1, device)
    rendered = False
    if state:
        _, rendered = load_start_state(batch, state)
    if not rendered:
        batch.run_frames(1, render_last=True)
    return batch


def observe(batch: Any, obs_size: str = "72x80") -> np.ndarray:
    """Env 0's observation frame (what the env extracts), as numpy ``uint8 [H, W]``."""
    from gbx_gameboy.obs import extract_obs, obs_hw

    out = torch.empty((batch.num_envs, *obs_hw(obs_size)), dtype=torch.uint8,
                      device=batch.fb.device)
    return extract_obs(batch.fb, obs_size, out)[0].cpu().numpy().copy()


def play(
    batch: Any, script: Script, obs_size: str = "72x80", states: list[Any] | None = None,
) -> list[np.ndarray]:
    """Play ``script`` on every env of ``batch``; return env 0's observation after each step
    (presses and settling add one observation each at their end). With ``states``, env 0's
    state before each of the script's steps is appended to it (the places of the way,
    :func:`gbx_gameboy.look_alikes.nearest_look_alike`)."""
    from gbx_gameboy.snapshot import capture

    n = batch.num_envs
    dev = batch.fb.device
    frames: list[np.ndarray] = []
    t = 0
    for button, at in script.presses:
        if at > t:
            batch.run_frames(at - t, render_last=True)
            t = at
        bits = torch.full((n,), BUTTON_BITS[button], dtype=torch.int32, device=dev)
        batch.step_frames(bits, script.hold, script.hold, render_last=True)
        t += script.hold
        frames.append(observe(batch, obs_size))
    for button in script.steps:
        if states is not None:
            states.append(capture(batch.state_tensors(), 0))
        bits = torch.full((n,), BUTTON_BITS[button], dtype=torch.int32, device=dev)
        batch.step_frames(bits, script.frames_per_step, script.hold, render_last=True)
        frames.append(observe(batch, obs_size))
    if script.settle:
        batch.run_frames(script.settle, render_last=True)
        frames.append(observe(batch, obs_size))
    if not frames:
        frames.append(observe(batch, obs_size))
    return frames


def distances(frames: Sequence[np.ndarray], goal: np.ndarray) -> list[float]:
    """Goal distance of each frame, with the env's own metric."""
    from gbx.goal_math import goal_distance

    stack = torch.from_numpy(np.stack(frames))
    return [round(float(d), 6) for d in goal_distance(stack, torch.from_numpy(goal))]


# --------------------------------------------------------------------------- goal files
@dataclass(frozen=True)
class Goal:
    template: np.ndarray  # uint8 [H, W]
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def tau(self) -> float:
        return float(self.meta.get("tau", DEFAULT_TAU))

    @property
    def consec_k(self) -> int:
        return int(self.meta.get("consec_k", DEFAULT_CONSEC_K))


def npy_bytes(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array, dtype=np.uint8), allow_pickle=False)
    return buf.getvalue()


def write_goal(out_dir: str | Path, template: np.ndarray, meta: dict[str, Any]) -> Path:
    """Write ``goal.npy``, ``meta.json`` and ``goal.png`` into ``out_dir``; return the PNG."""
    from gbx_gameboy.media import save_png

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if template.dtype != np.uint8 or template.ndim != 2 or int(template.max(initial=0)) > 3:
        raise GoalError("a goal template must be uint8 [H, W] shade indices 0..3")
    from gbx.config import write_atomic

    write_atomic(out / GOAL_FILE, npy_bytes(template))
    write_atomic(out / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return save_png(template, out / PNG_FILE, scale=PNG_SCALE)


def load_goal(path: str | Path) -> Goal:
    """A goal from a goal directory (``goal.npy`` + ``meta.json``) or a bare ``.npy`` file.

    Anything else (a missing path, an ``.npz`` container, a template that is not uint8
    ``[H, W]`` shades 0..3, a ``meta.json`` that is not a JSON object or whose ``tau`` is
    outside (0, 1) or ``consec_k`` below 1) raises :class:`GoalError` in one line.
    """
    p = Path(path).expanduser()
    if p.is_dir():
        npy, meta_path = p / GOAL_FILE, p / META_FILE
    elif p.suffix == ".npy" and p.is_file():
        npy, meta_path = p, p.with_name(META_FILE)
    elif p.is_file():
        raise GoalError(
            f"goal {p} is not a .npy template or a goal folder (an .npz or other container is "
            "not read): set env.goal_dir to a folder made by `gbx gameboy capture-goal`"
        )
    else:
        raise GoalError(
            f"goal not found: {p} (set env.goal_dir to a folder made by "
            "`gbx gameboy capture-goal` or to a .npy template)"
        )
    if not npy.is_file():
        raise GoalError(f"{p} has no {GOAL_FILE}; make one with `gbx gameboy capture-goal`")
    template = _read_template(npy)
    meta = _read_goal_meta(meta_path) if meta_path.is_file() else {}
    return Goal(template, meta, p)


# What numpy raises on a malformed .npy header (it parses the header as Python literals).
_NPY_ERRORS = (ValueError, OSError, EOFError, SyntaxError, TypeError, UnicodeDecodeError,
               tokenize.TokenError, zipfile.BadZipFile)


def _check_npy_header(npy: Path, fix: str) -> None:
    """Read only the header: refuse a non-uint8 or non-2-D array, or one whose header
    claims more bytes than the file holds (before numpy allocates for it)."""
    from numpy.lib import format as npy_format

    with npy.open("rb") as fh:
        if fh.read(6) != b"\x93NUMPY":
            fh.seek(0)
            if fh.read(4) == b"PK\x03\x04":
                raise GoalError(f"{npy} is an .npz container, not a .npy array; {fix}")
            raise GoalError(f"{npy} is not a .npy file (bad magic); {fix}")
        fh.seek(0)
        version = npy_format.read_magic(fh)
        read_header = (npy_format.read_array_header_1_0 if version == (1, 0)
                       else npy_format.read_array_header_2_0)
        shape, _fortran, dtype = read_header(fh, max_header_size=10_000)
        body = npy.stat().st_size - fh.tell()
    if dtype != np.uint8 or len(shape) != 2:
        raise GoalError(f"{npy} holds {dtype}{list(shape)}; need uint8 [H, W]")
    if int(np.prod(shape, dtype=np.int64)) != body:
        raise GoalError(f"{npy} is truncated or padded: its header says {list(shape)}, "
                        f"the file holds {body} data bytes; {fix}")


def _read_template(npy: Path) -> np.ndarray:
    fix = "make it again with `gbx gameboy capture-goal`"
    try:
        _check_npy_header(npy, fix)
        template = np.load(npy, allow_pickle=False)
    except GoalError:
        raise
    except _NPY_ERRORS as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise GoalError(f"{npy} is not a readable .npy file ({reason}); {fix}") from None
    if not isinstance(template, np.ndarray):  # np.load opens a zip (.npz) by its content
        raise GoalError(f"{npy} is an .npz container, not a .npy array; {fix}")
    if template.dtype != np.uint8 or template.ndim != 2 or template.size == 0:
        raise GoalError(f"{npy} holds {template.dtype}{list(template.shape)}; need uint8 [H, W]")
    if int(template.max(initial=0)) > 3:
        raise GoalError(f"{npy} holds values above 3; a template holds shade indices 0..3")
    return template


def _read_goal_meta(meta_path: Path) -> dict[str, Any]:
    """``meta.json`` of a goal, with ``tau``, ``consec_k`` and ``rom_sha256`` checked."""
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = type(exc).__name__ if isinstance(exc, RecursionError) else str(exc)
        raise GoalError(f"{meta_path} is not valid JSON: {reason}") from None
    if not isinstance(meta, dict):
        raise GoalError(f"{meta_path} holds a JSON {type(meta).__name__}; it must be an object")
    if "tau" in meta:
        tau = meta["tau"]
        if isinstance(tau, bool) or not isinstance(tau, int | float) or not 0.0 < tau < 1.0:
            raise GoalError(f"{meta_path}: tau must be a number in (0, 1), got {tau!r}; fix "
                            "the file or override it with env.tau")
    if "consec_k" in meta:
        k = meta["consec_k"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise GoalError(f"{meta_path}: consec_k must be an integer >= 1, got {k!r}; fix "
                            "the file or override it with env.consec_k")
    sha = meta.get("rom_sha256")
    if sha is not None and not isinstance(sha, str):
        raise GoalError(f"{meta_path}: rom_sha256 must be a hex string, got {sha!r}")
    return meta


def check_goal_rom(goal: Goal, rom_sha256: str, rom: str | Path, *, allow_mismatch: bool) -> None:
    """Refuse a goal captured on another ROM than ``rom`` (the one in use), unless allowed."""
    recorded = goal.meta.get("rom_sha256")
    if recorded is None or recorded == rom_sha256 or allow_mismatch:
        return
    raise GoalError(
        f"goal {goal.path} was captured on ROM sha256 {recorded}, but env.rom {rom} has "
        f"sha256 {rom_sha256}: use the goal's ROM, capture the goal again, or set "
        "env.allow_goal_rom_mismatch=true"
    )


def goal_meta(
    *, rom: str | Path, state: str | Path | None, script: Script, obs_size: str, tau: float,
    consec_k: int, state_label: str | None = None, note: str = "", failure: bool = False,
) -> dict[str, Any]:
    from gbx_gameboy.cartridge import parse_cartridge

    cart = parse_cartridge(str(rom))
    meta: dict[str, Any] = {
        "rom_title": cart.title,
        "rom_sha256": cart.sha256,
        "source_state": state_label if state_label is not None else (str(state) if state else None),
        "source_state_sha256": sha256_file(state) if state else None,
        "script": script.describe(),
        "obs_size": obs_size,
        "distance": DISTANCE_METRIC,
        "tau": tau,
        "consec_k": consec_k,
    }
    if note:
        meta["note"] = note
    if failure:
        meta["kind"] = FAILURE_KIND
    return meta


def capture_goal(
    rom: str | Path, state: str | Path | None, script: Script, out_dir: str | Path, *,
    obs_size: str = "72x80", tau: float = DEFAULT_TAU, consec_k: int = DEFAULT_CONSEC_K,
    device: str = "cpu", failure: bool = False,
) -> tuple[Path, LookAlike | None]:
    """Play ``script`` from ``state`` and write the last observation as a goal (or, with
    ``failure``, a failure screen: the same files, ``"kind": "failure"`` in the meta);
    return the PNG and, for a goal, the nearest screen a button opens on the way
    (:mod:`gbx_gameboy.look_alikes`, also in the meta as ``nearest_look_alike``)."""
    batch = new_batch(rom, state, device)
    places: list[Any] = []
    frames = play(batch, script, obs_size, states=None if failure else places)
    meta = goal_meta(rom=rom, state=state, script=script, obs_size=obs_size, tau=tau,
                     consec_k=consec_k, failure=failure)
    look = None
    if not failure:
        look = nearest_look_alike(rom, script, places, frames[-1], obs_size=obs_size,
                                  device=device)
        meta["nearest_look_alike"] = look.describe() if look else None
    return write_goal(out_dir, frames[-1], meta), look


def make_state(
    rom: str | Path, state: str | Path | None, script: Script, out: str | Path, *,
    device: str = "cpu",
) -> Path:
    """Play ``script`` from ``state`` (power-on when None) and save the result as a savestate."""
    from gbx_gameboy.savestate import save_state

    batch = new_batch(rom, state, device)
    play(batch, script)
    return save_state(batch, 0, out)


# --------------------------------------------------------------------------- command
@click.command("capture-goal")
@click.option("--rom", required=True, type=click.Path(dir_okay=False), help="the .gb ROM")
@click.option("--state", default=None, type=click.Path(dir_okay=False),
              help="savestate to start from (gbx or PyBoy); default: power-on")
@click.option("--press", default="", help='frame presses, e.g. "START@60,A@120"')
@click.option("--steps", "steps_spec", default="",
              help='one button per env step, e.g. "DOWN*5,LEFT*3,DOWN" (after the presses)')
@click.option("--settle", default=0, show_default=True, help="idle frames at the end")
@click.option("--frames-per-step", default=24, show_default=True)
@click.option("--hold", default=8, show_default=True, help="frames each button is held")
@click.option("--obs-size", default="72x80", show_default=True, help="72x80 or 144x160")
@click.option("--tau", default=DEFAULT_TAU, show_default=True, help="default tau of the goal")
@click.option("--consec-k", default=DEFAULT_CONSEC_K, show_default=True,
              help="default consecutive steps under tau")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="goal folder to write (goal.npy, meta.json, goal.png)")
@click.option("--device", default="cpu", show_default=True)
@click.option("--failure", is_flag=True,
              help="save a failure screen (for env.failure_dirs: reaching it ends an episode "
                   "as a failure) instead of a goal")
def capture_goal_cmd(
    rom: str, state: str | None, press: str, steps_spec: str, settle: int, frames_per_step: int,
    hold: int, obs_size: str, tau: float, consec_k: int, out_dir: str, device: str,
    failure: bool,
) -> None:
    """Play a button script from a state and save the screen as a goal template (or, with
    --failure, as a failure screen).

    With --steps, a goal also records the nearest screen that A, B, START or SELECT opens
    at any place of the way (meta.json "nearest_look_alike"), with a warning when it is
    under twice tau: a policy could open that box instead of doing the task."""
    from gbx_gameboy.obs import obs_hw

    try:
        obs_hw(obs_size)
        script = Script.parse(press, steps_spec, frames_per_step=frames_per_step, hold=hold,
                              settle=settle)
        if not 0.0 < tau <= 1.0 or consec_k < 1:
            raise ValueError(f"need 0 < tau <= 1 and consec-k >= 1, got {tau} and {consec_k}")
        png, look = capture_goal(rom, state, script, out_dir, obs_size=obs_size, tau=tau,
                                 consec_k=consec_k, device=device, failure=failure)
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {Path(out_dir) / GOAL_FILE} and {Path(out_dir) / META_FILE}")
    click.echo(f"check the goal picture: {png}")
    if look is not None:
        click.echo(f"nearest screen a button opens on the way: {look.distance:.6f} "
                   f"({look.button} after {look.after_steps} steps)")
        warning = look.warning(tau)
        if warning:
            click.echo(f"warning: {warning}", err=True)
