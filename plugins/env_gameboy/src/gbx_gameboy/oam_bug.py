"""The DMG OAM corruption bug.

During the OAM scan (mode 2) of a visible line the PPU reads OAM one row of 8 bytes (4
little-endian 16-bit words, two objects) per M-cycle: 20 rows in 20 M-cycles. A CPU
access to FE00-FEFF in one of those M-cycles, or the CPU's 16-bit increment/decrement
unit putting a value in FE00-FEFF on the address bus, disturbs the row the PPU is reading
at that moment. What happens depends only on the kind of access and on that row, never on
the address or the value:

* write (a CPU write, or the increment/decrement unit alone): the row's first word
  becomes ``((a ^ c) & (b ^ c)) ^ c`` (a: that word, b and c: the first and third word of
  the preceding row) and its other three words are copied from the preceding row;
* read: the same with ``b | (a & c)``;
* a read in the same M-cycle as an increment/decrement (``ld a, [hl+]``, the first read
  of ``pop``): first, unless the row is one of the first four or the last, the preceding
  row's first word becomes ``(b & (a | c | d)) | (a & c & d)`` (a: first word two rows
  up, b: that word, c: the current row's first word, d: the preceding row's third word)
  and the preceding row is copied over the current row and the row two up; then the read
  corruption above. A write in the same M-cycle as an increment/decrement acts as one
  write.

Row 0 is never corrupted. Nothing happens with the LCD off, outside the OAM scan, on
VBlank lines, or on the first line after the LCD is switched on (it has no OAM scan).

Where the CPU triggers it: reads and writes of FE00-FEFF go through the memory map's
out-of-line paths (memory.py); the increment/decrement unit's cases (``inc rr``/``dec rr``,
``ld sp, hl``, the stack pointer of ``push``/``call``/``rst`` and of an interrupt dispatch,
the first read of ``pop``/``ret`` and of ``ld a, [hl+/-]``) are one compare of a register
value with FE00-FEFF in the run loop (cpu.py), which calls in here only when it matches.
Cycle convention: ``t`` is the end of the M-cycle of the access, as for every memory
access; the PPU is seen ``ppu_lag`` cycles earlier, like the OAM access checks.
"""

from __future__ import annotations

from gbx_gameboy.decode import (
    DST16_SHIFT,
    NRD_SHIFT,
    NWR_SHIFT,
    OP16_DEC,
    OP16_INC,
    OP16_PASS,
    OP16_SHIFT,
    R16_HL,
    R16_SP,
    SPD_POP,
    SPD_PUSH,
    SPD_SHIFT,
    SRC16_SHIFT,
)
from gbx_gameboy.kstate import GB, load_gb, mget, mset, sget
from gbx_gameboy.layout import (
    IO_OFF,
    LCDC,
    LY,
    OAM_OFF,
    PPU_FIRST_LINE,
    S_PPU_FLAGS,
    S_PPU_PHASE,
    T_LINE_AT,
    T_PPU_NEXT,
)
from gbx_gameboy.ppu_timing import PH_LINE153, flush_pending, ppu_sync
from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})

OAM_BUG_WRITE = 0
OAM_BUG_READ = 1
OAM_BUG_READ_IDU = 2  # the extra part of a read with an increment/decrement in its M-cycle
OAM_ROWS = 20


@wp.func
def oam_word(g: GB, env: int, i: int) -> int:
    return mget(g, env, OAM_OFF + 2 * i) | (mget(g, env, OAM_OFF + 2 * i + 1) << 8)


@wp.func
def set_oam_word(g: GB, env: int, i: int, v: int):
    mset(g, env, OAM_OFF + 2 * i, v & 0xFF)
    mset(g, env, OAM_OFF + 2 * i + 1, (v >> 8) & 0xFF)


@wp.func
def copy_oam_row(g: GB, env: int, src: int, dst: int, first: int):
    """Words ``first``..3 of row ``src`` over the same words of row ``dst``."""
    for k in range(4):
        if k >= first:
            set_oam_word(g, env, 4 * dst + k, oam_word(g, env, 4 * src + k))


@wp.func
def oam_scan_row(g: GB, env: int, t: int) -> int:
    """The OAM row the PPU's OAM scan reads in the M-cycle that ends at cycle t, or -1.

    The CPU sees the scan as the OAM-blocked window at the start of the line
    (``acc_m2_start``..``acc_m2_end``, 19 M-cycles); row 0 is read in the M-cycle before
    it, so the window's M-cycles read rows 1-19 in turn."""
    s = t - g.ppu_lag
    if s >= sget(g, env, T_PPU_NEXT):
        ppu_sync(g.ref, env, s)
    row = int(-1)
    on = (mget(g, env, IO_OFF + LCDC) & 0x80) != 0
    visible = mget(g, env, IO_OFF + LY) < 144 and sget(g, env, S_PPU_PHASE) != PH_LINE153
    if on and visible and (sget(g, env, S_PPU_FLAGS) & PPU_FIRST_LINE) == 0:
        d = s - sget(g, env, T_LINE_AT)
        if d >= g.acc_m2_start and d < g.acc_m2_end:
            row = (d - g.acc_m2_start) // 4 + 1
    return row


