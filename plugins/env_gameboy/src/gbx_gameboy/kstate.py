"""The Warp struct that carries one batch's device arrays into every kernel function.

Warp passes structs by value. The run kernel receives ``GB`` as a launch parameter (constant
memory, free to read), and the helpers it inlines read the same copy. Out-of-line helpers
(``wp.func(inline=False)``) would instead get a fresh ~600-byte copy on the thread's stack at
every call site, which made the kernel's stack frame and register spills explode. They take
``g.ref`` instead: the device address of a one-element ``GB`` array holding the same values
(refreshed by ``cpu.store_gb`` before every launch), and start with ``g = load_gb(ref)``,
which reads only the fields they use (uniform, cached loads).
"""

from __future__ import annotations

from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})


@wp.struct
class GB:
    """Device arrays and per-batch constants of a :class:`GameBoyBatch` (see layout.py)."""

    rom: wp.array(dtype=wp.uint8)  # shared by all envs, read-only
    boot: wp.array(dtype=wp.uint8)  # optional 256-byte boot ROM (1 byte when absent)
    io_mask: wp.array(dtype=wp.uint8)  # bits of FF00-FF7F that read as 1
    mem: wp.array2d(dtype=wp.uint8)  # (MEM_BYTES, N)
    cram: wp.array2d(dtype=wp.uint8)  # (max(cart RAM, 1), N)
    st: wp.array2d(dtype=wp.int32)  # (ST_COUNT, N)
    tm: wp.array2d(dtype=wp.int64)  # (TM_COUNT, N)
    ser: wp.array2d(dtype=wp.uint8)  # (serial capacity, N) ring buffer of sent bytes
    fb: wp.array3d(dtype=wp.uint8)  # (N, 144, 160)
    clocks: wp.array2d(dtype=wp.int64)  # (CLOCK_ROWS, N) with phase clocks, else (1, 1)
    rom_mask: int
    cram_mask: int  # cart RAM bytes - 1, or -1 when the cartridge has none
    mbc: int
    has_boot: int
    ser_cap: int
    render_frame: int  # launch-relative frame whose lines are drawn; -1 draws none
    # PPU timing constants (dots), see ppu_timing.py; set by GameBoyBatch.
    ppu_pre: int  # OAM-scan IRQ of lines 1-143 rises this long before LY changes
    ppu_m2: int  # STAT shows mode 2 this long after LY changes
    ppu_m3: int  # mode 3 starts this long after LY changes
    ppu_l0: int  # 1: line 0's OAM-scan IRQ rises with LY like lines 1-143
    ppu_lag: int  # CPU reads see the PPU state this many cycles before their M-cycle ends
    acc_m2_start: int  # OAM blocked for the OAM scan from this dot of the line (LY change = 0)
    acc_m2_end: int  # ... until this dot
    acc_m3_shift: int  # VRAM/OAM blocking of mode 3 starts this long after STAT shows mode 3
    acc_m3_end_shift: int  # ... and ends this long after STAT shows mode 0
    lcdon_m3: int  # after LCD on, STAT shows mode 3 this long after the LCDC write
    ref: wp.uint64  # address of the device copy of this struct (see load_gb)


@wp.func
def load_gb(ref: wp.uint64) -> GB:
    """The batch struct behind ``g.ref``: what out-of-line helpers use instead of a copy."""
    return wp.array(ptr=ref, shape=(1,), dtype=GB)[0]


@wp.func
def load_mem(ref: wp.uint64) -> wp.array2d(dtype=wp.uint8):
    """Only ``mem`` of the struct behind ``ref``: hot out-of-line paths load this and
    ``load_st`` first and the whole struct only on their slower branches."""
    return wp.array(ptr=ref, shape=(1,), dtype=GB)[0].mem


@wp.func
def load_st(ref: wp.uint64) -> wp.array2d(dtype=wp.int32):
    return wp.array(ptr=ref, shape=(1,), dtype=GB)[0].st
