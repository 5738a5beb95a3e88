"""PPU timing (no pixels): modes 2/3/0/1, LY, LYC, STAT line, VBlank, LCD on/off.

The PPU is event driven: ``S_PPU_MODE`` and ``LY`` hold the current state and
``T_PPU_NEXT`` the cycle of the next transition. ``ppu_sync`` walks the transitions up to a
cycle (a handful per scanline), so reads of STAT/LY, VRAM/OAM access checks and interrupt
checks see the state of the exact M-cycle. A line is drawn (``render.draw_line``), or
recorded to be drawn later (see "Deferred drawing" below), when it leaves mode 3, only in
the frame selected by ``GB.render_frame``.
"""

from __future__ import annotations

import os

from gbx_gameboy.kstate import (
    GB,
    load_gb,
    mem_base,
    mem_get,
    mget,
    mset,
    on_gpu,
    sget,
    sset,
    tget,
    tset,
)
from gbx_gameboy.layout import (
    CYCLES_PER_FRAME,
    IF,
    IO_OFF,
    LCDC,
    LY,
    LYC,
    OAM_OFF,
    PPU_BLANK_FRAME,
    PPU_FIRST_LINE,
    PPU_LY153_GAP,
    PPU_VBLANK_PENDING,
    S_LFRAMES,
    S_MODE3_LEN,
    S_PPU_FLAGS,
    S_PPU_MODE,
    S_PPU_PHASE,
    S_STAT_LINE,
    S_WIN_LINE,
    SCX,
    STAT,
    T_LINE_AT,
    T_PPU_NEXT,
    TM_FRAMES,
    WX,
    WY,
)
from gbx_gameboy.timer import raise_if
from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})
# Cold paths are ``wp.func(inline=False)``: one call instead of a copy at every call
# site keeps the kernel small and its CPU/NVRTC compile time short. They take ``g.ref``
# rather than the struct itself (see kstate.py: a by-value struct costs a stack copy).



@wp.func
def _no_draw(
    mb: wp.uint64,
    env: int,
    ly: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
    regs: wp.vec2i,
) -> int:
    return win_line


@wp.func
def _no_regs(mb: wp.uint64) -> wp.vec2i:
    return wp.vec2i(0, 0)


@wp.func
def _no_window(ly: int, win_line: int, regs: wp.vec2i) -> int:
    return win_line


# GBX_GAMEBOY_NO_RENDER=1 builds a timing-only kernel (no pixels; compiles faster), e.g. for
# headless conformance runs. Without the renderer module the same fallback is used.
if os.environ.get("GBX_GAMEBOY_NO_RENDER", "") == "1":
    draw_line = draw_line_small = _no_draw
    line_regs = _no_regs
    window_after = _no_window
else:
    try:
        from gbx_gameboy.render import draw_line, draw_line_small, line_regs, window_after
    except ModuleNotFoundError as exc:
        if exc.name != "gbx_gameboy.render":
            raise
        draw_line = draw_line_small = _no_draw
        line_regs = _no_regs
        window_after = _no_window


# Deferred drawing. A line of the drawn frame is not drawn when it leaves mode 3: its LCD
# registers (render.line_regs) are recorded in g.lines and the line joins the pending ones
# in g.pend (count, first line, the window line counter at the first; they are always
# consecutive). Only VRAM, OAM and those registers make a line's picture, so the pending
# lines are drawn in the thread (flush_draw) only before VRAM or OAM changes (a CPU write
# to either, OAM DMA, the OAM corruption bug); the rest are drawn after the launch by a
# kernel of one thread per (env, line) (cpu.draw_pending_kernel), instead of one lane at
# a time while the rest of its warp waits, or, for the CPU variant's lone thread, instead
# of in its serial walk over the frame. Each line is drawn from the registers, VRAM and
# OAM it was due with, as drawing it at once would. The CUDA variant always defers; the
# CPU variant's copies of these functions (they see HOST = True, cpu._host_function) only
# in its GPU build (kstate.on_gpu): on the CPU device it draws at once, where a later
# kernel would draw the same lines on the same core.
HOST = False


