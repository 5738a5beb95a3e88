"""GameBoyBatch: N Game Boys running one ROM in lockstep-free parallel on a Warp device."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import numpy as np
import torch

from gbx_gameboy import layout as L
from gbx_gameboy.apu import apu_power_on_rows
from gbx_gameboy.cartridge import Cartridge, RomError, load_rom_bytes, parse_cartridge
from gbx_gameboy.cpu import (
    LAUNCH_TIME_LIMIT,
    MAX_FRAMES_PER_LAUNCH,
    RUN_BLOCK_DIM,
    RUN_CYCLES,
    RUN_FRAMES,
    draw_pending_kernel,
    run_kernel,
    run_kernel_host,
    store_gb,
    store_gb_host,
)
from gbx_gameboy.cpu_threads import ChunkedLaunch, chunk_bounds, resolve_threads
from gbx_gameboy.decode import (
    PRE_ENTRY_BYTES,
    decode_table,
    rom_fused_entries,
    rom_predecode_entries,
)
from gbx_gameboy.kstate import GB
from gbx_gameboy.phase_clock import CLOCK_ROWS, PHASE_CLOCKS
from gbx_gameboy.regroup import Regrouper
from gbx_gameboy.regroup import gather_tiled as _regroup_kernel
from gbx_gameboy.tiles import env_rows, row_of_envs
from gbx_gameboy.variant_timing import VariantClock
from gbx_gameboy.warp_setup import wp

BOOT_ROM_BYTES = 256
DEFAULT_SERIAL_CAPACITY = 1024
# Launch windows are measured in int32 cycles and must stay below layout.NEVER (about
# 1.07e9 cycles); longer requests are split (frames: see cpu.BUDGET_CYCLES_PER_FRAME).
MAX_CYCLES_PER_LAUNCH = MAX_FRAMES_PER_LAUNCH * L.CYCLES_PER_FRAME
assert MAX_CYCLES_PER_LAUNCH < LAUNCH_TIME_LIMIT
# Run-kernel variants (cpu.HOST): the one for the batch's device, either by name on either
# device (to compare what each variant's code costs on the other), or the faster of the
# two as timed on the batch's own launches (variant_timing.py; "auto" does that on a GPU
# where the launch plan picks the CUDA variant).
KERNEL_VARIANTS = ("auto", "cpu", "cuda", "measure")
# The two variants: their run kernels and the kernels that store the batch struct for
# their out-of-line helpers.
_VARIANT_KERNELS = {"cpu": (run_kernel_host, store_gb_host), "cuda": (run_kernel, store_gb)}
# Game Boys per warp of a GPU launch of the run kernel (``block_threads``; the other lanes
# of the warp stay idle): fewer Game Boys share (and wait for) one instruction stream, and
# a batch spreads over more warps and SMs (cpu.RUN_BLOCK_DIM is a full warp).
BLOCK_THREADS = (1, 2, 4, 8, 16, 32)
# Warps of the run kernel an SM holds at once: its 255 registers per thread are allocated
# as 256 per lane of a warp, whatever the warp's live lanes, and an SM has 65,536.
RESIDENT_WARPS_PER_SM = 65536 // (256 * 32)
# Up to this many Game Boys per warp, the kernel's CPU variant is the faster one on a GPU:
# alone in its warp a thread runs its inner loop and short lanes at full speed, while
# among many threads their different paths run one after the other (docs/emulator.md,
# "Launch plan on a GPU").
CPU_VARIANT_MAX_WARP_THREADS = 4
# From this many Game Boys per warp on, a GPU batch regroups its envs by the work of
# their last launch (regroup.py, ``GameBoyBatch(regroup=None)``): with fewer, a warp's
# few threads rarely differ enough to pay for the copies.
REGROUP_MIN_WARP_THREADS = 8


def regroups_with(num_envs: int, block_threads: int | None) -> bool:
    """Whether a batch of ``num_envs`` launched with ``block_threads`` Game Boys per warp
    regroups by default: with at least ``REGROUP_MIN_WARP_THREADS`` and more than one
    warp's worth (None: the CPU device, where a thread runs its envs one after another)."""
    return block_threads is not None and num_envs > block_threads >= REGROUP_MIN_WARP_THREADS


def regroups(num_envs: int, sm_count: int | None) -> bool:
    """``regroups_with`` for the launch plan of a GPU of ``sm_count`` SMs (None: the CPU
    device)."""
    return sm_count is not None and regroups_with(num_envs, launch_plan(num_envs, sm_count)[1])


