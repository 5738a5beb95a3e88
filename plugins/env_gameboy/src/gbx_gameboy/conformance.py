"""Run the shared hardware test ROMs (blargg, mooneye, dmg-acid2, ...) and report per ROM.

The ROMs live outside the repository (``$GBX_TESTROMS``, default ``../shared/testroms``
relative to the repository root). One ROM per 1-env batch; the compiled kernel is reused.
The CPU runs the ROMs one after the other; CUDA runs them all at once, each batch on its
own stream (one env runs only some tens of frames per second on a GPU).
``CASES`` lists every ROM of that folder; ``report`` runs them on the CPU and, where a GPU
is present, on CUDA, one record per ROM (the table of docs/emulator.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gbx_gameboy.machine import GameBoyBatch

SER = "SER"  # serial text "Passed" / "Failed"
MEM = "MEM"  # result byte at 0xA000 after the DE B0 61 signature
FIB = "FIB"  # mooneye: serial bytes 3 5 8 13 21 34 on pass, 0x42 x6 on fail
PIC = "PIC"  # the screen equals a reference picture (grey levels) within the budget
NOT_RUN = "not run"

FIB_PASS = bytes([3, 5, 8, 13, 21, 34])
FIB_FAIL = bytes([0x42] * 6)
CHECK_EVERY_FRAMES = 10


@dataclass(frozen=True)
class RomCase:
    path: str  # relative to the test ROM folder
    protocol: str
    budget: int  # frames from 0x0100
    slow: bool = False
    reference: str = ""  # PIC: the reference picture, relative to the test ROM folder

    @property
    def name(self) -> str:
        return self.path.removesuffix(".gb")


@dataclass(frozen=True)
class RomResult:
    case: RomCase
    passed: bool
    frames: int
    detail: str

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "FAIL"


@dataclass(frozen=True)
class RomReport:
    """One ROM on both devices; ``None`` where it was not run."""

    case: RomCase
    cpu: RomResult | None
    cuda: RomResult | None
    cuda_reason: str = ""  # why CUDA was not run
    cpu_kernel: str = "cpu"  # the run kernel's variant in the CPU column (cpu.HOST)

    def to_json(self) -> dict[str, object]:
        def cell(r: RomResult | None, reason: str) -> dict[str, object]:
            if r is None:
                return {"result": NOT_RUN, "frames": 0, "detail": reason}
            return {"result": r.verdict, "frames": r.frames, "detail": r.detail}

        return {"rom": self.case.name, "protocol": self.case.protocol, "slow": self.case.slow,
                "cpu": cell(self.cpu, "not asked for (--device)"), "cpu_kernel": self.cpu_kernel,
                "cuda": cell(self.cuda, self.cuda_reason)}


_CPU = "blargg/cpu_instrs/individual/"
_M = "mooneye/acceptance/"
_E = "mooneye/emulator-only/"

CASES: tuple[RomCase, ...] = (
    RomCase(_CPU + "01-special.gb", SER, 300),
    RomCase(_CPU + "02-interrupts.gb", SER, 120),
    RomCase(_CPU + "03-op sp,hl.gb", SER, 300, slow=True),
    RomCase(_CPU + "04-op r,imm.gb", SER, 360, slow=True),
    RomCase(_CPU + "05-op rp.gb", SER, 420, slow=True),
    RomCase(_CPU + "06-ld r,r.gb", SER, 120),
    RomCase(_CPU + "07-jr,jp,call,ret,rst.gb", SER, 180, slow=True),
    RomCase(_CPU + "08-misc instrs.gb", SER, 120, slow=True),
    RomCase(_CPU + "09-op r,r.gb", SER, 900, slow=True),
    RomCase(_CPU + "10-bit ops.gb", SER, 1320, slow=True),
    RomCase(_CPU + "11-op a,(hl).gb", SER, 1680, slow=True),
    RomCase("blargg/cpu_instrs/cpu_instrs.gb", SER, 5040, slow=True),
    RomCase("blargg/instr_timing/instr_timing.gb", SER, 180),
    RomCase("blargg/mem_timing/individual/01-read_timing.gb", SER, 120, slow=True),
    RomCase("blargg/mem_timing/individual/02-write_timing.gb", SER, 120, slow=True),
    RomCase("blargg/mem_timing/individual/03-modify_timing.gb", SER, 120, slow=True),
    RomCase("blargg/mem_timing/mem_timing.gb", SER, 240, slow=True),
    RomCase("blargg/mem_timing-2/rom_singles/01-read_timing.gb", MEM, 120, slow=True),
    RomCase("blargg/mem_timing-2/rom_singles/02-write_timing.gb", MEM, 120, slow=True),
    RomCase("blargg/mem_timing-2/rom_singles/03-modify_timing.gb", MEM, 120, slow=True),
    RomCase("blargg/mem_timing-2/mem_timing.gb", MEM, 360, slow=True),
    RomCase("blargg/halt_bug.gb", MEM, 240, slow=True),
) + tuple(
    RomCase(_M + p, FIB, b, slow=b > 120)
    for p, b in (
        ("add_sp_e_timing.gb", 120), ("bits/mem_oam.gb", 120), ("bits/reg_f.gb", 120),
        ("boot_div-dmgABCmgb.gb", 120), ("boot_hwio-dmgABCmgb.gb", 120),
        ("boot_regs-dmgABC.gb", 120), ("call_cc_timing.gb", 120), ("call_timing.gb", 120),
        ("call_timing2.gb", 120), ("di_timing-GS.gb", 120), ("div_timing.gb", 120),
        ("ei_sequence.gb", 120), ("halt_ime0_ei.gb", 120),
        ("halt_ime0_nointr_timing.gb", 120), ("halt_ime1_timing.gb", 120),
        ("instr/daa.gb", 120), ("interrupts/ie_push.gb", 120), ("intr_timing.gb", 120),
        ("jp_cc_timing.gb", 120), ("oam_dma/basic.gb", 120), ("oam_dma/sources-GS.gb", 120),
        ("oam_dma_restart.gb", 120), ("oam_dma_timing.gb", 120), ("pop_timing.gb", 120),
        ("ppu/hblank_ly_scx_timing-GS.gb", 180), ("ppu/intr_1_2_timing-GS.gb", 120),
        ("ppu/intr_2_0_timing.gb", 120), ("ppu/intr_2_mode0_timing_sprites.gb", 600),
        ("ppu/intr_2_mode3_timing.gb", 120), ("ppu/intr_2_oam_ok_timing.gb", 120),
        ("ppu/lcdon_write_timing-GS.gb", 240), ("ppu/stat_irq_blocking.gb", 120),
        ("rapid_di_ei.gb", 120), ("ret_timing.gb", 120), ("reti_timing.gb", 120),
        ("rst_timing.gb", 120), ("serial/boot_sclk_align-dmgABCmgb.gb", 120),
        ("timer/div_write.gb", 180), ("timer/tim00.gb", 120),
        ("timer/tim00_div_trigger.gb", 120), ("timer/tim01_div_trigger.gb", 120),
        ("timer/tim10.gb", 120), ("timer/tim11_div_trigger.gb", 120),
        ("timer/tima_reload.gb", 120), ("timer/tma_write_reloading.gb", 120),
    )
) + tuple(
    RomCase(_E + p, FIB, b, slow=b > 120)
    for p, b in (
        ("mbc1/bits_bank1.gb", 360), ("mbc1/bits_bank2.gb", 360), ("mbc1/bits_mode.gb", 360),
        ("mbc1/bits_ramg.gb", 600), ("mbc1/ram_256kb.gb", 180), ("mbc1/ram_64kb.gb", 180),
        ("mbc1/rom_16Mb.gb", 120), ("mbc1/rom_1Mb.gb", 120), ("mbc1/rom_2Mb.gb", 120),
        ("mbc1/rom_4Mb.gb", 120), ("mbc1/rom_512kb.gb", 120), ("mbc1/rom_8Mb.gb", 120),
        ("mbc2/bits_ramg.gb", 600), ("mbc2/bits_romb.gb", 360), ("mbc2/bits_unused.gb", 360),
        ("mbc2/ram.gb", 120), ("mbc2/rom_1Mb.gb", 120), ("mbc2/rom_2Mb.gb", 120),
        ("mbc2/rom_512kb.gb", 120), ("mbc5/rom_16Mb.gb", 120), ("mbc5/rom_1Mb.gb", 120),
        ("mbc5/rom_2Mb.gb", 120), ("mbc5/rom_4Mb.gb", 120), ("mbc5/rom_512kb.gb", 120),
        ("mbc5/rom_8Mb.gb", 120),
    )
) + tuple(
    RomCase("blargg/dmg_sound/rom_singles/" + p, MEM, b, slow=b > 120)
    for p, b in (
        ("01-registers.gb", 180), ("02-len ctr.gb", 960), ("03-trigger.gb", 1620),
        ("04-sweep.gb", 180), ("05-sweep details.gb", 180), ("06-overflow on trigger.gb", 180),
        ("07-len sweep period sync.gb", 120), ("08-len ctr during power.gb", 240),
        ("09-wave read while on.gb", 120), ("10-wave trigger while on.gb", 420),
        ("11-regs after power.gb", 180), ("12-wave write while on.gb", 420),
    )
) + (RomCase("blargg/dmg_sound/dmg_sound.gb", MEM, 3300, slow=True),) + tuple(
    RomCase("blargg/oam_bug/rom_singles/" + p, MEM, b, slow=b > 120)
    for p, b in (
        ("1-lcd_sync.gb", 120), ("2-causes.gb", 120), ("3-non_causes.gb", 240),
        ("4-scanline_timing.gb", 180), ("5-timing_bug.gb", 180), ("6-timing_no_bug.gb", 240),
        ("7-timing_effect.gb", 840), ("8-instr_effect.gb", 480),
    )
) + (RomCase("blargg/oam_bug/oam_bug.gb", MEM, 1980, slow=True),) + (
    # Picture ROMs: dmg-acid2 and sprite_priority draw their final screen within about 11
    # frames; flappyboy has no pass signal, its title screen (rendered by PyBoy) must match.
    RomCase("dmg-acid2/dmg-acid2.gb", PIC, 30, reference="dmg-acid2/reference-dmg.png"),
    RomCase("mooneye/manual-only/sprite_priority.gb", PIC, 30,
            reference="mooneye/manual-only/sprite_priority-dmg.png"),
    RomCase("games/flappyboy/flappyboy.gb", PIC, 60,
            reference="games/flappyboy/reference-pyboy/title-press-start.png"),
)


def testroms_dir() -> Path:
    """Folder of the shared test ROMs: ``$GBX_TESTROMS`` or ``../shared/testroms``.

    The default is relative to the working directory (the repository root, where ``make``
    and CI run); an installed package knows nothing of a checkout.
    """
    env = os.environ.get("GBX_TESTROMS")
    return Path(env) if env else Path("..") / "shared" / "testroms"


def _verdict(case: RomCase, batch: object) -> tuple[bool | None, str]:
    """(True/False, detail) once the ROM has reported, (None, detail) while running."""
    from gbx_gameboy.machine import GameBoyBatch

    assert isinstance(batch, GameBoyBatch)
    fault = int(batch.locked[0])
    if fault != 0:
        what = "illegal opcode" if fault == 1 else "cycle budget used up"
        return False, f"locked ({what}) at PC=0x{batch.regs(0)['pc']:04X}"
    if case.protocol == SER:
        text = batch.serial_output(0).decode("latin-1")
        if "Passed" in text:
            return True, "Passed"
        if "Failed" in text:
            return False, text.strip().replace("\n", " ")[-200:]
        return None, text.strip().replace("\n", " ")[-80:]
    if case.protocol == PIC:
        return None, "picture not reached yet"
    if case.protocol == MEM:
        sig = [batch.read_memory(0, a) for a in (0xA001, 0xA002, 0xA003)]
        if sig != [0xDE, 0xB0, 0x61]:
            return None, "no signature yet"
        code = batch.read_memory(0, 0xA000)
        if code == 0x80:
            return None, "running"
        return code == 0, f"result code {code}"
    out = batch.serial_output(0)
    if FIB_PASS in out:
        return True, "Fibonacci registers"
    if len(out) >= 6:
        if out[:6] == FIB_PASS:
            return True, "Fibonacci registers"
        tag = " (fail signature)" if out[:6] == FIB_FAIL else ""
        return False, f"serial {out[:6].hex(' ')}{tag}"
    return None, f"serial {out.hex(' ')}"


@dataclass
class _Run:
    """One ROM on its own 1-env batch: frames run so far, and its result once known."""

    case: RomCase
    batch: GameBoyBatch
    want: object | None  # PIC: the reference picture
    frames: int = 0

    def launch(self) -> None:
        """Queue the next CHECK_EVERY_FRAMES frames (fewer at the budget's end)."""
        step = min(CHECK_EVERY_FRAMES, self.case.budget - self.frames)
        self.batch.run_frames(step, render_last=self.want is not None)
        self.frames += step

    def result(self) -> RomResult | None:
        """The result once the ROM reported or its budget is spent, else None (the
        launched frames must be done: after a device synchronisation)."""
        verdict, detail = _verdict(self.case, self.batch)
        if self.want is not None:
            verdict, detail = _picture_verdict(self.batch, self.want,
                                               self.frames >= self.case.budget)
        if verdict is not None:
            return RomResult(self.case, verdict, self.frames, detail)
        if self.frames >= self.case.budget:
            return RomResult(self.case, False, self.frames,
                             f"no result after {self.frames} frames: {detail}")
        return None


def run_case(case: RomCase, device: str = "cpu", root: Path | None = None,
             kernel: str = "auto") -> RomResult:
    """Run one ROM until it reports or its frame budget is spent (``kernel``: the run
    kernel's variant, see ``GameBoyBatch``)."""
    return run_together([case], device, root, kernel=kernel)[0]


def run_together(
    cases: Iterable[RomCase], device: str = "cpu", root: Path | None = None,
    on_result: Callable[[RomResult], None] | None = None, kernel: str = "auto",
) -> list[RomResult]:
    """Run every case at once, one 1-env batch each; results in the order of ``cases``.

    Each round launches the next CHECK_EVERY_FRAMES frames of every ROM still running,
    synchronises the device once and takes every verdict, dropping the ROMs that are done,
    so each ROM's result and frame count are those of running it alone. On CUDA every
    batch launches on its own stream: the one-thread launches of all ROMs run side by side
    and the whole run takes about as long as the slowest ROM. On the CPU the launches of a
    round run one after the other. ``on_result`` sees each result as it comes (progress).
    """
    from gbx_gameboy.machine import GameBoyBatch
    from gbx_gameboy.warp_setup import wp

    folder = root or testroms_dir()
    runs = [_Run(c, GameBoyBatch(folder / c.path, 1, device, kernel=kernel),
                 _reference(folder / c.reference) if c.protocol == PIC else None)
            for c in cases]
    on_gpu = not runs[0].batch.device.startswith("cpu") if runs else False
    streams = [wp.Stream(r.batch.device) if on_gpu else None for r in runs]
    results: list[RomResult | None] = [None] * len(runs)
    live = list(range(len(runs)))
    if runs:
        wp.synchronize_device(runs[0].batch.device)  # the batches are set up
    while live:
        for i in live:
            # No wait on the previous stream: the rounds are ordered by the sync below.
            with wp.ScopedStream(streams[i], sync_enter=False):
                runs[i].launch()
        wp.synchronize_device(runs[0].batch.device)
        running = []
        for i in live:
            result = results[i] = runs[i].result()
            if result is None:
                running.append(i)
            elif on_result is not None:
                on_result(result)
        live = running
    return [r for r in results if r is not None]


def _reference(path: Path) -> object:
    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(path).convert("L"))


