"""``gameboy``: the generic pixel env over a batch of emulated Game Boys.

One env step is one ``batch.step_frames`` launch (hold the chosen buttons for
``release_after_frames`` frames, release them, run to ``frames_per_step``
frames, render only the last frame) followed by observation extraction on
the device. Reward is zero here; episodes end by truncation at ``max_steps``
and restart through a masked restore of the start snapshot. Goal envs reuse
all of this and override :meth:`GameBoyEnv.reward_done` (and optionally
:meth:`GameBoyEnv.on_reset`).

Returned tensors are the env's own buffers: they stay valid until the next
``step``/``reset``; clone what must be kept longer.

The emulators are the Warp batch unless the env is handed other ones
(:class:`Emulators`: the ``pyboy`` envs pass a pool of PyBoy processes), so every
backend steps, scores and resets through this one implementation.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs
import torch

from gbx import hookimpl
from gbx.config import in_range, option
from gbx.memory import check_env_memory
from gbx_gameboy.actions import CODECS, make_codec
from gbx_gameboy.cartridge import RomError
from gbx_gameboy.obs import OBS_SIZES, FrameStack, ObsExtractor, obs_hw
from gbx_gameboy.resources import bundled_rom

# Warp and the emulator modules are imported where an env is built, so that
# registering the env (at every ``gbx`` start) stays cheap.

log = logging.getLogger(__name__)

DEFAULT_ROM = bundled_rom()
DEFAULT_FRAMES_PER_STEP = 24
MAX_FRAMES_PER_STEP = 20000

_v = attrs.validators


def _release_within_step(inst: Any, _attr: Any, value: int) -> None:
    if not 0 <= value <= inst.frames_per_step:
        raise ValueError(
            f"release_after_frames must be in 0..frames_per_step ({inst.frames_per_step}), "
            f"got {value}"
        )


# Settings only training envs use, with their "off" values: evaluation envs are built
# without them (gbx.api.RealStartConfig), so they start from the task's real start state.
TRAINING_ONLY = {"start_states": (), "real_start_fraction": None, "save_goal_states": 0,
                 "stagger_start": False}
# Seeds the one draw of env.stagger_start, apart from the start-state stream.
_STAGGER_SALT = 0x5EED_57A6
START_STATE_SUFFIXES = (".gbxstate", ".state")
# env.regroup -> GameBoyBatch(regroup=...)
REGROUP_CHOICES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}


class RealStart:
    """Gives an env config class :meth:`real_start` (:class:`gbx.api.RealStartConfig`)."""

    __slots__ = ()

    def real_start(self) -> Any:
        """This config without its training-only settings (:data:`TRAINING_ONLY`)."""
        config: Any = self  # an attrs class deriving from this one
        names = attrs.fields_dict(type(config))
        return attrs.evolve(config, **{k: v for k, v in TRAINING_ONLY.items() if k in names})

    def __attrs_post_init__(self) -> None:
        # Shared by every Game Boy env config (the stage configs are built from the fields).
        if getattr(self, "real_start_fraction", None) is not None and not getattr(
                self, "start_states", ()):
            raise ValueError("env.real_start_fraction needs env.start_states (the states "
                             "the other resets start from): set both, or neither")


@attrs.frozen
class GameBoyConfig(RealStart):
    """The ``env`` section of the ``gameboy`` env."""

    rom: str = option(str(DEFAULT_ROM), "path of the .gb ROM (default: the bundled game)")
    state: str = option(
        "", "start savestate: a gbx .gbxstate or a PyBoy .state file (empty: power-on start)"
    )
    frames_per_step: int = option(
        DEFAULT_FRAMES_PER_STEP, "emulated frames per env step",
        _v.and_(_v.ge(1), _v.le(MAX_FRAMES_PER_STEP)),
    )
    release_after_frames: int = option(
        8, "frames the chosen buttons are held before release, within a step",
        _v.and_(in_range(0, MAX_FRAMES_PER_STEP), _release_within_step),
    )
    action_codec: str = option(
        "default", f"action set: {', '.join(CODECS)}", _v.in_(tuple(CODECS))
    )
    obs_size: str = option(
        "72x80", "observation size: 72x80 (2x2 max of shades) or 144x160", _v.in_(tuple(OBS_SIZES))
    )
    stack_k: int = option(1, "frames stacked per observation (K)", _v.and_(_v.ge(1), _v.le(16)))
    max_steps: int = option(2048, "steps before an episode is truncated", _v.ge(1))
    stagger_start: bool = option(
        False, "training envs begin their first episode part-way through its step budget "
        "(each env's step counter starts uniform in 0..max_steps-1), so episodes that run to "
        "max_steps end at different steps instead of in lockstep; evaluation envs never do")
    random_noop_max: int = option(
        0, "random start: each episode begins 0..N no-op frames after the start state",
        _v.and_(_v.ge(0), _v.le(10_000)),
    )
    start_states: tuple[str, ...] = option(
        (), "more start savestates (gbx or PyBoy files, or folders of them) for training "
        "envs; each episode starts from a random one of these and env.state (evaluation "
        "always starts from env.state)",
        _v.deep_iterable(_v.instance_of(str)),
    )
    real_start_fraction: float | None = option(
        None, "with env.start_states: the fraction of training resets that start from "
        "env.state, the rest drawing among env.start_states (None: one uniform draw over "
        "all of them)", _v.optional(_v.and_(_v.ge(0.0), _v.le(1.0))),
    )
    cpu_threads: int = option(
        0, "Warp CPU device: threads that step the emulator, each a contiguous chunk of "
        "envs (0: every core); no effect on a GPU", _v.ge(0),
    )
    regroup: str = option(
        "auto", "GPU: run each step with the envs sorted into warps by the instructions "
        "each ran in the step before, on a second copy of the emulator state: auto (where "
        "warps hold 8 or more Game Boys), on, or off (saves the copy's memory)",
        _v.in_(("auto", "on", "off")),
    )


def resolve_rom(path: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        if p == DEFAULT_ROM:
            raise RomError(
                f"the bundled game ROM is missing ({p}); reinstall gbx-env-gameboy, run "
                "`gbx gameboy build-roms`, or pass env.rom=PATH.gb"
            )
        raise RomError(f"ROM not found: {p} (set env.rom to a .gb file)")
    return p


def start_state_files(entries: tuple[str, ...]) -> list[Path]:
    """The savestate files ``env.start_states`` names: files as given, folders expanded to
    their ``.gbxstate``/``.state`` files (sorted). A missing path or a folder without
    states is a one-line :class:`~gbx_gameboy.savestate.SaveStateError`."""
    from gbx_gameboy.savestate import SaveStateError

    files: list[Path] = []
    for entry in entries:
        p = Path(entry).expanduser()
        if p.is_dir():
            found = sorted(f for f in p.iterdir()
                           if f.is_file() and f.suffix in START_STATE_SUFFIXES)
            if not found:
                raise SaveStateError(
                    f"env.start_states folder {p} holds no {' or '.join(START_STATE_SUFFIXES)} "
                    "files: point it at the goal_states/ of a run made with "
                    "env.save_goal_states > 0, or at savestate files"
                )
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise SaveStateError(f"env.start_states: savestate not found: {p} (a savestate "
                                 "file or a folder of them)")
    return files


def load_start_state(batch: Any, path: str | Path, setting: str = "") -> tuple[str, bool]:
    """Load a gbx or PyBoy savestate into every env; return (file sha256, has a rendered frame).

    The format is detected from the file's first bytes. ``setting`` (e.g. ``env.state``)
    prefixes a refusal, so the one-line error names the setting that gave the file.
    """
    from gbx_gameboy import savestate

    p = Path(path).expanduser()
    source = f"{setting} {p}" if setting else str(p)
    if not p.is_file():
        raise savestate.SaveStateError(f"savestate not found: {source}")
    data = p.read_bytes()
    if savestate.is_gbx_state(data):
        savestate.load_into(batch, savestate.decode(data, source), None, source=source)
        return hashlib.sha256(data).hexdigest(), True
    from gbx_gameboy import pyboy_state

    pyboy_state.load_pyboy_state(batch, data, env=None, source=source)
    return hashlib.sha256(data).hexdigest(), False


def bytes_per_env(cart: Any, config: GameBoyConfig, on_gpu: bool = False) -> int:
    """Device bytes one env of a batch takes: every emulator array (memory, cart RAM,
    registers, timers, serial buffer, framebuffer, phase clocks), on a GPU unless
    ``env.regroup`` is off a second copy of them (a large batch regroups its envs,
    regroup.py), and the observation buffers of a step (frame stack, final observations,
    frame, goal scratch)."""
    from gbx_gameboy.machine import env_bytes, regroup_bytes

    h, w = obs_hw(config.obs_size)
    copy = on_gpu and config.regroup != "off"
    emulator = env_bytes(cart) + (env_bytes(cart) + regroup_bytes(cart) if copy else 0)
    return emulator + (2 * config.stack_k + 4) * h * w + 64


class EmulatorBatch(Protocol):
    """What an env step needs of its emulators (the Warp ``GameBoyBatch`` has more)."""

    @property
    def fb(self) -> torch.Tensor:
        """The last rendered screens, shades ``uint8 [N, 144, 160]`` on the env's device."""
        ...

    def step_frames(self, buttons: torch.Tensor, frames: int, release: int,
                    render_last: bool = True) -> None:
        """Every env: hold ``buttons`` (int32 masks) ``release`` frames, run ``frames``."""
        ...

    def faulted(self) -> torch.Tensor:
        """bool ``[N]``: envs the emulator locked during the last step."""
        ...


