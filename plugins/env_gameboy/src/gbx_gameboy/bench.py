"""``gbx bench emulator``: emulated frames/s and instructions/s of the Warp Game Boy."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import click

STEP_FRAMES = 24  # frames per env step (one launch), as the RL envs use
BOOT_FRAMES = 120
WARMUP_STEPS = 3

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


def busy_rom() -> bytes:
    """The busy micro-ROM, assembled with the project's assembler."""
    from gbx_gameboy.asm import assemble

    return assemble(BUSY_SOURCE)


def _versions() -> dict[str, str]:
    import torch

    from gbx_gameboy.warp_setup import import_warp

    wp = import_warp()

    return {"warp": wp.config.version, "torch": torch.__version__}


def measure(
    rom: bytes | str, envs: int, frames: int, device: str, game: bool, seed: int = 0,
    cold: bool = False,
) -> dict[str, object]:
    """Run the benchmark and return its JSON record (compile and warm-up excluded from rate)."""
    import torch

    from gbx_gameboy.warp_setup import import_warp

    wp = import_warp()
    if cold:
        wp.config.kernel_cache_dir = tempfile.mkdtemp(prefix="gbx-warp-cache-")
    from gbx_gameboy.machine import GameBoyBatch

    batch = GameBoyBatch(rom, envs, device)
    compile_s = batch.compile()
    tdev = "cuda" if batch.device.startswith("cuda") else "cpu"
    gen = torch.Generator(device="cpu").manual_seed(seed)
    buttons_all = [0, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20]

    def random_buttons() -> torch.Tensor:
        idx = torch.randint(0, len(buttons_all), (envs,), generator=gen)
        return torch.tensor(buttons_all, dtype=torch.int32)[idx].to(tdev)

    def step() -> None:
        if game:
            batch.step_frames(random_buttons(), STEP_FRAMES, release_after=STEP_FRAMES // 2)
        else:
            batch.run_frames(STEP_FRAMES, render_last=True)

    if game:
        batch.run_frames(BOOT_FRAMES)
        start = torch.full((envs,), 0x80, dtype=torch.int32, device=tdev)
        batch.step_frames(start, STEP_FRAMES, release_after=5)
    for _ in range(WARMUP_STEPS):
        step()
    batch.synchronize()
    n_steps = max(1, frames // STEP_FRAMES)
    i0 = int(batch.instruction_count.sum())
    t0 = time.perf_counter()
    for _ in range(n_steps):
        step()
    batch.synchronize()
    run_s = time.perf_counter() - t0
    instrs = int(batch.instruction_count.sum()) - i0
    env_frames = n_steps * STEP_FRAMES * envs
    return {
        "bench": "emulator",
        "rom": rom if isinstance(rom, str) else "busy-micro-rom",
        "workload": "game-random-buttons" if game else "busy-loop",
        "envs": envs,
        "frames_per_env": n_steps * STEP_FRAMES,
        "device": batch.device,
        "frames_per_s": env_frames / run_s,
        "instructions_per_s": instrs / run_s,
        "run_s": run_s,
        "compile_s": compile_s,
        "compile_cold": cold,
        "locked_envs": int(batch.locked.sum()),
        **_versions(),
    }


@click.command()
@click.option("--rom", default=None, help="ROM path (default: the built-in busy micro-ROM)")
@click.option("--envs", type=int, default=64, show_default=True)
@click.option("--frames", type=int, default=240, show_default=True,
              help="measured frames per env (after warm-up), in steps of 24")
@click.option("--device", default="cpu", show_default=True)
@click.option("--game/--no-game", default=None,
              help="press START then random buttons each step (default: on when --rom given)")
@click.option("--cold", is_flag=True, help="compile into an empty kernel cache (cold compile time)")
def emulator_bench(
    rom: str | None, envs: int, frames: int, device: str, game: bool | None, cold: bool
) -> None:
    """Emulated frames/s and instructions/s; prints one JSON record."""
    from gbx_gameboy.cartridge import RomError, parse_cartridge

    if rom is not None:
        if not Path(rom).is_file():
            raise click.BadParameter(f"ROM file not found: {rom}", param_hint="--rom")
        try:
            parse_cartridge(rom)
        except RomError as exc:
            raise click.BadParameter(str(exc), param_hint="--rom") from exc
    image: bytes | str = os.fspath(rom) if rom else busy_rom()
    record = measure(image, envs, frames, device, game if game is not None else rom is not None,
                     cold=cold)
    click.echo(json.dumps(record))
