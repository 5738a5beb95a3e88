"""``gbx gameboy ...``: run a ROM headless, run the conformance ROMs, build the bundled game."""

from __future__ import annotations

import json
import sys

import click

from gbx_gameboy.game.build import build_roms_command

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
@click.option("--screenshot", type=click.Path(dir_okay=False), default=None,
              help="write env 0's last frame as a PNG (DMG grey shades)")
@click.option("--state", default=None, help="start from a gbx or PyBoy savestate")
@click.option("--press", default="", help='timed button presses, e.g. "START@60,A@120"')
def run(
    rom: str, frames: int | None, cycles: int | None, device: str, envs: int, serial: bool,
    regs: bool, screenshot: str | None, state: str | None, press: str,
) -> None:
    """Run ROM headless and print serial output and/or final registers."""
    from gbx_gameboy.cartridge import RomError, parse_cartridge

    try:
        cart = parse_cartridge(rom)
    except RomError as exc:
        _fail(str(exc))
    if envs < 1:
        _fail(f"--envs must be >= 1, got {envs}")
    for flag, value in (("--frames", frames), ("--cycles", cycles)):
        if value is not None and value < 1:
            _fail(f"{flag} must be >= 1, got {value}")
    from gbx.memory import check_memory
    from gbx.resolve import resolve_device
    from gbx_gameboy.machine import GameBoyBatch, batch_bytes, regroups
    from gbx_gameboy.warp_setup import import_warp

    # Device and memory are checked before Warp allocates: one line, exit 2.
    target = resolve_device(device)
    on_cpu = target.type == "cpu"
    sm_count = None if on_cpu else import_warp().get_device(str(target)).sm_count
    check_memory(batch_bytes(cart, envs, on_cpu=on_cpu, regroup=regroups(envs, sm_count)), target,
                 algo="gbx gameboy run", fix="lower --envs")
    batch = GameBoyBatch(cart, envs, device)
    presses = _prepare(batch, state, press)
    if cycles is not None:
        batch.run_cycles(cycles)
    else:
        from gbx_gameboy.actions import run_with_presses

        run_with_presses(batch, 60 if frames is None else frames, presses,
                         render_last=screenshot is not None)
    batch.synchronize()
    if screenshot is not None:
        from gbx_gameboy.media import save_png

        click.echo(f"screenshot: {save_png(batch.fb[0], screenshot, scale=2)}", err=True)
    if serial or not regs:
        click.echo(batch.serial_output(0).decode("latin-1"))
    if regs:
        out = batch.regs(0)
        out["frames"] = int(batch.frame_count[0])
        out["locked_envs"] = int((batch.locked != 0).sum())
        click.echo(json.dumps(out))


@gameboy.command()
@click.option("--device", default="all", show_default=True,
              help="all (the CPU, then CUDA where a GPU is present) | cpu | cuda | cuda:N")
@click.option("--json", "as_json", is_flag=True,
              help="print one JSON list, one record per ROM with its cpu and cuda results")
@click.option("--fast", is_flag=True, help="only the quick ROMs (no 'slow' ones)")
@click.option("--quiet", is_flag=True, help="no progress bar on stderr")
@click.option("--kernel", type=click.Choice(["auto", "cuda"]), default="auto",
              show_default=True,
              help="run-kernel variant on the CPU device: its own (auto) or the CUDA one "
                   "(the GPU's code path, checked without a GPU)")
@click.argument("names", nargs=-1)
def conformance(device: str, as_json: bool, fast: bool, quiet: bool, kernel: str,
                names: tuple[str, ...]) -> None:
    """Run the shared test ROMs (optionally only those matching NAMES) on the CPU and CUDA;
    print the table of docs/emulator.md (CUDA "not run" without a GPU).

    The CPU runs the ROMs one after the other. CUDA runs every selected ROM at once, each
    on its own stream and checked every 10 frames, so it takes about as long as the
    slowest ROM; results and frame counts are the same either way."""
    from gbx.progress import progress
    from gbx_gameboy import conformance as conf

    if device not in ("all", "cpu") and not device.startswith("cuda"):
        _fail(f"--device must be all, cpu, cuda or cuda:N, got {device!r}")
    if device.startswith("cuda"):
        from gbx.resolve import resolve_device

        resolve_device(device)  # an absent GPU is one line, exit 2
    root = conf.testroms_dir()
    if not root.is_dir():
        _fail(f"test ROM folder not found: {root} (set GBX_TESTROMS)")
    cases = conf.select(names or None, include_slow=not fast)
    runs = len(cases) * (2 if device == "all" and not conf.cuda_missing("cuda") else 1)
    with progress("conformance ROMs", total=runs, quiet=quiet) as bar:

        def done(result: conf.RomResult) -> None:
            bar.update(description=f"conformance ROMs ({result.case.name}: {result.verdict})")
            bar.advance()

        reports = conf.report(cases, device, root, on_result=done, cpu_kernel=kernel)
    if as_json:
        click.echo(json.dumps([r.to_json() for r in reports]))
    else:
        click.echo(conf.format_table(reports, "CPU" if kernel == "auto" else "CPU (CUDA variant)"))