class StartRestorer(Protocol):
    """Sends the envs of a mask back to a start state."""

    def restore(self, mask: torch.Tensor, index: int = 0) -> None: ...


@attrs.frozen
class Emulators:
    """Emulators built outside the env, with the facts the env reports about them.

    They restart every episode from their one start state; an env built on them cannot
    save its state (the Warp batch's arrays are what :meth:`GameBoyEnv.env_state_dict`
    saves), and makes no Warp launches.
    """

    batch: EmulatorBatch
    restorer: StartRestorer
    rom_sha256: str
    state_sha256: str | None
    rom_title: str | None = None


def _warp_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    return "cpu"


class GameBoyEnv:
    """A batch of ``num_envs`` Game Boys as a :class:`gbx.api.Env`.

    ``emulators`` replaces the Warp batch this env builds by default (see
    :class:`Emulators`).
    """

    def __init__(
        self, config: GameBoyConfig, num_envs: int, device: torch.device | str, seed: int = 0,
        *, emulators: Emulators | None = None,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.config = config
        self.num_envs = num_envs
        self.seed = int(seed)
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if config.frames_per_step != DEFAULT_FRAMES_PER_STEP:
            log.warning(
                "gameboy env: frames_per_step=%d (default %d)",
                config.frames_per_step, DEFAULT_FRAMES_PER_STEP,
            )
        self.codec = make_codec(config.action_codec, self.device)
        self.num_actions = self.codec.num_actions
        hw = obs_hw(config.obs_size)
        self.obs_shape = (config.stack_k, *hw)
        self._warp = emulators is None
        self.start_states_sha256: list[str] = []
        self.state_sha256: str | None = None
        self.bank: Any = None
        if emulators is None:
            self._build_warp_batch(config, num_envs, seed)
        else:
            self.batch: Any = emulators.batch
            self.restorer: Any = emulators.restorer
            self.rom_sha256 = emulators.rom_sha256
            self.state_sha256 = emulators.state_sha256
            self._rom_title = emulators.rom_title
            self.random_start = False
        self._allocate_step_buffers(num_envs, hw)

    def _build_warp_batch(self, config: GameBoyConfig, num_envs: int, seed: int) -> None:
        """The Warp batch, its start snapshots and the masked restore from them."""
        from gbx_gameboy.cartridge import parse_cartridge
        from gbx_gameboy.machine import GameBoyBatch
        from gbx_gameboy.snapshot import MaskedRestore, SnapshotBank, capture

        rom = resolve_rom(config.rom)
        wdev = _warp_device(self.device)
        cart = parse_cartridge(str(rom))
        # Refused before the batch allocates anything (a huge env count is a one-line error).
        check_env_memory("gameboy", num_envs,
                         bytes_per_env(cart, config, on_gpu=not wdev.startswith("cpu")),
                         self.device)
        self.batch = GameBoyBatch(cart, num_envs, wdev, threads=config.cpu_threads,
                                  regroup=REGROUP_CHOICES[config.regroup])
        self.rom_sha256 = self.batch.cart.sha256
        self._rom_title = self.batch.cart.title

        # Start snapshots, built on a one-env batch so setup cost does not grow with N:
        # each start state, then 1..random_noop_max no-op frames after it. It runs the
        # batch's kernel build (variant and block size), so an env compiles only one.
        probe = GameBoyBatch(
            self.batch.cart, 1, wdev, kernel=self.batch.kernel,
            block_threads=self.batch.block_threads,
            block_warps=None if wdev.startswith("cpu") else self.batch.block_warps,
            regroup=False)
        starts = []
        with self._on_torch_stream():
            paths: list[str | Path] = [config.state, *start_state_files(config.start_states)]
            for i, path in enumerate(paths):
                probe.reset()
                rendered = False
                if path:
                    sha, rendered = load_start_state(probe, path,
                                                     "env.state" if i == 0 else "env.start_states")
                    if i == 0:
                        self.state_sha256 = sha
                    else:
                        self.start_states_sha256.append(sha)
                if not rendered:
                    probe.run_frames(1, render_last=True)  # a rendered first observation
                starts.append(capture(probe.state_tensors(), 0))
                for _ in range(config.random_noop_max):
                    probe.run_frames(1, render_last=True)
                    starts.append(capture(probe.state_tensors(), 0))
        del probe
        self.bank = SnapshotBank.from_states(starts, self.device)
        self.restorer = MaskedRestore(self.batch.state_tensors(), self.bank)
        self.restorer.seed(seed)
        self.random_start = self.bank.size > 1
        # The real start's entries come first in the bank (env.state and its no-op frames);
        # the curriculum's (env.start_states and theirs) follow.
        real_entries = 1 + config.random_noop_max
        self._first_start_state = real_entries if config.start_states else None
        if config.real_start_fraction is not None:
            self.restorer.split(real_entries, config.real_start_fraction)

    def _allocate_step_buffers(self, n: int, hw: tuple[int, int]) -> None:
        """Every buffer a step writes, allocated once (a step allocates nothing)."""
        dev = self.device
        self.stack = FrameStack(n, self.config.stack_k, hw, dev)
        self._frame = torch.zeros((n, *hw), dtype=torch.uint8, device=dev)
        self._extract = ObsExtractor(self.batch.fb, self.config.obs_size, self._frame)
        self._final_obs = torch.zeros((n, *self.obs_shape), dtype=torch.uint8, device=dev)
        self._buttons = torch.zeros(n, dtype=torch.int32, device=dev)
        self._steps = torch.zeros(n, dtype=torch.int32, device=dev)
        self._reward = torch.zeros(n, dtype=torch.float32, device=dev)
        self._done = torch.zeros(n, dtype=torch.bool, device=dev)
        self._trunc = torch.zeros(n, dtype=torch.bool, device=dev)
        self._reset_mask = torch.zeros(n, dtype=torch.bool, device=dev)
        self._all = torch.ones(n, dtype=torch.bool, device=dev)
        self._from_start_states = torch.zeros(n, dtype=torch.bool, device=dev)
        self._drawn_start_state = torch.zeros(n, dtype=torch.bool, device=dev)

    # ------------------------------------------------------------------ hooks
    def reward_done(self, frame: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reward ``float32 [N]`` and terminal flags ``bool [N]`` for the newest ``frame``.

        The generic env has neither; goal envs override this (no host syncs).
        """
        return self._reward, self._done

    def on_reset(self, mask: torch.Tensor, frame: torch.Tensor) -> None:
        """Called after the envs in ``mask`` were restored; ``frame`` is their first frame."""

    def episode_progress(self) -> torch.Tensor | None:
        """What each env's episode has achieved that its screen may not show, bool
        ``[K, N]`` (the env's own buffer), or None: a snapshot saves it with the env and a
        restore from that snapshot brings it back (:mod:`gbx_gameboy.env_snapshots`). The
        generic env has none; goal envs: the milestones passed."""
        return None

    # ------------------------------------------------------------------ Env API
    def reset(self) -> torch.Tensor:
        self._reset_envs(self._all)
        if self.config.stagger_start:
            # Each env's first episode is already part-way through (env.stagger_start); a
            # run resumed from a checkpoint puts its saved counters back over these.
            gen = torch.Generator(device=self.device)
            gen.manual_seed(self.seed ^ _STAGGER_SALT)
            torch.randint(0, self.config.max_steps, (self.num_envs,), generator=gen,
                          device=self.device, dtype=self._steps.dtype, out=self._steps)
        return self.stack.buffer

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        cfg = self.config
        self.codec.encode_into(actions, self._buttons)
        with self._on_torch_stream():
            self.batch.step_frames(
                self._buttons, cfg.frames_per_step, cfg.release_after_frames, render_last=True
            )
        frame = self._extract()
        self.stack.push(frame)
        reward, done = self.reward_done(frame)
        self._steps += 1
        torch.ge(self._steps, cfg.max_steps, out=self._trunc)
        torch.logical_or(done, self._trunc, out=self._reset_mask)
        self._final_obs.copy_(self.stack.buffer)
        # Envs the emulator locked in this step (illegal opcode, cycle budget), before a
        # reset restores them from the start state.
        faulted = self.batch.faulted()
        self._reset_envs(self._reset_mask)
        info = {"reset_mask": self._reset_mask, "final_obs": self._final_obs, "faulted": faulted}
        return self.stack.buffer, reward, done, self._trunc, info

    def close(self) -> None:
        self.batch = None
        self.restorer = None
        self.bank = None

    def meta(self) -> dict[str, Any]:
        from gbx_gameboy.machine import GameBoyBatch

        cfg = self.config
        return {
            "env": "gameboy",
            "rom": str(cfg.rom),
            "rom_title": self._rom_title,
            "rom_sha256": self.rom_sha256,
            "state": cfg.state or None,
            "state_sha256": self.state_sha256,
            "action_codec": cfg.action_codec,
            "buttons": list(self.codec.buttons),
            "frames_per_step": cfg.frames_per_step,
            "release_after_frames": cfg.release_after_frames,
            "obs_size": cfg.obs_size,
            "stack_k": cfg.stack_k,
            "max_steps": cfg.max_steps,
            "random_noop_max": cfg.random_noop_max,
            "start_states": list(cfg.start_states),
            "real_start_fraction": cfg.real_start_fraction,
            "start_states_sha256": self.start_states_sha256,
            # threads the Warp emulator steps on (CPU device; None on a GPU or another backend)
            "cpu_threads": (self.batch.cpu_workers
                            if isinstance(self.batch, GameBoyBatch) and self.device.type == "cpu"
                            else None),
            # whether the Warp emulator's launches run with the envs regrouped (regroup.py)
            "regroup": self.batch.regroup if isinstance(self.batch, GameBoyBatch) else None,
        }

    def from_start_states(self) -> torch.Tensor:
        """``bool [N]``: whether each env's episode began at one of ``env.start_states``
        rather than ``env.state`` (:class:`gbx.api.StartOriginEnv`); the env's buffer."""
        return self._from_start_states

    # ------------------------------------------------------------------ StatefulEnv
    def env_state_dict(self) -> dict[str, Any]:
        """Everything the batch's future depends on (:class:`gbx.api.StatefulEnv`): every
        emulator array of every env, the frame stack, the step counters and the random
        stream that picks start states. Only the Warp batch's state can be saved."""
        self._require_warp("save")
        emu = {name: t.clone() for name, t in self.batch.state_tensors().items()}
        emu["clocks"] = self.batch.phase_clocks.clone()
        return {
            "emulator": emu,
            "stack": self.stack.buffer.clone(),
            "steps": self._steps.clone(),
            "from_start_states": self._from_start_states.clone(),
            "restore_rng": self.restorer.generator_state(),
            "rom_sha256": self.rom_sha256,
        }

    def load_env_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`env_state_dict` into this batch, in place (the kernels keep
        pointing at the same arrays); refuses a state of another ROM or batch shape."""
        self._require_warp("restore")
        if state.get("rom_sha256") != self.rom_sha256:
            raise ValueError(
                f"the saved env state is of ROM sha256 {state.get('rom_sha256')}, this env "
                f"runs {self.rom_sha256}: resume with the ROM the run was started with"
            )
        targets = dict(self.batch.state_tensors())
        targets["clocks"] = self.batch.phase_clocks
        emu = state["emulator"]
        pairs = [(f"emulator.{k}", t, emu.get(k)) for k, t in targets.items()]
        pairs += [("stack", self.stack.buffer, state.get("stack")),
                  ("steps", self._steps, state.get("steps"))]
        origin = state.get("from_start_states")  # absent in states saved before it existed
        if isinstance(origin, torch.Tensor):
            pairs.append(("from_start_states", self._from_start_states, origin))
        for name, dst, src in pairs:
            if not isinstance(src, torch.Tensor) or src.shape != dst.shape \
                    or src.dtype != dst.dtype:
                got = "missing" if not isinstance(src, torch.Tensor) \
                    else f"{src.dtype}{list(src.shape)}"
                raise ValueError(
                    f"saved env state {name!r} is {got}, this env needs "
                    f"{dst.dtype}{list(dst.shape)}: resume with the same env config and num_envs"
                )
        with self._on_torch_stream():
            for _name, dst, src in pairs:
                dst.copy_(src.to(dst.device))
        self.restorer.set_generator_state(state["restore_rng"])

    # ------------------------------------------------------------------ SnapshotEnv
    def snapshot_slots(self, capacity: int) -> Any:
        """``capacity`` device slots of full env states (:class:`gbx.api.SnapshotEnv`):
        every emulator array and the frame stack; a restore starts a new episode
        (step counter 0). See :mod:`gbx_gameboy.env_snapshots`."""
        from gbx_gameboy.env_snapshots import GameBoySnapshots

        return GameBoySnapshots(self, capacity)

    # ------------------------------------------------------------------ internals
    def _require_warp(self, what: str) -> None:
        if not self._warp:
            raise TypeError(f"this env runs on emulators it was handed; it cannot {what} "
                            "their state")

    def _reset_envs(self, mask: torch.Tensor) -> None:
        with self._on_torch_stream():
            if self.random_start:
                self.restorer.restore_random(mask)
                if self._first_start_state is not None:
                    torch.ge(self.restorer.which, self._first_start_state,
                             out=self._drawn_start_state)
                    torch.where(mask, self._drawn_start_state, self._from_start_states,
                                out=self._from_start_states)
            else:
                self.restorer.restore(mask, 0)
            # Only the restored envs' screens changed since the step's frames were made.
            frame = self._extract(mask)
        self.stack.reset_where(mask, frame)
        self._steps.masked_fill_(mask, 0)
        self.on_reset(mask, frame)

    def _on_torch_stream(self) -> contextlib.AbstractContextManager[Any]:
        """Make Warp launch on torch's current stream, so device work stays in order."""
        if self._warp and self.device.type == "cuda":
            import warp as wp

            return wp.ScopedStream(wp.stream_from_torch(self.device))
        return contextlib.nullcontext()


def make_env(
    config: GameBoyConfig, num_envs: int, device: torch.device | str, seed: int
) -> GameBoyEnv:
    return GameBoyEnv(config, num_envs, device, seed)


@hookimpl
def register_envs(register: Any) -> None:
    register(
        "gameboy",
        make_env,
        GameBoyConfig,
        description="Game Boy ROM in the Warp emulator; pixel observations, zero reward",
    )