@wp.func
def draw_in_thread(
    mb: wp.uint64, env: int, ly: int, win_line: int, fb: wp.array3d(dtype=wp.uint8),
    regs: wp.vec2i,
) -> int:
    """A line drawn by the run kernel's thread itself. The CPU variant on the CPU device
    draws every observed line here, with render.draw_line. On a GPU, and in the CUDA
    variant on either device, only the rare ones are (pending lines before VRAM or OAM
    changes, the lines of a frame the LCD blanks), with render.draw_line_small: drawn
    inline on a rare path, its few registers keep the run kernel's own."""
    if wp.static(HOST):
        if not on_gpu():
            return draw_line(mb, env, ly, win_line, fb, regs)
    return draw_line_small(mb, env, ly, win_line, fb, regs)


@wp.func(inline=False)
def flush_draw(ref: wp.uint64, env: int):
    """Draw the pending lines now, before VRAM or OAM changes."""
    g = load_gb(ref)
    count = g.pend[env, 0]
    if count > 0:
        mb = mem_base(g, env)
        win = g.pend[env, 2]
        first = g.pend[env, 1]
        for k in range(count):
            ly = first + k
            if ly >= 0 and ly < 144:  # a bad state cannot reach another env's records
                win = draw_in_thread(mb, env, ly, win, g.fb, g.lines[env, ly])
        g.pend[env, 0] = 0


@wp.func
def flush_pending(g: GB, env: int):
    """VRAM or OAM is about to change: draw the lines still pending with what they were
    due with (one load when none is)."""
    if g.pend[env, 0] != 0:
        flush_draw(g.ref, env)


@wp.func
def defer_lines(g: GB, env: int, mb: wp.uint64, ly: int, n: int):
    """Lines ly .. ly + n - 1 (drawn with the registers of the moment) join the pending
    ones (which end at ly - 1, if any), and the window line counter moves on as drawing
    them would move it."""
    if g.pend[env, 0] == 0:
        g.pend[env, 1] = ly
        g.pend[env, 2] = sget(g, env, S_WIN_LINE)
    g.pend[env, 0] = g.pend[env, 0] + n
    regs = line_regs(mb)
    win = sget(g, env, S_WIN_LINE)
    for k in range(n):
        if ly + k >= 0 and ly + k < 144:  # as in flush_draw
            g.lines[env, ly + k] = regs
        win = window_after(ly + k, win, regs)
    sset(g, env, S_WIN_LINE, win)


LINE_CYCLES = 456
# Pan Docs (mode 3 length): when the window starts on a line the background fetcher is
# set up again for it, which stalls the pixels 6 dots.
WINDOW_DOTS = 6
MODE3_BASE = 172
# Longest object penalty: 10 fetches of 6 dots, each in its own tile waiting 5 dots.
MAX_OBJECT_PENALTY = 10 * (6 + 5)
# A sync to cycle t treats lines whose mode 3 ended before t - SEEN_MARGIN as unobserved.
SEEN_MARGIN = 8

# Scanline phases (S_PPU_PHASE), dots counted from the LY change; each phase ends at
# T_PPU_NEXT. The dot constants come from GB.ppu_* (machine.PPU_TIMING).
PH_LINE_START = 0  # until ppu_m2: LY changed, OAM-scan IRQ condition up, STAT mode 0
PH_OAM = 1  # mode 2 until ppu_m3
PH_DRAW = 2  # mode 3 for mode3_length() dots
PH_HBLANK = 3  # mode 0 until ppu_pre dots before the end of the line
PH_VBLANK = 4  # a whole line in mode 1
PH_PRE = 5  # last ppu_pre dots of a line: OAM-scan IRQ of the next line already up
PH_LINE153 = 6  # line 153 after its first LY153_DOTS: mode 1, LY already reads 0
# DMG: LY reads 153 only for the first M-cycle of line 153, then 0 until line 0 starts.
# The LY=LYC comparison follows it with a gap: LYC=153 matches in that first M-cycle,
# nothing in the next one (PPU_LY153_GAP), and LYC=0 from the third on.
LY153_DOTS = 4
LY153_GAP_DOTS = 4