@gameboy.command()
@click.argument("rom", type=click.Path(dir_okay=False))
@click.option("--frames", type=int, default=10_000, show_default=True,
              help="frames to play after the common start")
@click.option("--every", type=int, default=60, show_default=True,
              help="compare the two screens every this many frames")
@click.option("--buttons", default=None,
              help='script, e.g. "START,A,,RIGHT": each entry held 6 frames, released 6, '
                   "repeated (default: a random walk from --seed)")
@click.option("--seed", type=int, default=0, show_default=True,
              help="seed of the default random-walk script")
@click.option("--warmup", type=int, default=400, show_default=True,
              help="frames PyBoy plays (through its boot ROM) before both start")
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N")
def lockstep(rom: str, frames: int, every: int, buttons: str | None, seed: int, warmup: int,
             device: str) -> None:
    """Play ROM in PyBoy and gbx from the same state with the same buttons; print one JSON
    record of the screen comparisons (exit 1 when a screen differs)."""
    from gbx_gameboy.cartridge import RomError, parse_cartridge

    try:
        parse_cartridge(rom)
    except RomError as exc:
        _fail(str(exc))
    if frames < 1 or every < 1 or warmup < 1:
        _fail("--frames, --every and --warmup must be >= 1")
    from gbx.resolve import resolve_device

    resolve_device(device)  # an absent GPU is one line, exit 2
    try:
        import pyboy  # noqa: F401
    except ImportError:
        _fail("gbx gameboy lockstep needs the pyboy package (pip install pyboy)")
    from gbx_gameboy import lockstep as ls

    try:
        script = ls.parse_script(buttons) if buttons is not None else ls.random_script(seed)
    except ValueError as exc:
        _fail(str(exc))
    result = ls.run_lockstep(rom, frames, every, script, warmup, device)
    click.echo(json.dumps(result.to_json()))
    if result.differing:
        sys.exit(1)


@gameboy.command("kernel-digest")
@click.option("--arch", type=int, default=None, help="CUDA architecture (default: 90)")
@click.option("--ptxas", "with_ptxas", is_flag=True,
              help="also assemble the PTX with ptxas -v and print the run kernel's registers, "
                   "stack frame and spill stores/loads, for the CUDA variant (run_kernel) "
                   "and for the CPU variant as a GPU runs it for small batches "
                   "(run_kernel_host) (needs ptxas: the CUDA toolkit's or "
                   "the pip wheel nvidia-cuda-nvcc-cu12's; with nvdisasm, also from the "
                   "toolkit or the wheel nvidia-cuda-nvdisasm, the CUDA variant's "
                   "always-run path: instructions and local loads/stores every emulated "
                   "instruction executes)")
@click.option("--ptx-out", type=click.Path(dir_okay=False), default=None,
              help="write the PTX to this file")