def _picture_verdict(batch: object, want: object, last: bool) -> tuple[bool | None, str]:
    """Equal to the reference: pass; else wait, and at the budget's end fail."""
    import numpy as np

    from gbx_gameboy.machine import GameBoyBatch
    from gbx_gameboy.media import grey_levels

    assert isinstance(batch, GameBoyBatch)
    bad = int((grey_levels(batch.fb[0].cpu()) != np.asarray(want)).sum())
    if bad == 0:
        return True, "picture equals the reference"
    return (False if last else None), f"{bad} pixels differ from the reference"


def select(names: Iterable[str] | None = None, include_slow: bool = True) -> list[RomCase]:
    cases = [c for c in CASES if include_slow or not c.slow]
    if names:
        wanted = list(names)
        cases = [c for c in cases if any(w in c.path for w in wanted)]
    return cases


def run_all(
    cases: Iterable[RomCase], device: str = "cpu", root: Path | None = None,
    on_result: Callable[[RomResult], None] | None = None, kernel: str = "auto",
) -> list[RomResult]:
    """Run every case in order, one after the other (the CPU's way: each ROM's launches
    use the cores on their own); ``on_result`` sees each result as it comes (progress)."""
    results = []
    for case in cases:
        results.append(run_case(case, device, root, kernel))
        if on_result is not None:
            on_result(results[-1])
    return results


