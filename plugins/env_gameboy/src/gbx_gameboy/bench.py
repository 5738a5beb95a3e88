"""``gbx bench emulator``: emulated frames/s and instructions/s of the Warp Game Boy."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gbx_gameboy.phase_clock import PHASE_CLOCKS, summarize
from gbx_gameboy.variant_timing import WARM_EXTRA_STEPS, WARM_ROUNDS

if TYPE_CHECKING:
    import torch

STEP_FRAMES = 24  # frames per env step (one launch), as the RL envs use
BOOT_FRAMES = 120
# Untimed steps before the timed ones. Random buttons spread a batch's Game Boys over a
# game's phases, and each warp's threads apart, for tens of steps: flappyboy's rate at
# 65,536 envs on a GPU falls from 9.5M env-frames/s at the third step to 4.3M by the
# 26th and stays there (docs/benchmarks.md, "Warm-up until play has diverged"). The
# record's warmup_step_frames_per_s shows each warm-up step's rate.
WARMUP_STEPS = 30
# The buttons of a game step, drawn per env and step: none, RIGHT, LEFT, UP, DOWN, A, B
# (actions.py's bits; literals so that importing the CLI does not import torch).
BUTTON_TABLE = (0, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20)

# A CPU-bound ROM that never halts: ALU work, WRAM/HRAM traffic, calls, a busy loop.
BUSY_SOURCE = """
SECTION "entry", ROM0[$0100]
    nop
    jp Main
SECTION "main", ROM0[$0150]
Main:
    ld sp, $FFFE
    ld hl, $C000
    ld bc, $0000
.loop:
    ld a, [hl]
    add a, c
    xor b
    ld [hl+], a
    inc c
    call Mix
    ld a, h
    cp $D0
    jr nz, .loop
    ld hl, $C000
    inc b
    jr .loop
Mix:
    ldh a, [$80]
    rlca
    adc a, $13
    ldh [$80], a
    ret
"""


class EnvCounts(click.ParamType):
    """A comma-separated list of batch sizes (``64`` or ``1,64,1024``), each >= 1."""

    name = "N[,N...]"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> list[int]:
        if isinstance(value, list):
            return value
        text = str(value)
        try:
            sizes = [int(s) for s in text.split(",") if s.strip()]
        except ValueError:
            self.fail(f"expected comma-separated integers such as 1,64,1024, got {text!r}",
                      param, ctx)
        if not sizes or min(sizes) < 1:
            self.fail(f"expected batch sizes >= 1 such as 1,64,1024, got {text!r}", param, ctx)
        return sizes


def record_head(emulator: str, rom: object, game: bool, envs: int, n_steps: int,
                warmup_steps: int) -> dict[str, object]:
    """The fields every emulator record starts with, whichever emulator ran the work
    (``gbx bench emulator`` and its ``--emulator pyboy`` run)."""
    return {
        "bench": "emulator",
        "emulator": emulator,
        "rom": rom if isinstance(rom, str) else "busy-micro-rom",
        "workload": "game-random-buttons" if game else "busy-loop",
        "envs": envs,
        "frames_per_env": n_steps * STEP_FRAMES,
        "warmup_steps": warmup_steps,
    }

def busy_rom() -> bytes:
    """The busy micro-ROM, assembled with the project's assembler."""
    from gbx_gameboy.asm import assemble

    return assemble(BUSY_SOURCE)


def _versions() -> dict[str, str]:
    import torch

    from gbx_gameboy.warp_setup import import_warp

    wp = import_warp()

    return {"warp": wp.config.version, "torch": torch.__version__}


def warm_through_variant_rounds(batch: Any, step: Callable[[int], object], first: int) -> int:
    """Steps ``first``, ``first + 1``, ... of a batch that times both run-kernel variants
    until its first rounds of timed launches are done (variant_timing.WARM_ROUNDS), and any
    later round under way (a long warm-up reaches one), at most WARM_EXTRA_STEPS steps:
    they are its start-up, not its steady speed. The batch is synchronised before each
    step, so the next launch takes the last one's times. Returns the index of the first
    step after the warm-up (``first`` for any other batch). The caller then holds the
    batch (``hold_variant``) over its timed steps."""
    index = first
    while (batch.times_variants
           and (batch.variant_rounds < WARM_ROUNDS or batch.timing_variants)
           and index < first + WARM_EXTRA_STEPS):
        batch.synchronize()
        step(index)
        index += 1
    return index