def kernel_digest(arch: int | None, with_ptxas: bool, ptx_out: str | None) -> None:
    """SHA-256 of the CUDA run kernel's PTX, and whether it is the recorded one.

    Needs no GPU. Exit 0 when unchanged, 1 when the CUDA kernel differs from the digest
    recorded in gbx_gameboy.kernel_digest (update it there when that is intended)."""
    from gbx_gameboy import kernel_digest as kd

    arch = kd.DIGEST_ARCH if arch is None else arch
    if with_ptxas and kd.find_ptxas() is None:
        _fail("--ptxas: ptxas not found; put the CUDA toolkit's bin directory on PATH, set "
              "CUDA_HOME, or pip install nvidia-cuda-nvcc-cu12 (and nvidia-cuda-nvdisasm for "
              "the loop path)")
    ptx = kd.cuda_ptx(arch)
    digest = kd.sha256_of_ptx(ptx)  # of the PTX compiled once, also for --ptxas
    same = digest == kd.CUDA_PTX_SHA256 if arch == kd.DIGEST_ARCH else None
    record: dict[str, object] = {"arch": arch, "ptx_sha256": digest,
                                 "recorded": kd.CUDA_PTX_SHA256, "unchanged": same}
    if ptx_out:
        from gbx.config import write_atomic

        write_atomic(ptx_out, ptx.replace("\0", ""))  # without the C string's NUL
    if with_ptxas:
        record["run_kernel"] = kd.run_ptxas(ptx, arch).to_json()
        host = kd.run_ptxas(kd.cuda_ptx(arch, variant="cpu"), arch,
                            entry=kd.RUN_KERNEL_HOST_ENTRY, with_loop_path=False)
        record["run_kernel_host"] = host.to_json(kd.RUN_KERNEL_HOST_ENTRY)
    click.echo(json.dumps(record))
    if same is False:
        sys.exit(1)


@gameboy.command("sass-lines")
@click.argument("profile", type=click.Path(exists=True, dir_okay=False))
@click.option("--variant", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="the run kernel's variant that was profiled (the launch plan runs the "
                   "CPU variant for small GPU batches; a large one runs whichever it timed "
                   "faster, the CUDA variant until it has timed them)")
@click.option("--by", type=click.Choice(["outer", "inner"]), default="outer",
              show_default=True,
              help="charge each instruction to the run kernel's own line (outer) or to the "
                   "innermost line of the package's code, inside the helper it calls (inner)")
@click.option("--per", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True,
              help="divide the executed counts by this, e.g. the env-frames the profiled "
                   "launch ran")
@click.option("--top", type=click.IntRange(min=1), default=40, show_default=True,
              help="lines to print")
@click.option("--json", "as_json", is_flag=True, help="one JSON record instead of a table")
def sass_lines_command(profile: str, variant: str, by: str, per: float, top: int,
                       as_json: bool) -> None:
    """Nsight Compute's per-instruction profile of the run kernel, added up per Python line.

    PROFILE is the SASS source page of one launch of the run kernel, profiled on a GPU with
    `ncu --section SourceCounters --kernel-name regex:run_kernel --launch-count 1 -o R ...`
    and exported with `ncu -i R.ncu-rep --page source --csv --print-source sass` (plain or
    gzip-compressed). The
    kernel is built here from this source tree with line information (no GPU; needs
    ptxas and nvdisasm, as --ptxas of kernel-digest does) and lined up with the profile
    instruction by instruction, so profile the same source tree. Prints, per line, its
    share of the executed warp instructions and of the stall samples, its executed
    instructions and local-memory ones (spills, stack arrays) divided by --per, and how
    many threads of a warp were active on its instructions on average; and, for the whole
    kernel, the share of warp instructions run with at most 8 threads active (a quarter
    of a warp: code run for a few threads while the others wait)."""
    from pathlib import Path

    from gbx_gameboy import kernel_digest as kd
    from gbx_gameboy import sass_lines as sl

    try:
        raw = Path(profile).read_bytes()
        if raw[:2] == b"\x1f\x8b":  # gzip: profiles are large, and kept compressed
            import gzip

            raw = gzip.decompress(raw)
        profiled = sl.read_ncu_source_csv(raw.decode())
    except (ValueError, UnicodeDecodeError, OSError, EOFError) as exc:
        _fail(f"{profile}: {exc}")
    if kd.find_ptxas() is None or kd.find_cuda_tool("nvdisasm") is None:
        _fail("sass-lines: ptxas and nvdisasm not found; put the CUDA toolkit's bin directory "
              "on PATH, set CUDA_HOME, or pip install nvidia-cuda-nvcc-cu12 "
              "nvidia-cuda-nvdisasm")
    entry = kd.RUN_KERNEL_ENTRY if variant == "cuda" else kd.RUN_KERNEL_HOST_ENTRY
    sass = kd.sass_with_lines(kd.cuda_ptx(variant=variant, lineinfo=True))
    built = sl.read_sass_lines(sass, entry)
    from importlib.resources import files as package_files

    package = package_files("gbx_gameboy")
    files = frozenset(p.name for p in package.iterdir() if p.name.endswith(".py"))
    costs, matched = sl.line_costs(built, profiled, files, by)
    executed = sum(c.executed for c in costs) or 1
    samples = sum(c.samples for c in costs) or 1
    threads = sum(c.threads for c in costs) / executed
    sparse = sl.sparse_share(profiled, sl.SPARSE_THREADS)
    sources: dict[str, list[str]] = {}

    def text(line: str) -> str:
        name, _, number = line.partition(":")
        if name not in files:
            return ""
        rows = sources.setdefault(name, (package / name).read_text().splitlines())
        return rows[int(number) - 1].strip() if 0 < int(number) <= len(rows) else ""

    top_costs = costs[:top]
    if as_json:
        lines = [{"line": c.line, "executed_share": c.executed / executed,
                  "samples_share": c.samples / samples, "executed": c.executed / per,
                  "local": c.local / per, "threads": c.threads / max(c.executed, 1),
                  "source": text(c.line)} for c in top_costs]
        click.echo(json.dumps({"variant": variant, "by": by, "per": per,
                               "instructions": len(profiled), "matched": matched,
                               "executed": executed / per, "threads": threads,
                               "sparse_share": sparse, "lines": lines}))
        return
    click.echo(f"{variant} variant, {len(profiled)} instructions profiled, {matched} matched "
               f"to the build; executed per unit: {executed / per:,.0f}")
    click.echo(f"threads active per warp instruction: {threads:.2f}; warp instructions with "
               f"at most {sl.SPARSE_THREADS} active: {100 * sparse:.1f}%")
    click.echo(f"{'line':<20} {'exec %':>7} {'stall %':>7} {'executed':>10} {'local':>9} "
               f"{'threads':>7}  source")
    for c in top_costs:
        click.echo(f"{c.line:<20} {100 * c.executed / executed:7.2f} "
                   f"{100 * c.samples / samples:7.2f} {c.executed / per:10.1f} "
                   f"{c.local / per:9.1f} {c.threads / max(c.executed, 1):7.2f}  "
                   f"{text(c.line)[:70]}")