@wp.func(inline=False)
def oam_bug(ref: wp.uint64, env: int, t: int, kind: int):
    """Apply the corruption of one access of ``kind`` (OAM_BUG_*) in the M-cycle ending at
    cycle t, if the OAM scan is reading a row other than row 0 then. Called only through
    ``oam_corrupt``."""
    g = load_gb(ref)
    row = oam_scan_row(g, env, t)
    if row >= 1 and row < OAM_ROWS:
        cur = 4 * row
        prev = cur - 4
        if kind == OAM_BUG_READ_IDU:
            # Only the increment/decrement's part; the read that follows adds its own.
            if row >= 4 and row < OAM_ROWS - 1:
                a = oam_word(g, env, prev - 4)
                b = oam_word(g, env, prev)
                c = oam_word(g, env, cur)
                d = oam_word(g, env, prev + 2)
                set_oam_word(g, env, prev, (b & (a | c | d)) | (a & c & d))
                copy_oam_row(g, env, row - 1, row, 0)
                copy_oam_row(g, env, row - 1, row - 2, 0)
        else:
            a = oam_word(g, env, cur)
            b = oam_word(g, env, prev)
            c = oam_word(g, env, prev + 2)
            v = ((a ^ c) & (b ^ c)) ^ c
            if kind == OAM_BUG_READ:
                v = b | (a & c)
            set_oam_word(g, env, cur, v)
            copy_oam_row(g, env, row - 1, row, 1)


@wp.func
def oam_corrupt(g: GB, env: int, t: int, kind: int):
    """``oam_bug`` after drawing the lines still pending (ppu_timing.flush_pending), which
    see OAM as it was: every OAM corruption goes through here. The drawing call stays out
    of ``oam_bug`` itself, which the run loop's per-instruction hook reaches through this
    module's out-of-line functions: there it made ptxas keep more of the CUDA variant's
    loop in local memory (its path 450 instructions instead of 424)."""
    flush_pending(g, env)
    oam_bug(g.ref, env, t, kind)


@wp.func(inline=False)
def oam_bug_idu(ref: wp.uint64, env: int, w0: int, w2: int, t: int):
    """The run loop found the 16-bit value of the instruction's increment/decrement
    candidate (its 16-bit source, or SP for a push) in FE00-FEFF, with the instruction's
    register work done at cycle t: ``inc rr``/``dec rr`` and ``ld sp, hl`` use the unit in
    their internal M-cycle, ``push``/``call``/``rst`` in the one before their writes (t + 4
    in every case). Other instructions do not use it on their own M-cycle."""
    nrd = (w0 >> NRD_SHIFT) & 3
    nwr = (w0 >> NWR_SHIFT) & 3
    spd = (w0 >> SPD_SHIFT) & 3
    op16 = (w2 >> OP16_SHIFT) & 7
    src16 = (w2 >> SRC16_SHIFT) & 7
    dst16 = (w2 >> DST16_SHIFT) & 7
    step = (op16 == OP16_INC or op16 == OP16_DEC) and nrd == 0 and nwr == 0
    ld_sp_hl = op16 == OP16_PASS and src16 == R16_HL and dst16 == R16_SP
    if step or ld_sp_hl or spd == SPD_PUSH:
        oam_corrupt(load_gb(ref), env, t + 4, OAM_BUG_WRITE)


@wp.func(inline=False)
def oam_bug_read_idu(ref: wp.uint64, env: int, w0: int, w2: int, t: int):
    """The run loop found the read address in FE00-FEFF, the first read at cycle t: for
    ``pop``/``ret`` (SP) and ``ld a, [hl+/-]`` the increment/decrement runs in that same
    M-cycle, which adds its part of the corruption before the read's own (the read
    itself, in memory.py, applies the read corruption)."""
    spd = (w0 >> SPD_SHIFT) & 3
    op16 = (w2 >> OP16_SHIFT) & 7
    if spd == SPD_POP or op16 == OP16_INC or op16 == OP16_DEC:
        oam_corrupt(load_gb(ref), env, t, OAM_BUG_READ_IDU)


@wp.func(inline=False)
def oam_bug_unit(ref: wp.uint64, env: int, w0: int, w2: int, t: int):
    """The CUDA run loop's one hook for both cases above: the value the instruction's
    increment/decrement unit may put on the bus in the M-cycle ending at cycle t (its first
    read's address when it reads, else its 16-bit source or SP) lies in FE00-FEFF."""
    if ((w0 >> NRD_SHIFT) & 3) != 0:
        oam_bug_read_idu(ref, env, w0, w2, t)
    else:
        oam_bug_idu(ref, env, w0, w2, t - 4)