def launch_plan(num_envs: int, sm_count: int) -> tuple[str, int]:
    """The run kernel's variant and Game Boys per warp for ``num_envs`` Game Boys on a GPU
    of ``sm_count`` SMs (``kernel="auto"``).

    Each thread runs one Game Boy for a whole launch and each warp holds its SM's issue
    slots until its threads finish, so the batch goes fastest when it is resident at once
    in as many warps as the GPU holds, with as few Game Boys sharing a warp as that allows:
    the smallest number per warp (a power of two up to 32) that fits the batch in
    ``sm_count * RESIDENT_WARPS_PER_SM`` warps. With at most
    ``CPU_VARIANT_MAX_WARP_THREADS`` per warp the CPU variant runs them (its branches cost
    little when few threads share them), with more the CUDA variant."""
    warps = max(1, sm_count) * RESIDENT_WARPS_PER_SM
    block = 1
    while block < BLOCK_THREADS[-1] and block * warps < num_envs:
        block *= 2
    return ("cpu" if block <= CPU_VARIANT_MAX_WARP_THREADS else "cuda"), block


def launch_shape(num_envs: int, block_threads: int, sm_count: int,
                 block_warps: int | None = None) -> tuple[int, int]:
    """``(threads launched, threads per block)`` of a GPU launch of the run kernel with
    ``block_threads`` Game Boys per warp.

    Each warp runs ``block_threads`` consecutive envs in its first lanes; its other lanes
    return at once (registers are allocated for them anyway, see
    ``RESIDENT_WARPS_PER_SM``). A block is ``block_warps`` such warps of consecutive envs,
    by default as many as the batch gives each SM (at most the SM's resident warps): the
    GPU hands blocks to SMs one at a time, so the SMs hold as many warps each as blocks of
    one warp would give them, but the warps an SM runs together hold neighbouring envs,
    whose bytes share the 32-byte sectors of the tiled state (layout.py) in its L1 cache
    instead of each bringing in sectors it uses one byte of."""
    warps = -(-num_envs // block_threads)
    if block_warps is None:
        block_warps = min(RESIDENT_WARPS_PER_SM, -(-warps // max(1, sm_count)))
    return warps * 32, 32 * block_warps


def block_warps_problem(block_warps: int | None, on_cpu: bool) -> str | None:
    """Why ``block_warps`` cannot be a batch's warps per block (None: it can)."""
    if block_warps is None:
        return None
    if on_cpu:
        return ("block_warps sets a GPU launch's blocks; on the CPU device a batch is "
                "split over worker threads instead (threads=)")
    if not 1 <= block_warps <= RESIDENT_WARPS_PER_SM:
        return f"block_warps must be 1 to {RESIDENT_WARPS_PER_SM}, got {block_warps!r}"
    return None


def block_threads_problem(block_threads: int | None, on_cpu: bool) -> str | None:
    """Why ``block_threads`` cannot be a batch's Game Boys per warp (None: it can)."""
    if block_threads is not None and block_threads not in BLOCK_THREADS:
        return (f"block_threads must be one of {', '.join(map(str, BLOCK_THREADS))}, "
                f"got {block_threads!r}")
    if on_cpu and block_threads not in (None, RUN_BLOCK_DIM):
        return ("block_threads sets a GPU launch's blocks; on the CPU device a batch is "
                "split over worker threads instead (threads=)")
    return None


# Divider value at PC=0x0100 after the DMG boot ROM (DIV reads 0xAB).
POST_BOOT_DIV = 0xABC8

# PPU timing constants (dots): see GB in kstate.py.
PPU_TIMING = (4, 4, 80, 0, 1)
# CPU access windows: OAM-scan block start/end dot, mode-3 block start/end shift, LCD-on.
ACCESS_TIMING = (0, 76, 0, 0, 76)

# Post-boot IO register values (FF00-FF7F) of a DMG; unlisted registers start at 0.
POST_BOOT_IO: dict[int, int] = {
    0x00: 0x00, 0x02: 0x7E, 0x07: 0xF8, 0x0F: 0xE1,
    0x10: 0x80, 0x11: 0xBF, 0x12: 0xF3, 0x13: 0xFF, 0x14: 0xBF, 0x16: 0x3F, 0x18: 0xFF,
    0x19: 0xBF, 0x1A: 0x7F, 0x1B: 0xFF, 0x1C: 0x9F, 0x1D: 0xFF, 0x1E: 0xBF, 0x20: 0xFF,
    0x23: 0xBF, 0x24: 0x77, 0x25: 0xF3, 0x26: 0xF1,
    0x40: 0x91, 0x41: 0x00, 0x46: 0xFF, 0x47: 0xFC, 0x48: 0xFF, 0x49: 0xFF, 0x50: 0x01,
}


def io_read_mask() -> np.ndarray:
    """Bits of each IO register that read back as 1 on a DMG (unmapped registers: all)."""
    m = np.full(0x80, 0xFF, dtype=np.uint8)
    known = {
        0x01: 0x00, 0x02: 0x7E, 0x04: 0x00, 0x05: 0x00, 0x06: 0x00, 0x07: 0xF8, 0x0F: 0xE0,
        0x10: 0x80, 0x11: 0x3F, 0x12: 0x00, 0x13: 0xFF, 0x14: 0xBF, 0x16: 0x3F, 0x17: 0x00,
        0x18: 0xFF, 0x19: 0xBF, 0x1A: 0x7F, 0x1B: 0xFF, 0x1C: 0x9F, 0x1D: 0xFF, 0x1E: 0xBF,
        0x20: 0xFF, 0x21: 0x00, 0x22: 0x00, 0x23: 0xBF, 0x24: 0x00, 0x25: 0x00, 0x26: 0x70,
    }
    for k, v in known.items():
        m[k] = v
    m[0x30:0x40] = 0x00  # wave RAM
    m[0x40:0x4C] = 0x00
    m[0x41] = 0x80
    return m


def _torch_device(device: str) -> str:
    return "cuda" if str(device).startswith("cuda") else "cpu"


def env_bytes(cart: Cartridge, serial_capacity: int = DEFAULT_SERIAL_CAPACITY) -> int:
    """Device bytes of one env's arrays in a :class:`GameBoyBatch` (memory, cart RAM,
    registers, timers, serial ring, APU, framebuffer, phase clocks when built with them)."""
    return (L.MEM_BYTES + max(cart.ram_bytes, 1) + 4 * L.ST_COUNT + 8 * L.TM_COUNT
            + serial_capacity + 4 * L.APU_COUNT + L.SCREEN_H * L.SCREEN_W
            + (8 * CLOCK_ROWS if PHASE_CLOCKS else 0))


def regroup_bytes(cart: Cartridge, serial_capacity: int = DEFAULT_SERIAL_CAPACITY) -> int:
    """Bytes per env a batch that regroups (regroup.py) keeps beside its slot-ordered copy:
    the scratch rows of its widest byte array (``mem``, cartridge RAM or the serial ring),
    the sort's keys and values, the orders and the instruction counts."""
    return max(L.MEM_BYTES, cart.ram_bytes, serial_capacity) + 40


def batch_bytes(cart: Cartridge, num_envs: int,
                serial_capacity: int = DEFAULT_SERIAL_CAPACITY, on_cpu: bool = False,
                regroup: bool = False) -> int:
    """Device bytes a :class:`GameBoyBatch` of ``num_envs`` allocates (its arrays are
    tiled, so the count rounds up to whole tiles), so a command can refuse a batch that
    cannot fit before Warp allocates anything: the ROM and its two predecoded forms
    (``PRE_ENTRY_BYTES`` per ROM byte each) once, the per-env arrays. ``on_cpu``: the batch is
    on the CPU device with the default kernel (the CPU variant, which draws at once there);
    a GPU batch keeps the LCD registers of each line of a frame left to draw after a
    launch (8 bytes per line). ``regroup``: the batch keeps a second, slot-ordered copy of
    its per-env arrays (regroup.py)."""
    # the ROM and its predecoded entries (decode.rom_predecode_entries, rom_fused_entries)
    rom = len(cart.data) * (1 + 2 * PRE_ENTRY_BYTES) + 2 * PRE_ENTRY_BYTES
    pending = num_envs * (3 * 4 + (0 if on_cpu else L.SCREEN_H * 8))
    padded = L.tiles_for(num_envs) * L.TILE
    per_env = padded * env_bytes(cart, serial_capacity) + pending
    if not regroup:
        return per_env + rom
    return 2 * per_env + rom + padded * regroup_bytes(cart, serial_capacity)


class GameBoyBatch:
    """``num_envs`` DMG machines sharing one ROM, stepped by one kernel launch per call.

    On the CPU device a launch runs as ``threads`` chunks of envs in parallel (default:
    every core, see cpu_threads.py); a GPU launch is one launch over the whole batch, with
    the run kernel's variant (``kernel``) and Game Boys per warp (``block_threads``) of
    :func:`launch_plan` and the warps per block (``block_warps``) of :func:`launch_shape`
    unless given. Where the plan picks the CUDA variant (and with ``kernel="measure"``
    on either device) the batch times both variants on its own launches and runs the
    faster (variant_timing.py). A GPU batch with ``REGROUP_MIN_WARP_THREADS`` or more Game
    Boys per warp (or any batch with ``regroup=True``; none with ``regroup=False``) runs
    each launch on a copy of its state sorted by the instructions each env ran in the
    launch before, so that envs that ran alike share warps (regroup.py); between launches
    its arrays are in env order and hold the same state either way.

    Per-env state (layout.py) is tiled ``(tiles, rows, TILE)``: the envs of a warp touching
    the same address coalesce, and kernels reach every row of an env at a constant offset.
    Every array is exposed zero-copy to torch (see ``state_tensors``).
    """

    def __init__(
        self,
        rom: str | os.PathLike[str] | bytes | bytearray | Cartridge,
        num_envs: int,
        device: str = "cpu",
        boot_rom: str | os.PathLike[str] | bytes | None = None,
        serial_capacity: int = DEFAULT_SERIAL_CAPACITY,
        threads: int | None = None,
        kernel: str = "auto",
        block_threads: int | None = None,
        block_warps: int | None = None,
        regroup: bool | None = None,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if kernel not in KERNEL_VARIANTS:
            raise ValueError(
                f"kernel must be one of {', '.join(KERNEL_VARIANTS)}, got {kernel!r}"
            )
        self.threads = resolve_threads(threads)
        self.cart = rom if isinstance(rom, Cartridge) else parse_cartridge(rom)
        boot = None
        if boot_rom is not None:
            boot = load_rom_bytes(boot_rom)
            if len(boot) != BOOT_ROM_BYTES:
                raise RomError(f"boot ROM must be 256 bytes (DMG), got {len(boot)}")
        wp.init()
        self.device = str(wp.get_device(device))
        on_cpu = self.device.startswith("cpu")
        self._on_cpu = on_cpu
        problem = (block_threads_problem(block_threads, on_cpu)
                   or block_warps_problem(block_warps, on_cpu))
        if problem:
            raise ValueError(problem)
        # The run kernel's variant (cpu.HOST) and a GPU launch's Game Boys per warp, where
        # not given: on the CPU device its own variant (its launches keep the module's
        # blocks), on a GPU the launch plan for the batch's size. Both variants run on
        # both devices and give the same state bit for bit, so a batch may also time both
        # on its own launches and run the faster ("measure"; "auto" on a GPU where the plan
        # picks the CUDA variant, whose lead over the CPU one depends on the game).
        plan_kernel, plan_block = (
            ("cpu", RUN_BLOCK_DIM) if on_cpu
            else launch_plan(num_envs, wp.get_device(self.device).sm_count))
        measured = kernel == "measure" or (kernel == "auto" and plan_kernel == "cuda")
        self._fixed_kernel = plan_kernel if kernel in ("auto", "measure") else kernel
        self._clock = (VariantClock((plan_kernel, "cuda" if plan_kernel == "cpu" else "cpu"))
                       if measured else None)
        self._variants = self._clock.variants if self._clock else (self._fixed_kernel,)
        # Timed launches in flight on a GPU: ticket -> (start, end) events (a pool made once).
        self._timed: dict[int, tuple[Any, Any]] = {}
        self._event_pool: list[tuple[Any, Any]] = []
        if self._clock is not None and not on_cpu:
            self._event_pool = [
                (wp.Event(self.device, enable_timing=True),
                 wp.Event(self.device, enable_timing=True))
                for _ in range(self._clock.trials * len(self._variants))]
        self.block_threads = plan_block if block_threads is None else block_threads
        # A GPU launch's threads and threads per block (launch_shape); the CPU device
        # launches its chunks of envs one env per thread (warp_bits 5: thread i, env i).
        self._warp_bits = 5
        self._launch_dim, self._block_dim = num_envs, RUN_BLOCK_DIM
        if not on_cpu:
            self._warp_bits = self.block_threads.bit_length() - 1
            self._launch_dim, self._block_dim = launch_shape(
                num_envs, self.block_threads, wp.get_device(self.device).sm_count, block_warps)
        self.block_warps = self._block_dim // 32
        self.num_envs = num_envs
        self.serial_capacity = serial_capacity
        # Envs sorted into warps by the work of their last launch (regroup.py).
        self.regroup = (regroup if regroup is not None
                        else regroups_with(num_envs, None if on_cpu else self.block_threads))
        n = num_envs
        nt = L.tiles_for(n)
        dev = self.device
        g = GB()
        g.rom = wp.array(np.frombuffer(self.cart.data, dtype=np.uint8),
                         dtype=wp.uint8, device=dev)
        boot_np = np.frombuffer(boot, dtype=np.uint8) if boot else np.zeros(1, np.uint8)
        g.boot = wp.array(boot_np, dtype=wp.uint8, device=dev)
        g.io_mask = wp.array(io_read_mask(), dtype=wp.uint8, device=dev)
        # the descriptors, then the predecoded ROM: the CPU variant's inner loop reads it,
        # and both variants' countdown and fill loops (countdown.py); then the CUDA
        # variant's, with register loads run with the instruction after them
        entries = rom_predecode_entries(self.cart.data)
        dec = np.concatenate([decode_table(), entries.ravel(),
                              rom_fused_entries(self.cart.data, entries).ravel()])
        g.dec = wp.array(dec, dtype=wp.int32, device=dev)
        g.dec_ptr = g.dec.ptr
        cram_rows = max(self.cart.ram_bytes, 1)
        g.mem = wp.zeros((nt, L.MEM_BYTES, L.TILE), dtype=wp.uint8, device=dev)
        g.cram = wp.zeros((nt, cram_rows, L.TILE), dtype=wp.uint8, device=dev)
        g.st = wp.zeros((nt, L.ST_COUNT, L.TILE), dtype=wp.int32, device=dev)
        g.tm = wp.zeros((nt, L.TM_COUNT, L.TILE), dtype=wp.int64, device=dev)
        clock_shape = (CLOCK_ROWS, n) if PHASE_CLOCKS else (1, 1)
        g.clocks = wp.zeros(clock_shape, dtype=wp.int64, device=dev)
        # The lines a launch leaves to draw (count, first line, window line counter) and
        # the LCD registers of each (ppu_timing.flush_draw): a GPU launch and the CUDA
        # variant defer drawing, the CPU variant on the CPU device draws at once. Every
        # launch that defers and draws is followed by the kernel that draws them, so no
        # line is left over for the next launch, whichever variant it runs.
        defers = not self._on_cpu or "cuda" in self._variants
        g.pend = wp.zeros((n, 3), dtype=wp.int32, device=dev)
        g.lines = wp.zeros((n, L.SCREEN_H) if defers else (1, 1), dtype=wp.vec2i, device=dev)
        g.ser = wp.zeros((nt, serial_capacity, L.TILE), dtype=wp.uint8, device=dev)
        g.apu = wp.zeros((nt, L.APU_COUNT, L.TILE), dtype=wp.int32, device=dev)
        g.mem_ptr, g.st_ptr, g.tm_ptr, g.apu_ptr = g.mem.ptr, g.st.ptr, g.tm.ptr, g.apu.ptr
        g.cram_ptr, g.ser_ptr = g.cram.ptr, g.ser.ptr
        g.cram_tile = cram_rows * L.TILE
        g.ser_tile = serial_capacity * L.TILE
        g.fb = wp.zeros((n, L.SCREEN_H, L.SCREEN_W), dtype=wp.uint8, device=dev)
        g.rom_mask = self.cart.rom_bytes - 1
        g.cram_mask = self.cart.ram_bytes - 1 if self.cart.ram_bytes > 0 else -1
        g.mbc = self.cart.mbc
        g.has_boot = 1 if boot else 0
        g.ser_cap = serial_capacity
        g.render_frame = -1
        g.ppu_pre, g.ppu_m2, g.ppu_m3, g.ppu_l0, g.ppu_lag = PPU_TIMING
        g.acc_m2_start, g.acc_m2_end, g.acc_m3_shift, g.acc_m3_end_shift, g.lcdon_m3 = ACCESS_TIMING
        # Device copy of g for the kernel's out-of-line helpers (see kstate.py).
        self._g_dev = wp.zeros(1, dtype=GB, device=dev)
        g.ref = self._g_dev.ptr
        self._g = g
        self._no_buttons = wp.zeros(1, dtype=wp.int32, device=dev)
        self._regrouper = Regrouper(g, n, dev) if self.regroup else None
        self._faulted = torch.zeros((nt, L.TILE), dtype=torch.bool, device=wp.device_to_torch(dev))
        self.last_compile_s = 0.0
        self._built = False  # compile() has run
        # CPU device: each variant's chunked launch, built at its first launch
        self._chunks: dict[str, ChunkedLaunch] = {}
        self.reset(boot_rom_present=boot is not None)

    # ------------------------------------------------------------------ state
    def reset(self, boot_rom_present: bool | None = None) -> None:
        """Put every env in the power-on state (post-boot DMG state without a boot ROM)."""
        with_boot = self._g.has_boot != 0 if boot_rom_present is None else boot_rom_present
        st = np.zeros(L.ST_COUNT, dtype=np.int32)  # one env's rows; every env starts alike
        mem = np.zeros(L.MEM_BYTES, dtype=np.uint8)
        if with_boot:
            st[L.R_PC] = 0x0000
            mem[L.IO_OFF + 0x50] = 0
            mem[L.IO_OFF + L.LCDC] = 0x00
            div = 0
        else:
            regs = {L.R_A: 0x01, L.R_F: 0xB0, L.R_B: 0x00, L.R_C: 0x13, L.R_D: 0x00,
                    L.R_E: 0xD8, L.R_H: 0x01, L.R_L: 0x4D, L.R_SP: 0xFFFE, L.R_PC: 0x0100}
            for k, v in regs.items():
                st[k] = v
            for k, v in POST_BOOT_IO.items():
                mem[L.IO_OFF + k] = v
            div = POST_BOOT_DIV
        mem[L.IO_OFF + L.TAC] |= 0xF8
        st[L.S_DIV_OFF] = div
        st[L.S_MBC_R1] = 1
        st[L.S_BANKX] = 1
        st[L.S_RAMOFF] = 0 if (self.cart.mbc == 0 and self.cart.ram_bytes > 0) else -1
        st[L.S_PPU_MODE] = 2
        st[L.S_PPU_PHASE] = 1  # mode 2 (OAM scan), see ppu_timing.py
        lcd_on = mem[L.IO_OFF + L.LCDC] & 0x80
        st[L.T_PPU_NEXT] = 80 if lcd_on else L.CYCLES_PER_FRAME
        if not lcd_on:
            st[L.S_PPU_MODE] = 0
            st[L.S_PPU_PHASE] = 3
        for k in (L.T_RELOAD, L.T_TIMER_NEXT, L.T_SERIAL_END):
            st[k] = L.NEVER
        st[L.T_DMA_END] = -1
        st[L.T_DMA_START] = -1
        st[L.T_LINE_AT] = 0  # mode 3 starts at cycle 80 of this line
        g = self._g
        g.st.assign(np.ascontiguousarray(np.broadcast_to(st[None, :, None], g.st.shape)))
        g.mem.assign(np.ascontiguousarray(np.broadcast_to(mem[None, :, None], g.mem.shape)))
        g.tm.zero_()
        apu = apu_power_on_rows(post_boot=not with_boot)
        g.apu.assign(np.ascontiguousarray(np.broadcast_to(apu[None, :, None], g.apu.shape)))
        g.cram.zero_()
        g.ser.zero_()
        g.fb.zero_()

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Zero-copy torch views of every per-env array.

        ``mem`` (MEM_BYTES rows), ``cram`` (cart RAM rows), ``st`` (ST_COUNT, int32), ``tm``
        (TM_COUNT, int64), ``serial`` (CAP) and ``apu`` (APU_COUNT, int32) are tiled,
        ``(tiles, rows, TILE)`` (see layout.py and tiles.py: ``env_rows(t, env)`` is one
        env's rows); ``fb`` is ``(N, 144, 160)``.
        """
        g = self._g
        return {
            "mem": wp.to_torch(g.mem),
            "cram": wp.to_torch(g.cram),
            "st": wp.to_torch(g.st),
            "tm": wp.to_torch(g.tm),
            "serial": wp.to_torch(g.ser),
            "apu": wp.to_torch(g.apu),
            "fb": wp.to_torch(g.fb),
        }

    @property
    def cpu_workers(self) -> int:
        """Threads a launch runs on (the CPU device: ``threads``, at most one per tile of
        32 envs; a GPU launch is one launch)."""
        if not self.device.startswith("cpu"):
            return 1
        return len(chunk_bounds(self.num_envs, self.threads))

    @property
    def phase_clocks(self) -> torch.Tensor:
        """Per-env phase cycle counters, ``(CLOCK_ROWS, N)`` int64 (zero-copy), when built
        with ``GBX_GAMEBOY_PHASE_CLOCKS=1`` (see phase_clock.py); a ``(1, 1)`` dummy else."""
        return wp.to_torch(self._g.clocks)

    @property
    def fb(self) -> torch.Tensor:
        """Framebuffer, uint8 [N, 144, 160] shade indices (zero-copy)."""
        return wp.to_torch(self._g.fb)

    @property
    def locked(self) -> torch.Tensor:
        """uint8 [N]: the env's fault code (layout.FAULT_*), 0 while it runs. A locked env
        stopped: 1 illegal opcode, 2 cycle budget of a frames launch used up."""
        return row_of_envs(wp.to_torch(self._g.st), L.S_LOCKED, self.num_envs).to(torch.uint8)

    def faulted(self) -> torch.Tensor:
        """bool [N]: the envs locked by a fault (one device op into a buffer the batch
        owns, no sync, no allocation; the tensor is overwritten by the next call)."""
        torch.ne(wp.to_torch(self._g.st)[:, L.S_LOCKED, :], 0, out=self._faulted)
        return self._faulted.view(-1)[: self.num_envs]

    @property
    def frame_count(self) -> torch.Tensor:
        """int64 [N]: frames completed since power-on, per env (a copy)."""
        return row_of_envs(wp.to_torch(self._g.tm), L.TM_FRAMES, self.num_envs)

    @property
    def cycle_count(self) -> torch.Tensor:
        return row_of_envs(wp.to_torch(self._g.tm), L.TM_CLOCK, self.num_envs)

    @property
    def instruction_count(self) -> torch.Tensor:
        return row_of_envs(wp.to_torch(self._g.tm), L.TM_INSTRS, self.num_envs)

    @property
    def arrays(self) -> GB:
        """The Warp struct of device arrays (for other kernels: rendering, savestates)."""
        return self._g

    def serial_output(self, env: int = 0) -> bytes:
        """Bytes sent over the serial port by env (the last ``serial_capacity`` ones)."""
        n = int(env_rows(wp.to_torch(self._g.st), env)[L.S_SER_LEN])
        buf = env_rows(wp.to_torch(self._g.ser), env).cpu().numpy()
        cap = self.serial_capacity
        if n <= cap:
            return bytes(buf[:n])
        start = n % cap
        return bytes(np.concatenate([buf[start:], buf[:start]]))

    def regs(self, env: int = 0) -> dict[str, int]:
        """CPU registers and run flags of one env (a small device-to-host copy)."""
        st = env_rows(wp.to_torch(self._g.st), env).cpu().tolist()
        out = {name: int(st[idx]) for name, idx in (
            ("a", L.R_A), ("f", L.R_F), ("b", L.R_B), ("c", L.R_C), ("d", L.R_D),
            ("e", L.R_E), ("h", L.R_H), ("l", L.R_L), ("sp", L.R_SP), ("pc", L.R_PC),
            ("ime", L.S_IME), ("halted", L.S_HALTED), ("locked", L.S_LOCKED))}
        out["cycles"] = int(env_rows(wp.to_torch(self._g.tm), env)[L.TM_CLOCK])
        return out

    def read_memory(self, env: int, addr: int) -> int:
        """Host-side peek of one byte of RAM-backed memory (VRAM, cart RAM, WRAM, OAM, IO, HRAM)."""
        if not 0 <= env < self.num_envs:
            raise IndexError(f"env {env} out of range for a batch of {self.num_envs} envs")
        mem = env_rows(wp.to_torch(self._g.mem), env)
        if 0x8000 <= addr < 0xA000:
            return int(mem[L.VRAM_OFF + addr - 0x8000])
        if 0xA000 <= addr < 0xC000:
            if self.cart.ram_bytes == 0:
                return 0xFF
            off = max(int(env_rows(wp.to_torch(self._g.st), env)[L.S_RAMOFF]), 0)
            cram = env_rows(wp.to_torch(self._g.cram), env)
            return int(cram[(off + addr - 0xA000) % self.cart.ram_bytes])
        if 0xC000 <= addr < 0xFE00:
            return int(mem[L.WRAM_OFF + (addr & 0x1FFF)])
        if 0xFE00 <= addr < 0xFEA0:
            return int(mem[L.OAM_OFF + addr - 0xFE00])
        if 0xFF00 <= addr < 0xFF80:
            return int(mem[L.IO_OFF + addr - 0xFF00])
        if addr >= 0xFF80:
            return int(mem[L.HRAM_OFF + addr - 0xFF80])
        raise ValueError(f"address 0x{addr:04X} is ROM; read batch.cart.data instead")

    # ------------------------------------------------------------------ stepping
    @property
    def kernel(self) -> str:
        """The run kernel's variant the batch runs now (of a batch that times both: the
        faster in its last round of timed launches, the launch plan's before one)."""
        return self._clock.choice if self._clock is not None else self._fixed_kernel

    @property
    def times_variants(self) -> bool:
        """Whether the batch times both run-kernel variants on its launches and runs the
        faster (variant_timing.py)."""
        return self._clock is not None

    @property
    def timing_variants(self) -> bool:
        """Whether a round of timed launches of both variants is under way (launches
        still to run or times still to come; False for a batch that runs one variant)."""
        return self._clock is not None and self._clock.timing

    def hold_variant(self, held: bool) -> None:
        """Of a batch that times both variants: while ``held``, start no new round of timed
        launches (one due starts at the first launch after). Benchmarks hold a batch over
        their timed steps, so that those run the chosen variant, as nearly all launches
        between rounds do. Nothing for a batch that runs one variant."""
        if self._clock is not None:
            self._clock.hold(held)

    @property
    def variant_rounds(self) -> int:
        """Of a batch that times both variants: its complete rounds of timed launches so
        far (variant_timing.py; a GPU's times are taken as the launch after them starts);
        0 for a batch that runs one variant."""
        return self._clock.rounds if self._clock is not None else 0

    @property
    def variant_times(self) -> dict[str, float]:
        """Of a batch that times both variants: each one's median seconds per frame of
        the batch (every env one frame) in its last complete round of timed launches
        (empty before one, and for a batch that runs one variant)."""
        if self._clock is None:
            return {}
        return {v: statistics.median(t) for v, t in self._clock.last_round.items()}

    def compile(self) -> float:
        """Build (or load from the kernel cache) the run kernel of each variant the batch
        may run; returns seconds taken. A batch that times both variants also builds the
        one-warp builds of their helper kernels here (the kernel storing the batch struct,
        the CUDA variant's drawing of pending lines), so that no timed launch waits for
        a build."""
        t0 = time.perf_counter()
        for variant in self._variants:
            module = _VARIANT_KERNELS[variant][0].module
            dims = {None if self._on_cpu else self._block_dim}
            if self._clock is not None and not self._on_cpu:
                dims.add(RUN_BLOCK_DIM)
            for dim in dims:
                wp.load_module(module, device=self.device, block_dim=dim)
        if self._regrouper is not None:
            wp.load_module(_regroup_kernel.module, device=self.device)
        self._built = True
        self.last_compile_s = time.perf_counter() - t0
        return self.last_compile_s

    def _launch(
        self,
        mode: int,
        amount: int,
        render_frame: int = -1,
        buttons: wp.array | None = None,
        release_after: int = 0,
    ) -> None:
        g = self._g
        g.render_frame = render_frame
        if self._regrouper is not None:
            # the launch runs the slot-ordered copy (regroup.py), its buttons in slot order
            buttons = self._regrouper.gather(buttons)
            g = self._regrouper.slots
            g.render_frame = render_frame
        if self._clock is not None and not self._built:
            self.compile()  # every build before the first timed launch
        variant, ticket = self._next_variant(amount if mode == RUN_FRAMES else 0)
        run, store = _VARIANT_KERNELS[variant]
        t0 = time.perf_counter()
        if ticket is not None and not self._on_cpu:
            self._timed[ticket] = self._event_pool[(ticket - 1) % len(self._event_pool)]
            wp.get_stream(self.device).record_event(self._timed[ticket][0])
        wp.launch(store, dim=1, inputs=[self._g_dev, g], device=self.device)
        inputs = [
            g,
            mode,
            amount,
            buttons if buttons is not None else self._no_buttons,
            1 if buttons is not None else 0,
            release_after,
            self._warp_bits,
            self.num_envs,
        ]
        if not self._on_cpu:
            wp.launch(run, dim=self._launch_dim, inputs=[*inputs, 0],
                      device=self.device, block_dim=self._block_dim)
        else:
            if variant not in self._chunks:
                self._chunks[variant] = ChunkedLaunch(run, self.device, self.num_envs,
                                                      self.threads, inputs)
            self._chunks[variant].launch(inputs)
        if (variant == "cuda" or not self._on_cpu) and render_frame >= 0:
            wp.launch(draw_pending_kernel, dim=(self.num_envs, L.SCREEN_H), inputs=[g],
                      device=self.device)
        if ticket is not None and self._clock is not None:
            if self._on_cpu:  # a CPU launch has finished when wp.launch returns
                self._clock.add_time(ticket, time.perf_counter() - t0)
            else:
                wp.get_stream(self.device).record_event(self._timed[ticket][1])
        if self._regrouper is not None:
            self._regrouper.scatter()

    def _next_variant(self, frames: int) -> tuple[str, int | None]:
        """The variant the next launch runs, and its ticket if it is to be timed (see
        variant_timing.VariantClock). The times of the GPU's timed launches are taken as
        their events complete, without waiting for them; nothing is timed in a graph
        capture."""
        clock = self._clock
        if clock is None:
            return self._fixed_kernel, None
        if not self._on_cpu:
            if wp.get_device(self.device).is_capturing:
                return clock.choice, None
            for ticket, (start, end) in list(self._timed.items()):
                if end.is_complete:
                    del self._timed[ticket]
                    clock.add_time(ticket, wp.get_event_elapsed_time(
                        start, end, synchronize=False) / 1000)
        return clock.next_launch(frames)

    def run_cycles(self, n: int) -> None:
        """Run every env for n T-cycles (each stops at the first instruction boundary >= n)."""
        while n > 0:
            chunk = min(n, MAX_CYCLES_PER_LAUNCH)
            self._launch(RUN_CYCLES, chunk)
            n -= chunk

    def run_frames(self, n: int, render_last: bool = False) -> None:
        """Run every env for n frames (each ends as the PPU enters VBlank)."""
        while n > 0:
            chunk = min(n, MAX_FRAMES_PER_LAUNCH)
            last = chunk == n
            render_frame = chunk - 1 if (render_last and last) else -1
            self._launch(RUN_FRAMES, chunk, render_frame=render_frame)
            n -= chunk

    def step_frames(
        self,
        buttons: torch.Tensor,
        frames: int,
        release_after: int,
        render_last: bool = True,
    ) -> None:
        """One launch of ``frames`` frames; render only the last one if ``render_last``.

        ``buttons`` (int [N] bitmask) are pressed as the step starts, held for
        ``min(release_after, frames)`` frames and released; with ``release_after >= frames``
        they are released as the step ends, so every step (and any ``run_frames`` after it)
        starts with no button held. ``release_after <= 0`` presses nothing. A button held
        through consecutive steps reads as held throughout (the release and the next press
        happen at the same emulated cycle); only the joypad interrupt is requested again.
        """
        if frames > MAX_FRAMES_PER_LAUNCH:
            raise ValueError(f"frames must be <= {MAX_FRAMES_PER_LAUNCH} per step, got {frames}")
        self._launch(
            RUN_FRAMES,
            frames,
            render_frame=frames - 1 if render_last else -1,
            buttons=self._button_array(buttons),
            release_after=release_after,
        )

    def step_cycles(self, buttons: torch.Tensor, cycles: int, render: bool = False) -> None:
        """One launch of ``cycles`` T-cycles (ending at the first instruction boundary at or
        after them) with ``buttons`` held from its start to its end.

        For lining up with an emulator whose frames start elsewhere in the picture (PyBoy's
        start at line 0): ``render`` draws the lines the launch runs before its first
        VBlank, the whole picture when it starts at line 0.
        """
        if not 1 <= cycles <= MAX_CYCLES_PER_LAUNCH:
            raise ValueError(f"cycles must be in [1, {MAX_CYCLES_PER_LAUNCH}], got {cycles}")
        self._launch(
            RUN_CYCLES,
            cycles,
            render_frame=0 if render else -1,
            buttons=self._button_array(buttons),
            release_after=MAX_FRAMES_PER_LAUNCH + 1,  # never within the launch
        )

    def _button_array(self, buttons: torch.Tensor) -> Any:
        """``buttons`` checked (shape, device) as a Warp int32 array for a launch."""
        if buttons.shape != (self.num_envs,):
            raise ValueError(
                f"buttons must have shape [{self.num_envs}], got {tuple(buttons.shape)}"
            )
        b = buttons if buttons.dtype == torch.int32 else buttons.to(torch.int32)
        if b.device.type != _torch_device(self.device):
            raise ValueError(f"buttons must be on {self.device}, got {b.device}")
        return wp.from_torch(b.contiguous(), dtype=wp.int32)

    def synchronize(self) -> None:
        wp.synchronize_device(self.device)