def button_indices(envs: int, steps: int, seed: int) -> torch.Tensor:
    """``int64 [steps, envs]`` indices into ``BUTTON_TABLE``: every env's buttons, step by
    step, the same for any emulator measured with ``seed``."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, len(BUTTON_TABLE), (steps, envs), generator=gen)


def measure(
    rom: bytes | str, envs: int, frames: int, device: str, game: bool, seed: int = 0,
    cold: bool = False, warmup_steps: int = WARMUP_STEPS, threads: int = 0,
    kernel: str = "auto", draw: bool = True, block_threads: int | None = None,
    block_warps: int | None = None, regroup: bool | None = None,
) -> dict[str, object]:
    """Run the benchmark and return its JSON record (compile and warm-up excluded from rate).

    ``draw``: draw the last frame of every step, as an env's observation needs (False: no
    frame is drawn, which prices the drawing against the same emulated work).

    Every timed step is timed on its own (the device is synchronised after each launch, which
    costs nothing next to a 24-frame launch), so the record shows whether the rate is steady:
    ``step_frames_per_s`` lists the per-step rates and ``steady_frames_per_s`` is the rate
    over the second half of the timed steps."""
    import torch

    from gbx_gameboy.warp_setup import import_warp

    wp = import_warp()
    if cold:
        wp.config.kernel_cache_dir = tempfile.mkdtemp(prefix="gbx-warp-cache-")
    from gbx_gameboy.machine import GameBoyBatch

    batch = GameBoyBatch(rom, envs, device, threads=threads, kernel=kernel,
                         block_threads=block_threads, block_warps=block_warps,
                         regroup=regroup)
    compile_s = batch.compile()
    tdev = "cuda" if batch.device.startswith("cuda") else "cpu"
    n_steps = max(1, frames // STEP_FRAMES)
    # Every step's random buttons are drawn up front and already on the device, so the
    # timed loop makes no host transfer.
    table = torch.tensor(BUTTON_TABLE, dtype=torch.int32)
    buttons = table[button_indices(envs, warmup_steps + WARM_EXTRA_STEPS + n_steps,
                                   seed)].to(tdev)

    def step(i: int) -> None:
        if game:
            batch.step_frames(buttons[i], STEP_FRAMES, release_after=STEP_FRAMES // 2,
                              render_last=draw)
        else:
            batch.run_frames(STEP_FRAMES, render_last=draw)

    if game:
        batch.run_frames(BOOT_FRAMES)
        start = torch.full((envs,), 0x80, dtype=torch.int32, device=tdev)
        batch.step_frames(start, STEP_FRAMES, release_after=5)
    def timed_step(i: int, seconds: list[float]) -> None:
        ts = time.perf_counter()
        step(i)
        batch.synchronize()
        seconds.append(time.perf_counter() - ts)

    # Each warm-up step on its own, as the timed ones: their rates show where the batch's
    # speed has settled.
    warm_s: list[float] = []
    batch.synchronize()
    for i in range(warmup_steps):
        timed_step(i, warm_s)
    warm = warm_through_variant_rounds(batch, lambda i: timed_step(i, warm_s), warmup_steps)
    clocks = batch.phase_clocks if PHASE_CLOCKS else None
    if clocks is not None:
        clocks.zero_()  # count the timed steps only
    i0 = int(batch.instruction_count.sum())
    step_s: list[float] = []
    # The timed steps run the chosen variant: a round due among them waits until after.
    batch.hold_variant(True)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for i in range(n_steps):
        timed_step(warm + i, step_s)
    run_s = time.perf_counter() - t0
    batch.hold_variant(False)
    # CPU seconds of this process (all its threads) over the timed steps: on the CPU
    # device, frames per CPU second is the speed per core, whatever else loads the machine.
    cpu_s = time.process_time() - cpu0
    instrs = int(batch.instruction_count.sum()) - i0
    env_frames = n_steps * STEP_FRAMES * envs
    step_frames = STEP_FRAMES * envs
    second_half = step_s[n_steps // 2:]
    rate = env_frames / run_s
    steady = step_frames * len(second_half) / sum(second_half)
    extra: dict[str, object] = {}
    if clocks is not None:
        extra["phase_clocks"] = summarize([int(v) for v in clocks.sum(dim=1).tolist()])
    return {
        **record_head("gbx", rom, game, envs, n_steps, warm),
        "device": batch.device,
        # CPU device: the worker threads the launches ran on (a GPU ignores the count)
        "threads": batch.cpu_workers if batch.device.startswith("cpu") else None,
        "kernel": batch.kernel,  # the run kernel's variant (cpu.HOST) the timed steps ran
        # a batch that timed both variants: each one's median seconds per emulated frame
        "variant_s_per_frame": batch.variant_times or None,
        # GPU: Game Boys per warp of the run kernel's launch
        "block_threads": None if batch.device.startswith("cpu") else batch.block_threads,
        # GPU: warps per block of that launch (machine.launch_shape)
        "block_warps": None if batch.device.startswith("cpu") else batch.block_warps,
        "draw": draw,  # the last frame of each step drawn
        # each launch ran on a copy of the state sorted by the envs' last work (regroup.py)
        "regroup": batch.regroup,
        # other work on the machine skews CPU figures: how busy it was while measuring
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "frames_per_s": rate,
        "steady_frames_per_s": steady,
        # one emulated Game Boy's speed (60 frames/s is real time), beside the totals
        "frames_per_s_per_env": rate / envs,
        "steady_frames_per_s_per_env": steady / envs,
        "step_frames_per_s": [round(step_frames / s, 1) for s in step_s],
        # every warm-up step's rate, the same way (those of a batch's rounds of timed
        # launches mix both run-kernel variants)
        "warmup_step_frames_per_s": [round(step_frames / s, 1) for s in warm_s],
        "instructions_per_s": instrs / run_s,
        "instructions": instrs,
        "run_s": run_s,
        "process_cpu_s": cpu_s,
        "frames_per_cpu_s": env_frames / cpu_s if cpu_s > 0 else None,
        "compile_s": compile_s,
        "compile_cold": cold,
        "locked_envs": int((batch.locked != 0).sum()),
        **_versions(),
        **extra,
    }


@click.command()
@click.option("--rom", default=None, help="ROM path (default: the built-in busy micro-ROM)")
@click.option("--envs", type=EnvCounts(), default="64", show_default=True,
              help="batch sizes, comma separated (1,64,1024): one record per size")
@click.option("--frames", type=int, default=240, show_default=True,
              help="measured frames per env (after warm-up), in steps of 24")
@click.option("--device", default="cpu", show_default=True)
@click.option("--game/--no-game", default=None,
              help="press START then random buttons each step (default: on when --rom given)")
@click.option("--cold", is_flag=True, help="compile into an empty kernel cache (cold compile time)")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=WARMUP_STEPS, show_default=True,
              help="untimed 24-frame steps after boot: random buttons diverge the envs, "
                   "and a batch's speed settles as they do (each step's rate is in the "
                   "record's warmup_step_frames_per_s)")
@click.option("--threads", type=click.IntRange(min=0), default=0, show_default=True,
              help="CPU device: worker threads, each stepping a contiguous chunk of envs "
                   "(0: every core)")
@click.option("--kernel", type=click.Choice(["auto", "cpu", "cuda", "measure"]),
              default="auto", show_default=True,
              help="run-kernel variant: auto (the CPU variant on the CPU device, the "
                   "launch plan's on a GPU, where a plan for the CUDA variant times both "
                   "on the first steps and keeps the faster), either by name on either "
                   "device (the CUDA variant on the CPU, the CPU variant with its inner "
                   "loop on a GPU) to compare the two, or measure (time both on any "
                   "device); the record's kernel is the one the timed steps ran")
@click.option("--block-threads", type=EnvCounts(), default=None,
              help="GPU: Game Boys per warp of the run kernel's launch, comma separated "
                   "(1,8,32; each of 1, 2, 4, 8, 16, 32): one record per batch size and "
                   "warp size (default: the batch's own choice)")
@click.option("--block-warps", type=click.IntRange(1, 8), default=None,
              help="GPU: warps of neighbouring Game Boys per block of that launch, 1 to 8 "
                   "(default: as many as the batch gives each SM)")
@click.option("--draw/--no-draw", default=True, show_default=True,
              help="draw the last frame of each step, as the envs' observations need; "
                   "--no-draw times the same emulation without drawing")
@click.option("--regroup", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True,
              help="sort the envs into warps by the instructions each ran in the launch "
                   "before (auto: on a GPU with 8 or more Game Boys per warp; the "
                   "record's regroup says whether it did)")
@click.option("--emulator", type=click.Choice(["gbx", "pyboy"]), default="gbx",
              show_default=True,
              help="pyboy: PyBoy (sound off, one process) on the same work, each env's steps "
                   "in turn with the same buttons; frames_per_cpu_s compares per core")
def emulator_bench(
    rom: str | None, envs: list[int], frames: int, device: str, game: bool | None, cold: bool,
    warmup_steps: int, threads: int, kernel: str, block_threads: list[int] | None,
    block_warps: int | None, draw: bool, regroup: str, emulator: str,
) -> None:
    """Emulated frames/s and instructions/s; prints one JSON record per batch size.

    Each size gets its own batch and its own warm-up; the kernel is compiled (or loaded
    from the cache) once, by the first. With ``--emulator pyboy`` PyBoy plays the same
    steps (``pyboy_bench.py``)."""
    from gbx_gameboy.cartridge import RomError, parse_cartridge

    if rom is not None:
        if not Path(rom).is_file():
            raise click.BadParameter(f"ROM file not found: {rom}", param_hint="--rom")
        try:
            parse_cartridge(rom)
        except RomError as exc:
            raise click.BadParameter(str(exc), param_hint="--rom") from exc
    image: bytes | str = os.fspath(rom) if rom else busy_rom()
    if emulator == "pyboy":
        if (cold or kernel != "auto" or threads != 0 or not device.startswith("cpu") or not draw
                or block_threads is not None or block_warps is not None or regroup != "auto"):
            raise click.BadParameter("PyBoy runs on one CPU core with no kernel and draws "
                                     "each step's last frame: leave out --cold, --kernel, "
                                     "--threads, --block-threads, --block-warps, --regroup, "
                                     "--device and --no-draw",
                                     param_hint="--emulator")
        from gbx_gameboy.pyboy_bench import measure_pyboy

        for n in envs:
            click.echo(json.dumps(measure_pyboy(
                image, n, frames, game if game is not None else rom is not None,
                warmup_steps=warmup_steps)))
        return
    from gbx_gameboy.env import REGROUP_CHOICES
    from gbx_gameboy.machine import block_threads_problem, block_warps_problem

    blocks: list[int | None] = list(block_threads) if block_threads else [None]
    for b in blocks:  # every size checked before the first is measured
        problem = block_threads_problem(b, device.startswith("cpu"))
        if problem:
            raise click.BadParameter(problem, param_hint="--block-threads")
    problem = block_warps_problem(block_warps, device.startswith("cpu"))
    if problem:
        raise click.BadParameter(problem, param_hint="--block-warps")
    first = True
    for n in envs:
        for b in blocks:
            record = measure(image, n, frames, device,
                             game if game is not None else rom is not None,
                             cold=cold and first, warmup_steps=warmup_steps, threads=threads,
                             kernel=kernel, draw=draw, block_threads=b,
                             block_warps=block_warps,
                             regroup=REGROUP_CHOICES[regroup])
            first = False
            click.echo(json.dumps(record))