@wp.func
def mode3_length(g: GB, env: int) -> int:
    """Mode 3 dots without objects: fine scroll discards SCX%8 pixels, and on a line where
    the window starts the fetcher restarts for it (WINDOW_DOTS); the delay is seen in whole
    M-cycles (rounded up)."""
    extra = mget(g, env, IO_OFF + SCX) & 7
    lcdc = mget(g, env, IO_OFF + LCDC)
    ly = mget(g, env, IO_OFF + LY)
    if (lcdc & 0x21) == 0x21 and ly >= mget(g, env, IO_OFF + WY) and ly < 144:
        if mget(g, env, IO_OFF + WX) <= 166:
            extra += WINDOW_DOTS
    return MODE3_BASE + (extra + 3) // 4 * 4


@wp.func(inline=False)
def object_dots(mb: wp.uint64, ly: int) -> int:
    """Dots the objects fetched on line ly add to mode 3.

    The line's objects are the first 10 in OAM order whose rows cover it (X does not
    matter for the selection); those with X < 168 are fetched (LCDC bit 1 set). Each
    fetch stalls the pixel pipeline 6 dots. The first object whose leftmost pixel falls
    in a given background (or window) tile also waits for the background fetcher to
    finish that tile: 5 dots minus the pixel's offset inside the tile, at least 0.
    """
    lcdc = mem_get(mb, IO_OFF + LCDC)
    dots = int(0)
    if (lcdc & 0x02) != 0:
        height = int(8)
        if (lcdc & 0x04) != 0:
            height = int(16)
        scx = mem_get(mb, IO_OFF + SCX)
        wx = mem_get(mb, IO_OFF + WX)
        win_on = (lcdc & 0x21) == 0x21 and ly >= mem_get(mb, IO_OFF + WY) and wx <= 166
        bg_tiles = int(0)  # background tile columns already waited for
        win_tiles = int(0)  # window tile columns already waited for
        count = int(0)
        i = int(0)
        while i < 40 and count < 10:
            top = mem_get(mb, OAM_OFF + 4 * i) - 16
            if ly >= top and ly < top + height:
                count += 1
                x = mem_get(mb, OAM_OFF + 4 * i + 1)
                if x < 168:
                    dots += 6
                    px = x - 8  # the object's leftmost pixel on the screen
                    if win_on and px >= wx - 7:
                        wpx = px - (wx - 7)
                        bit = 1 << (wpx >> 3)
                        if (win_tiles & bit) == 0:
                            win_tiles = win_tiles | bit
                            dots += wp.max(5 - (wpx & 7), 0)
                    else:
                        # Tile columns counted from the one holding screen pixel -8: at
                        # most 22 of them, so the mask never reaches the sign bit.
                        bit = 1 << (((px + 8 + scx) >> 3) - (scx >> 3))
                        if (bg_tiles & bit) == 0:
                            bg_tiles = bg_tiles | bit
                            dots += wp.max(5 - ((px + scx) & 7), 0)
            i += 1
    return dots


@wp.func
def lcdon_line_end(g: GB, env: int) -> bool:
    """The last ``ppu_pre`` dots of the first line after the LCD is switched on.

    That line is shorter than the others as LY shows it: LY reads 1 from 452 cycles
    after the LCDC write (blargg ``oam_bug/1-lcd_sync``, mooneye ``lcdon_timing``), while
    the next line's OAM scan, access windows and modes keep their times (mooneye
    ``lcdon_write_timing``, blargg ``oam_bug/4-scanline_timing``). Meanwhile the LY=LYC
    comparison matches neither the old nor the new line (mooneye ``lcdon_timing``'s STAT
    reads with LYC=0 and LYC=1)."""
    first_line = (sget(g, env, S_PPU_FLAGS) & PPU_FIRST_LINE) != 0
    return sget(g, env, S_PPU_PHASE) == PH_PRE and first_line


