"""The Warp struct that carries one batch's device arrays into every kernel function, and
the accessors kernels use to reach one env's state.

Warp passes structs by value. The run kernel receives ``GB`` as a launch parameter (constant
memory, free to read), and the helpers it inlines read the same copy. Out-of-line helpers
(``wp.func(inline=False)``) would instead get a fresh ~600-byte copy on the thread's stack at
every call site, which made the kernel's stack frame and register spills explode. They take
``g.ref`` instead: the device address of a one-element ``GB`` array holding the same values
(refreshed by ``cpu.store_gb`` before every launch), and start with ``g = load_gb(ref)``,
which reads only the fields they use (uniform, cached loads).

Per-env state is tiled (see layout.py): kernels never index the Warp arrays ``mem``,
``st``, ``tm``, ``cram``, ``ser`` and ``apu`` (whose strides Warp only knows at run time),
but go through ``mget``/``mset``, ``sget``/``sset``, ``tget``/``tset``, ``cget``/``cset``,
``aget``/``aset``, which compute one base address per env and reach a row at a
compile-time multiple of ``TILE`` from it. The arrays stay in the struct for the host
side (``wp.to_torch``).
"""

from __future__ import annotations

import os

from gbx_gameboy.layout import (
    APU_TILE_BYTES,
    MEM_BYTES,
    MEM_TILE_BYTES,
    ST_COUNT,
    ST_TILE_BYTES,
    TILE,
    TILE_SHIFT,
    TM_COUNT,
    TM_TILE_BYTES,
)
from gbx_gameboy.warp_setup import wp

# GBX_GAMEBOY_CHECK_BOUNDS=1 builds kernels whose per-env accessors check every row
# offset against the env's slice and stop the process (a trap) on the first one outside
# it: a test mode that proves the clamps hold. Off (the default), the checks are not
# compiled at all.
CHECK_BOUNDS = os.environ.get("GBX_GAMEBOY_CHECK_BOUNDS", "") == "1"

wp.set_module_options({"enable_backward": False})


@wp.struct
class GB:
    """Device arrays and per-batch constants of a :class:`GameBoyBatch` (see layout.py)."""

    rom: wp.array(dtype=wp.uint8)  # shared by all envs, read-only
    boot: wp.array(dtype=wp.uint8)  # optional 256-byte boot ROM (1 byte when absent)
    io_mask: wp.array(dtype=wp.uint8)  # bits of FF00-FF7F that read as 1
    dec: wp.array(dtype=wp.int32)  # opcode descriptors (decode.py), shared by all envs
    mem: wp.array3d(dtype=wp.uint8)  # (tiles, MEM_BYTES, TILE)
    cram: wp.array3d(dtype=wp.uint8)  # (tiles, max(cart RAM, 1), TILE)
    st: wp.array3d(dtype=wp.int32)  # (tiles, ST_COUNT, TILE)
    tm: wp.array3d(dtype=wp.int64)  # (tiles, TM_COUNT, TILE)
    ser: wp.array3d(dtype=wp.uint8)  # (tiles, serial capacity, TILE) ring buffer of sent bytes
    apu: wp.array3d(dtype=wp.int32)  # (tiles, APU_COUNT, TILE)
    fb: wp.array3d(dtype=wp.uint8)  # (N, 144, 160)
    clocks: wp.array2d(dtype=wp.int64)  # (CLOCK_ROWS, N) with phase clocks, else (1, 1)
    pend: wp.array2d(dtype=wp.int32)  # (N, 3) the lines left to draw (ppu_timing.flush_draw)
    lines: wp.array2d(dtype=wp.vec2i)  # (N, 144) their LCD registers, else (1, 1)
    # Base addresses of the tiled arrays above (``array.ptr``) and the bytes of one tile
    # of the two whose row count depends on the cartridge / the batch.
    mem_ptr: wp.uint64
    st_ptr: wp.uint64
    tm_ptr: wp.uint64
    cram_ptr: wp.uint64
    ser_ptr: wp.uint64
    apu_ptr: wp.uint64
    dec_ptr: wp.uint64  # dec's address: descriptors are read at byte offsets (ld_i32)
    cram_tile: int  # max(cart RAM, 1) * TILE
    ser_tile: int  # serial capacity * TILE
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


# ----------------------------------------------------------------------------- raw access
# Plain loads and stores at a byte offset from a base address. Warp's array indexing
# multiplies by strides read at run time and wraps negative indices; these compile to one
# load or store with the offset folded in when it is a constant.
# True in a kernel's GPU build, False in its CPU build: a constant of each build, so the
# compiler keeps only the branch that build takes. The run kernel's CPU variant, which
# runs on CPU cores and, for small batches, alone in a GPU warp, uses it where the two
# want different code (cpu.py's helpers, ppu_timing's deferred drawing).
@wp.func_native("#ifdef __CUDA_ARCH__\nreturn true;\n#else\nreturn false;\n#endif\n")
def on_gpu() -> bool: ...  # type: ignore[empty-body]


@wp.func_native("return (int32_t)(((const uint8_t*)base)[off]);")
def ld_u8(base: wp.uint64, off: int) -> int: ...  # type: ignore[empty-body]


@wp.func_native("((uint8_t*)base)[off] = (uint8_t)v;")
def st_u8(base: wp.uint64, off: int, v: int): ...


@wp.func_native("return *(const int32_t*)(((const uint8_t*)base) + off);")
def ld_i32(base: wp.uint64, off: int) -> int: ...  # type: ignore[empty-body]


