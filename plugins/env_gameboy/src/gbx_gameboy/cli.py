"""``gbx gameboy ...``: run a ROM headless, run the conformance ROMs."""

from __future__ import annotations

import json
import sys

import click

EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
    click.echo(f"gbx: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


@click.group()
def gameboy() -> None:
    """The Warp Game Boy emulator."""


@gameboy.command()
@click.argument("rom", type=click.Path(dir_okay=False))
@click.option("--frames", type=int, default=None, help="frames to run (default 60)")
@click.option("--cycles", type=int, default=None, help="T-cycles to run instead of frames")
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N")
@click.option("--envs", type=int, default=1, show_default=True, help="number of parallel envs")
@click.option("--serial", is_flag=True, help="print what env 0 sent over the serial port")
@click.option("--regs", is_flag=True, help="print env 0's final registers as JSON")
def run(
    rom: str, frames: int | None, cycles: int | None, device: str, envs: int, serial: bool,
    regs: bool,
) -> None:
    """Run ROM headless and print serial output and/or final registers."""
    from gbx_gameboy.cartridge import RomError, parse_cartridge

    try:
        cart = parse_cartridge(rom)
    except RomError as exc:
        _fail(str(exc))
    if envs < 1:
        _fail(f"--envs must be >= 1, got {envs}")
    from gbx_gameboy.machine import GameBoyBatch

    batch = GameBoyBatch(cart, envs, device)
    if cycles is not None:
        batch.run_cycles(cycles)
    else:
        batch.run_frames(60 if frames is None else frames)
    batch.synchronize()
    if serial or not regs:
        click.echo(batch.serial_output(0).decode("latin-1"))
    if regs:
        out = batch.regs(0)
        out["frames"] = int(batch.frame_count[0])
        out["locked_envs"] = int(batch.locked.sum())
        click.echo(json.dumps(out))


@gameboy.command()
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N")
@click.option("--json", "as_json", is_flag=True, help="print one JSON list of results")
@click.option("--fast", is_flag=True, help="only the quick ROMs (no 'slow' ones)")
@click.argument("names", nargs=-1)
def conformance(device: str, as_json: bool, fast: bool, names: tuple[str, ...]) -> None:
    """Run the shared blargg/mooneye test ROMs (optionally only those matching NAMES)."""
    from gbx_gameboy import conformance as conf

    root = conf.testroms_dir()
    if not root.is_dir():
        _fail(f"test ROM folder not found: {root} (set GBX_TESTROMS)")
    results = conf.run_all(conf.select(names or None, include_slow=not fast), device, root)
    if as_json:
        click.echo(json.dumps([
            {"rom": r.case.name, "passed": r.passed, "frames": r.frames, "detail": r.detail}
            for r in results
        ]))
    else:
        click.echo(conf.format_table(results))