@wp.func
def ly_matches(g: GB, env: int) -> bool:
    """The LY=LYC comparison (STAT bit 2 and its interrupt condition).

    Two gaps match nothing: the end of the first line after LCD on (``lcdon_line_end``)
    and, in line 153, the M-cycle after LY turned from 153 to 0: the comparison takes one
    M-cycle to follow a new LY value, as at every LY change, and in line 153 that change
    comes one M-cycle into the line (DMG measurements of the docboy test suite; LYC=0
    therefore matches, and interrupts, 8 dots into line 153)."""
    same = mget(g, env, IO_OFF + LY) == mget(g, env, IO_OFF + LYC)
    flags = sget(g, env, S_PPU_FLAGS)
    if same and (flags & (PPU_FIRST_LINE | PPU_LY153_GAP)) != 0:
        same = (flags & PPU_LY153_GAP) == 0 and not lcdon_line_end(g, env)
    return same


@wp.func(inline=False)
def stat_update(ref: wp.uint64, env: int):
    """Re-evaluate the STAT interrupt line; a rising edge requests IF bit 1."""
    g = load_gb(ref)
    line = 0
    if (mget(g, env, IO_OFF + LCDC) & 0x80) != 0:
        stat = mget(g, env, IO_OFF + STAT)
        mode = sget(g, env, S_PPU_MODE)
        phase = sget(g, env, S_PPU_PHASE)
        ly = mget(g, env, IO_OFF + LY)
        if (stat & 0x40) != 0 and ly_matches(g, env):
            line = 1
        if mode == 0 and (phase == PH_HBLANK or phase == PH_PRE) and (stat & 0x08) != 0:
            line = 1
        # Lines 1-143 raise the OAM-scan condition as LY changes; line 0 only at mode 2.
        oam_cond = mode == 2
        if phase == PH_LINE_START and ly < 144 and (ly > 0 or g.ppu_l0 != 0):
            oam_cond = True
        if phase == PH_PRE and ly < 143:
            oam_cond = True
        if oam_cond and (stat & 0x20) != 0:
            line = 1
        if mode == 1 and (stat & 0x10) != 0:
            line = 1
        if mode == 1 and ly == 144 and (stat & 0x20) != 0:
            line = 1  # DMG: the OAM condition also fires as VBlank starts
    if line != 0 and sget(g, env, S_STAT_LINE) == 0:
        raise_if(g, env, 2)
    sset(g, env, S_STAT_LINE, line)


@wp.func(inline=False)
def stat_write_quirk(ref: wp.uint64, env: int):
    """DMG: a STAT write first acts as if every interrupt-enable bit (3-6) were set for one
    cycle, so it requests the STAT interrupt when any condition holds (mode 0, 1 or 2, or
    LY=LYC) and the line was low. The caller then stores the written value and
    re-evaluates the line."""
    g = load_gb(ref)
    mset(g, env, IO_OFF + STAT, mget(g, env, IO_OFF + STAT) | 0x78)
    stat_update(g.ref, env)


@wp.func
def blank_rows(g: GB, env: int, first: int, last: int):
    """Rows first..last-1 of env's framebuffer white: what a DMG screen shows with the LCD
    off, and during the first frame after it is turned on."""
    for y in range(first, last):
        for x in range(160):
            g.fb[env, y, x] = wp.uint8(0)


@wp.func
def blank_screen(g: GB, env: int):
    """The drawn frame's screen white (the LCD is off): lines still pending would draw
    over it, so they are dropped."""
    g.pend[env, 0] = 0
    blank_rows(g, env, 0, 144)


@wp.func
def frame_done(g: GB, env: int):
    tset(g, env, TM_FRAMES, tget(g, env, TM_FRAMES) + wp.int64(1))
    sset(g, env, S_LFRAMES, sget(g, env, S_LFRAMES) + 1)


@wp.func
def ppu_sync(ref: wp.uint64, env: int, t: int):
    """Apply every PPU transition at cycles <= t (the CPU may look at the PPU from t on).

    Whatever the CPU saw of the PPU made it sync then, so lines whose mode 3 ended before
    t were not looked at: their object scans are skipped (see ``ppu_advance``)."""
    ppu_advance(ref, env, t, t - SEEN_MARGIN)