@wp.func_native("*(int32_t*)(((uint8_t*)base) + off) = v;")
def st_i32(base: wp.uint64, off: int, v: int): ...


@wp.func_native("return *(const int64_t*)(((const uint8_t*)base) + off);")
def ld_i64(base: wp.uint64, off: int) -> wp.int64: ...  # type: ignore[empty-body]


@wp.func_native("*(int64_t*)(((uint8_t*)base) + off) = v;")
def st_i64(base: wp.uint64, off: int, v: wp.int64): ...


@wp.func_native("""
if (off < 0 || off >= size) {
    printf("gbx bounds check: offset %d outside [0, %d)\\n", off, size);
#if defined(__CUDA_ARCH__)
    __trap();
#else
    __builtin_trap();
#endif
}
""")
def check_index(off: int, size: int): ...


# ----------------------------------------------------------------------------- per env
@wp.func
def env_base(ptr: wp.uint64, tile_bytes: int, elem: int, env: int) -> wp.uint64:
    """Address of env's row 0 in the tiled array at ``ptr`` (``tile_bytes`` per tile of
    TILE envs, ``elem`` bytes per element); row ``k`` is ``k * TILE * elem`` further."""
    return (
        ptr
        + wp.uint64(env >> TILE_SHIFT) * wp.uint64(tile_bytes)
        + wp.uint64(elem * (env & (TILE - 1)))
    )


@wp.func
def mem_base(g: GB, env: int) -> wp.uint64:
    """Address of env's byte 0 in ``mem``; byte ``off`` is ``TILE * off`` further."""
    return env_base(g.mem_ptr, MEM_TILE_BYTES, 1, env)


@wp.func
def mget(g: GB, env: int, off: int) -> int:
    """Byte ``off`` of env's ``mem`` (layout.py offsets: VRAM_OFF + ..., IO_OFF + ...)."""
    if wp.static(CHECK_BOUNDS):
        check_index(off, MEM_BYTES)
    return ld_u8(mem_base(g, env), off * TILE)


@wp.func
def mset(g: GB, env: int, off: int, v: int):
    """Store the low byte of v at ``mem`` offset ``off`` of env."""
    if wp.static(CHECK_BOUNDS):
        check_index(off, MEM_BYTES)
    st_u8(mem_base(g, env), off * TILE, v)


@wp.func
def mem_get(base: wp.uint64, off: int) -> int:
    """Byte ``off`` of the env whose ``mem_base`` is ``base`` (for helpers given the base)."""
    if wp.static(CHECK_BOUNDS):
        check_index(off, MEM_BYTES)
    return ld_u8(base, off * TILE)


@wp.func
def st_base(g: GB, env: int) -> wp.uint64:
    return env_base(g.st_ptr, ST_TILE_BYTES, 4, env)


@wp.func
def sget(g: GB, env: int, k: int) -> int:
    """State field ``k`` (layout.py: R_*, S_*, T_*) of env."""
    if wp.static(CHECK_BOUNDS):
        check_index(k, ST_COUNT)
    return ld_i32(st_base(g, env), k * (4 * TILE))


@wp.func
def sset(g: GB, env: int, k: int, v: int):
    if wp.static(CHECK_BOUNDS):
        check_index(k, ST_COUNT)
    st_i32(st_base(g, env), k * (4 * TILE), v)


@wp.func
def tm_base(g: GB, env: int) -> wp.uint64:
    return env_base(g.tm_ptr, TM_TILE_BYTES, 8, env)


@wp.func
def tget(g: GB, env: int, k: int) -> wp.int64:
    """Counter ``k`` (layout.py: TM_*) of env."""
    if wp.static(CHECK_BOUNDS):
        check_index(k, TM_COUNT)
    return ld_i64(tm_base(g, env), k * (8 * TILE))


@wp.func
def tset(g: GB, env: int, k: int, v: wp.int64):
    if wp.static(CHECK_BOUNDS):
        check_index(k, TM_COUNT)
    st_i64(tm_base(g, env), k * (8 * TILE), v)


@wp.func
def cram_base(g: GB, env: int) -> wp.uint64:
    return env_base(g.cram_ptr, g.cram_tile, 1, env)


@wp.func
def cget(g: GB, env: int, off: int) -> int:
    """Byte ``off`` of env's cartridge RAM."""
    if wp.static(CHECK_BOUNDS):
        check_index(off, g.cram_tile // TILE)
    return ld_u8(cram_base(g, env), off * TILE)


@wp.func
def cset(g: GB, env: int, off: int, v: int):
    if wp.static(CHECK_BOUNDS):
        check_index(off, g.cram_tile // TILE)
    st_u8(cram_base(g, env), off * TILE, v)


@wp.func
def serset(g: GB, env: int, i: int, v: int):
    """Store byte v at position i of env's serial capture ring."""
    if wp.static(CHECK_BOUNDS):
        check_index(i, g.ser_cap)
    st_u8(env_base(g.ser_ptr, g.ser_tile, 1, env), i * TILE, v)


@wp.func
def apu_base(g: GB, env: int) -> wp.uint64:
    return env_base(g.apu_ptr, APU_TILE_BYTES, 4, env)


@wp.func
def aget(g: GB, env: int, k: int) -> int:
    """APU state field ``k`` (layout.py: A_*) of env."""
    return ld_i32(apu_base(g, env), k * (4 * TILE))


@wp.func
def aset(g: GB, env: int, k: int, v: int):
    st_i32(apu_base(g, env), k * (4 * TILE), v)