def cuda_missing(device: str) -> str:
    """Why CUDA cannot run here ('' when it can)."""
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device"
    return ""


def report(
    cases: Iterable[RomCase], device: str = "all", root: Path | None = None,
    on_result: Callable[[RomResult], None] | None = None, cpu_kernel: str = "auto",
) -> list[RomReport]:
    """Every case on the CPU and/or CUDA: ``device`` is "all" (CPU, then CUDA where a GPU is
    present), "cpu", or a CUDA device ("cuda", "cuda:N"). The CPU runs the ROMs one after
    the other (``run_all``), CUDA all at once (``run_together``) with the run kernel's
    CUDA variant; both give the same results and frame counts. ``cpu_kernel="cuda"`` runs
    the CUDA variant of the run kernel on the CPU device (the GPU's code path, checked
    without a GPU)."""
    cases = list(cases)
    on_cpu = device in ("all", "cpu")
    gpu = "cuda" if device == "all" else device
    reason = "not asked for (--device cpu)" if device == "cpu" else cuda_missing(gpu)
    on_gpu = device != "cpu" and reason == ""
    none: list[RomResult | None] = [None] * len(cases)
    cpu: list[RomResult | None] = (list(run_all(cases, "cpu", root, on_result, cpu_kernel))
                                   if on_cpu else none)
    # The CUDA column runs the CUDA variant, the code of a GPU's large batches (a one-env
    # batch on a GPU would pick the CPU variant, which the CPU column already runs).
    cuda: list[RomResult | None] = (list(run_together(cases, gpu, root, on_result, "cuda"))
                                    if on_gpu else none)
    variant = "cpu" if cpu_kernel == "auto" else cpu_kernel
    return [RomReport(c, a, b, reason, variant)
            for c, a, b in zip(cases, cpu, cuda, strict=True)]


def table_cell(result: RomResult | None) -> str:
    return NOT_RUN if result is None else result.verdict


def format_table(reports: list[RomReport], cpu: str = "CPU") -> str:
    """The markdown table of docs/emulator.md ("Conformance"), one row per ROM; ``cpu``
    names the CPU column (and its lines)."""
    lines = [f"| ROM | {cpu} | CUDA |", "|---|---|---|"]
    for r in reports:
        lines.append(f"| {r.case.name} | {table_cell(r.cpu)} | {table_cell(r.cuda)} |")
    lines.append("")
    for r in reports:
        for device, x in ((cpu, r.cpu), ("CUDA", r.cuda)):
            if x is not None and not x.passed:
                lines.append(f"FAIL {r.case.name} ({device}): {x.detail}")
    # The totals last, for scripts that read the final line.
    for name, column in ((cpu, [r.cpu for r in reports]), ("CUDA", [r.cuda for r in reports])):
        ran = [x for x in column if x is not None]
        total = f"{sum(x.passed for x in ran)}/{len(ran)} passed" if ran else NOT_RUN
        lines.append(f"{name}: {total}")
    return "\n".join(lines)