@wp.func
def ppu_cpu_event(g: GB, env: int) -> int:
    """The next cycle at which the PPU can interrupt the CPU or complete a frame.

    With the LCD on and no STAT interrupt source enabled, that is the start of the next
    VBlank: the transitions before it raise nothing, and they are applied lazily, when the
    CPU reads or writes PPU state (every such access syncs the PPU first, so it sees the
    exact cycle and lines are drawn with the registers of their time) or at VBlank. Lines
    start every LINE_CYCLES, so the time follows from the last line start even when LY
    itself is not caught up. Otherwise it is the next transition itself."""
    nxt = sget(g, env, T_PPU_NEXT)
    lazy = (mget(g, env, IO_OFF + LCDC) & 0x80) != 0
    lazy = lazy and (mget(g, env, IO_OFF + STAT) & 0x78) == 0
    if lazy and (sget(g, env, S_PPU_FLAGS) & PPU_FIRST_LINE) == 0:
        ly = mget(g, env, IO_OFF + LY)
        lines = 144 - ly
        if ly >= 144:
            lines = 154 - ly + 144
        elif ly == 0 and sget(g, env, S_PPU_PHASE) == PH_LINE153:
            lines = 1 + 144  # line 153 with LY already reading 0
        nxt = wp.max(nxt, sget(g, env, T_LINE_AT) + lines * LINE_CYCLES)
    return nxt