def _prepare(batch: object, state: str | None, press: str) -> list[tuple[str, int]]:
    """Load ``--state`` into every env and parse ``--press``; one-line errors on bad input."""
    from gbx_gameboy.actions import parse_presses
    from gbx_gameboy.savestate import SaveStateError

    try:
        presses = parse_presses(press)
    except ValueError as exc:
        _fail(str(exc))
    if state:
        from gbx_gameboy.env import load_start_state

        try:
            load_start_state(batch, state)
        except SaveStateError as exc:
            _fail(str(exc))
    return presses


@gameboy.command()
@click.argument("rom", type=click.Path(dir_okay=False))
@click.option("--frames", type=int, default=120, show_default=True, help="frames to run")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="GIF file to write")
@click.option("--every", type=int, default=2, show_default=True,
              help="keep one frame in this many (the GIF's frame rate is 60/every)")
@click.option("--scale", type=int, default=2, show_default=True, help="pixel scale")
@click.option("--state", default=None, help="start from a gbx or PyBoy savestate")
@click.option("--press", default="", help='timed button presses, e.g. "START@60,A@120"')
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N")
def gif(
    rom: str, frames: int, out: str, every: int, scale: int, state: str | None, press: str,
    device: str,
) -> None:
    """Run ROM and write env 0's screen as an animated GIF."""
    from gbx_gameboy.cartridge import RomError, parse_cartridge

    try:
        cart = parse_cartridge(rom)
    except RomError as exc:
        _fail(str(exc))
    if frames < 1 or every < 1 or scale < 1:
        _fail("--frames, --every and --scale must be >= 1")
    from gbx_gameboy.machine import GameBoyBatch
    from gbx_gameboy.media import record_frames, save_gif

    batch = GameBoyBatch(cart, 1, device)
    presses = _prepare(batch, state, press)
    shots = record_frames(batch, frames, every=every, presses=presses)
    path = save_gif(shots, out, scale=scale, frame_ms=max(1, round(1000 * every / 60)))
    click.echo(f"gif: {path} ({len(shots)} frames)")


# The bundled game's assembler build (its own module keeps the assembler out of the rest).
gameboy.add_command(build_roms_command)