@wp.func(inline=False)
def ppu_advance(ref: wp.uint64, env: int, t: int, unobserved_until: int):
    """Apply every PPU transition at cycles <= t.

    ``unobserved_until``: the CPU provably neither reads PPU state (STAT, VRAM/OAM access
    windows, register writes) nor takes a PPU interrupt before this cycle; -1 when it may
    at any time. A line whose whole mode 3 ends before it skips the object scan: its
    length only changes when mode 0 starts, which nothing can see then (the line is drawn
    from the same, unchanged registers and its end does not move). That keeps a halted
    CPU, the common case while a game waits for VBlank, free of the scan's cost.
    The drawn frame's lines are recorded to be drawn later where the build defers
    drawing (see flush_draw).
    """
    g = load_gb(ref)
    while sget(g, env, T_PPU_NEXT) <= t:
        ev = sget(g, env, T_PPU_NEXT)
        if (mget(g, env, IO_OFF + LCDC) & 0x80) == 0:
            if g.render_frame == sget(g, env, S_LFRAMES):
                blank_screen(g, env)  # the observed frame passed with the LCD off
            frame_done(g, env)  # LCD off: a frame still lasts 70224 cycles
            sset(g, env, T_PPU_NEXT, ev + CYCLES_PER_FRAME)
        else:
            phase = sget(g, env, S_PPU_PHASE)
            mode = sget(g, env, S_PPU_MODE)
            ly = mget(g, env, IO_OFF + LY)
            nxt = ev
            if phase == PH_LINE_START:
                phase = PH_OAM
                mode = 2
                nxt = ev + (g.ppu_m3 - g.ppu_m2)
            elif phase == PH_OAM:
                phase = PH_DRAW
                mode = 3
                len3 = mode3_length(g, env)
                unseen = ev + len3 + MAX_OBJECT_PENALTY + 8 <= unobserved_until
                if not unseen or (mget(g, env, IO_OFF + STAT) & 0x08) != 0:
                    # The CPU sees the object delay in whole M-cycles, rounded down
                    # (fitted to the mooneye sprite timing ROM).
                    len3 = len3 + object_dots(mem_base(g, env), ly) // 4 * 4
                sset(g, env, S_MODE3_LEN, len3)
                nxt = ev + len3
            elif phase == PH_DRAW:
                if g.render_frame == sget(g, env, S_LFRAMES):
                    mb = mem_base(g, env)
                    blank = (sget(g, env, S_PPU_FLAGS) & PPU_BLANK_FRAME) != 0
                    later = wp.where(not blank and ly < 144, 1, 0)
                    if wp.static(HOST):
                        later = wp.where(on_gpu(), later, 0)
                    if later != 0:
                        defer_lines(g, env, mb, ly, 1)
                    else:
                        win_line = draw_in_thread(mb, env, ly, sget(g, env, S_WIN_LINE),
                                                  g.fb, line_regs(mb))
                        sset(g, env, S_WIN_LINE, win_line)
                        if blank and ly < 144:
                            blank_rows(g, env, ly, ly + 1)  # drawn (window counter), not shown
                phase = PH_HBLANK
                mode = 0
                nxt = ev + (LINE_CYCLES - g.ppu_m3 - g.ppu_pre) - sget(g, env, S_MODE3_LEN)
                if g.ppu_pre == 0:
                    phase = PH_PRE
            elif phase == PH_HBLANK:
                phase = PH_PRE
                nxt = ev + g.ppu_pre
            elif phase == PH_VBLANK and ly == 153:
                phase = PH_LINE153
                mset(g, env, IO_OFF + LY, 0)
                sset(g, env, S_PPU_FLAGS, sget(g, env, S_PPU_FLAGS) | PPU_LY153_GAP)
                nxt = ev + LY153_GAP_DOTS
            elif phase == PH_LINE153 and (sget(g, env, S_PPU_FLAGS) & PPU_LY153_GAP) != 0:
                sset(g, env, S_PPU_FLAGS, sget(g, env, S_PPU_FLAGS) & ~PPU_LY153_GAP)
                nxt = ev + (LINE_CYCLES - LY153_DOTS - LY153_GAP_DOTS)
            else:  # end of a line (PH_PRE, a VBlank line or line 153)
                ly = ly + 1
                if phase == PH_LINE153:
                    ly = 154
                nxt = ev + LINE_CYCLES
                if ly == 153:
                    nxt = ev + LY153_DOTS
                flags = sget(g, env, S_PPU_FLAGS) & PPU_BLANK_FRAME
                if ly >= 144:
                    flags = 0  # the blank first frame after LCD on ends as VBlank starts
                if ly == 144:
                    phase = PH_VBLANK
                    mode = 1
                    if (mget(g, env, IO_OFF + IF) & 1) != 0:
                        flags = PPU_VBLANK_PENDING  # an older request: no sampling delay
                    raise_if(g, env, 1)
                    frame_done(g, env)
                elif ly > 153:
                    ly = 0
                    phase = PH_LINE_START
                    mode = 0
                    sset(g, env, S_WIN_LINE, 0)
                    nxt = ev + g.ppu_m2
                elif ly < 144:
                    phase = PH_LINE_START
                    mode = 0
                    # Whole lines before t that nothing can see (no STAT source enabled,
                    # frame not drawn) are skipped in one go: lazy catch-up reaches here
                    # with up to a frame's lines due, five transitions each.
                    skip = (t - ev) // LINE_CYCLES
                    drawn = g.render_frame == sget(g, env, S_LFRAMES)
                    later = wp.where(flags == 0, 1, 0)  # the drawn frame's lines may wait
                    if wp.static(HOST):
                        later = wp.where(on_gpu(), later, 0)
                    if skip > 0 and (not drawn or later != 0):
                        if (mget(g, env, IO_OFF + STAT) & 0x78) == 0:
                            skip = wp.min(skip, 143 - ly)
                            if drawn:
                                # The skipped lines join the pending ones (ly follows them).
                                defer_lines(g, env, mem_base(g, env), ly, skip)
                            ly = ly + skip
                            ev = ev + skip * LINE_CYCLES
                    nxt = ev + g.ppu_m2
                mset(g, env, IO_OFF + LY, ly)
                sset(g, env, T_LINE_AT, ev)
                sset(g, env, S_PPU_FLAGS, flags)  # the first line after LCD on is over
            sset(g, env, S_PPU_PHASE, phase)
            sset(g, env, S_PPU_MODE, mode)
            sset(g, env, T_PPU_NEXT, nxt)
            # With no STAT source enabled and the line low, the line stays low: no call
            # (an out-of-line call per transition, which the rest of a warp waits for).
            if (mget(g, env, IO_OFF + STAT) & 0x78) != 0 or sget(g, env, S_STAT_LINE) != 0:
                stat_update(g.ref, env)


@wp.func(inline=False)
def lcdc_write(ref: wp.uint64, env: int, v: int, t: int):
    g = load_gb(ref)
    ppu_sync(g.ref, env, t)
    old = mget(g, env, IO_OFF + LCDC)
    mset(g, env, IO_OFF + LCDC, v)
    if (old & 0x80) != 0 and (v & 0x80) == 0:
        mset(g, env, IO_OFF + LY, 0)
        sset(g, env, S_PPU_MODE, 0)
        sset(g, env, S_PPU_PHASE, PH_HBLANK)
        sset(g, env, S_PPU_FLAGS, 0)
        sset(g, env, T_PPU_NEXT, t + CYCLES_PER_FRAME)
        if g.render_frame == sget(g, env, S_LFRAMES):
            blank_screen(g, env)  # the screen goes blank at once
    elif (old & 0x80) == 0 and (v & 0x80) != 0:
        mset(g, env, IO_OFF + LY, 0)
        sset(g, env, S_PPU_MODE, 0)
        sset(g, env, S_PPU_PHASE, PH_OAM)  # no OAM scan IRQ or mode 2 on this first line
        sset(g, env, S_PPU_FLAGS, PPU_FIRST_LINE | PPU_BLANK_FRAME)
        sset(g, env, S_WIN_LINE, 0)
        sset(g, env, T_PPU_NEXT, t + g.lcdon_m3)
        sset(g, env, T_LINE_AT, t + g.lcdon_m3 - g.ppu_m3)  # as if the line had started earlier
    stat_update(g.ref, env)


@wp.func(inline=False)
def stat_read(ref: wp.uint64, env: int, t: int) -> int:
    g = load_gb(ref)
    if t >= sget(g, env, T_PPU_NEXT):
        ppu_sync(g.ref, env, t)
    v = (mget(g, env, IO_OFF + STAT) & 0x78) | 0x80
    if (mget(g, env, IO_OFF + LCDC) & 0x80) != 0:
        v = v | sget(g, env, S_PPU_MODE)
        if ly_matches(g, env):
            v = v | 4
    return v


# What a CPU access checked by ``vram_oam_blocked`` touches.
ACCESS_VRAM = 0
ACCESS_OAM_WRITE = 1
ACCESS_OAM_READ = 2


@wp.func
def vram_oam_blocked(g: GB, env: int, t: int, access: int) -> bool:
    """Whether a CPU access at cycle t is refused: VRAM during mode 3, OAM during the OAM
    scan and mode 3. The access windows are offset from the STAT-visible modes. OAM
    writes get through in the 4 dots between the scan's block and mode 3; reads stay
    blocked there (DMG: mooneye ``lcdon_timing``'s reads of lines 1 and 2, against
    ``lcdon_write_timing``'s writes)."""
    s = t - g.ppu_lag
    if s >= sget(g, env, T_PPU_NEXT):
        ppu_sync(g.ref, env, s)
    blocked = False
    visible = mget(g, env, IO_OFF + LY) < 144 and sget(g, env, S_PPU_PHASE) != PH_LINE153
    if (mget(g, env, IO_OFF + LCDC) & 0x80) != 0 and visible:
        d = s - sget(g, env, T_LINE_AT)
        m3s = g.ppu_m3 + g.acc_m3_shift
        m3e = g.ppu_m3 + sget(g, env, S_MODE3_LEN) + g.acc_m3_end_shift
        if sget(g, env, S_PPU_PHASE) == PH_OAM or sget(g, env, S_PPU_PHASE) == PH_LINE_START:
            m3e = g.ppu_m3 + mode3_length(g, env) + g.acc_m3_end_shift  # not latched yet
        blocked = d >= m3s and d < m3e
        if access != ACCESS_VRAM and (sget(g, env, S_PPU_FLAGS) & PPU_FIRST_LINE) == 0:
            m2e = g.acc_m2_end
            if access == ACCESS_OAM_READ:
                m2e = m3s
            if d >= g.acc_m2_start and d < m2e:
                blocked = True
    return blocked
