"""Scanline renderer of the DMG picture: background, window and objects.

``draw_line`` is a ``wp.func`` that draws one visible line of one env as it is when the
line leaves mode 3, only in frames that are observed (the run kernel draws it then, or
records its registers and draws it later). It reads VRAM and OAM from the tiled ``mem``
array through the env's base address (``kstate.mem_base``, see
:mod:`gbx_gameboy.layout`) and writes 160 shade indices (0..3, after BGP/OBP0/OBP1) to
``fb[env, ly, :]``.

Rendering a whole line at once (instead of a pixel FIFO) is exact for every
register write that lands between lines; writes in the middle of mode 3 take
effect from the next line. That is what dmg-acid2 and most games need.

A line's picture depends on VRAM, OAM and eight LCD registers (LCDC, SCX, SCY, WY, WX,
BGP, OBP0, OBP1), which ``line_regs`` packs into two words. ``draw_line`` draws from
those words rather than from the registers themselves, so a line can be drawn after the
registers have moved on (the run kernel's deferred drawing, ppu_timing.py, records each
line's words and draws the line later, while VRAM and OAM are as they were);
``render_line`` draws with the registers of the moment.

``draw_line`` works eight pixels at a time (one map entry and one tile row per plane and
group of eight, each object's tile row once per line) and stores four pixels per 32-bit
word: ``cpu.draw_pending_kernel`` draws the lines left after a launch with it, and the
CPU variant on the CPU device every line. ``draw_line_small`` draws the same picture a
pixel at a time with few registers and little code, for the rare lines a run kernel
draws itself on a GPU (ppu_timing.draw_in_thread).

``render_frames`` is a standalone kernel (one thread per env, lines in order)
used by tests and tools to draw the current VRAM/OAM/IO state of every env.
"""

from __future__ import annotations

from gbx_gameboy.kstate import CHECK_BOUNDS, check_index, env_base, mem_get
from gbx_gameboy.layout import (
    BGP,
    IO_OFF,
    LCDC,
    MEM_BYTES,
    MEM_TILE_BYTES,
    OAM_OFF,
    OBP0,
    OBP1,
    SCREEN_H,
    SCREEN_W,
    SCX,
    SCY,
    TILE,
    VRAM_OFF,
    WX,
    WY,
)
from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})

MAX_OBJS_PER_LINE = 10

# Python ints become compile-time constants inside the kernels.
_VRAM = wp.constant(VRAM_OFF)
_OAM = wp.constant(OAM_OFF)
_LCDC = wp.constant(IO_OFF + LCDC)
_SCY = wp.constant(IO_OFF + SCY)
_SCX = wp.constant(IO_OFF + SCX)
_BGP = wp.constant(IO_OFF + BGP)
_OBP0 = wp.constant(IO_OFF + OBP0)
_OBP1 = wp.constant(IO_OFF + OBP1)
_WY = wp.constant(IO_OFF + WY)
_WX = wp.constant(IO_OFF + WX)
_W = wp.constant(SCREEN_W)
_H = wp.constant(SCREEN_H)
_MAXOBJ = wp.constant(MAX_OBJS_PER_LINE)
_WORDS = wp.constant(SCREEN_W // 4)  # 32-bit words of four shades per line
_GROUPS = wp.constant(SCREEN_W // 8)  # groups of eight pixels per line

_vec10i = wp.types.vector(length=MAX_OBJS_PER_LINE, dtype=wp.int32)


@wp.func
def _rd(mb: wp.uint64, off: int) -> int:
    return mem_get(mb, off)


@wp.func
def _tile_pixel(
    mb: wp.uint64, tile_addr: int, row: int, col: int
) -> int:
    """Colour index 0..3 of pixel (row, col) of the tile at VRAM offset ``tile_addr``."""
    lo = _rd(mb, _VRAM + tile_addr + row * 2)
    hi = _rd(mb, _VRAM + tile_addr + row * 2 + 1)
    bit = 7 - col
    return ((lo >> bit) & 1) | (((hi >> bit) & 1) << 1)


@wp.func
def _map_pixel(
    mb: wp.uint64, map_base: int, unsigned_tiles: int, px: int, py: int
) -> int:
    """Colour index of pixel (px, py) of the 256x256 BG/window plane at ``map_base``.

    The plane is 32x32 tiles and wraps: coordinates are taken modulo 256, so a window
    line counter from a crafted state cannot index past the tile map."""
    tile_no = _rd(mb, _VRAM + map_base + ((py >> 3) & 31) * 32 + ((px >> 3) & 31))
    tile_addr = tile_no * 16
    if unsigned_tiles == 0:
        # 0x8800 addressing: signed tile number relative to 0x9000.
        if tile_no >= 128:
            tile_no = tile_no - 256
        tile_addr = 0x1000 + tile_no * 16
    return _tile_pixel(mb, tile_addr, py & 7, px & 7)


@wp.func
def _palette(pal: int, colour: int) -> int:
    return (pal >> (colour * 2)) & 3


@wp.func
def line_regs(mb: wp.uint64) -> wp.vec2i:
    """The LCD registers a line is drawn with, packed: LCDC, SCX, SCY and WY in bytes 0-3
    of the first word, WX, BGP, OBP0 and OBP1 in bytes 0-3 of the second."""
    return wp.vec2i(
        _rd(mb, _LCDC) | (_rd(mb, _SCX) << 8) | (_rd(mb, _SCY) << 16) | (_rd(mb, _WY) << 24),
        _rd(mb, _WX) | (_rd(mb, _BGP) << 8) | (_rd(mb, _OBP0) << 16) | (_rd(mb, _OBP1) << 24),
    )


@wp.func
def _reg(regs: wp.vec2i, word: int, byte: int) -> int:
    return (regs[word] >> (byte * 8)) & 0xFF


@wp.func
def window_after(ly: int, win_line: int, regs: wp.vec2i) -> int:
    """The window line counter after line ``ly`` drawn with ``regs`` (``line_regs``): what
    ``draw_line`` returns, without drawing."""
    if ly < 0 or ly >= _H:
        return win_line
    lcdc = _reg(regs, 0, 0)
    if (lcdc & 0x80) == 0 or (lcdc & 0x21) != 0x21:
        return win_line
    if ly >= _reg(regs, 0, 3) and _reg(regs, 1, 0) <= 166:
        return win_line + 1
    return win_line


@wp.func
def _tile_row_bits(
    mb: wp.uint64, map_base: int, unsigned_tiles: int, map_col: int, py: int
) -> int:
    """Row ``py & 7`` of the tile at map column ``map_col`` (wrapping) of the plane's map row
    holding plane line ``py``: its low bit plane in bits 0-7, its high one in bits 8-15,
    the leftmost pixel in bit 7 of each."""
    tile_no = _rd(mb, _VRAM + map_base + ((py >> 3) & 31) * 32 + (map_col & 31))
    tile_addr = tile_no * 16
    if unsigned_tiles == 0:
        if tile_no >= 128:
            tile_no = tile_no - 256
        tile_addr = 0x1000 + tile_no * 16
    row = (py & 7) * 2
    return _rd(mb, _VRAM + tile_addr + row) | (_rd(mb, _VRAM + tile_addr + row + 1) << 8)


@wp.func
def _eight_from(left: int, right: int, skip: int) -> int:
    """The 8 pixels that start ``skip`` (0-7) pixels into tile row ``left`` and go on into
    ``right`` (``_tile_row_bits`` words), as one such word."""
    lo = ((((left & 0xFF) << 8) | (right & 0xFF)) >> (8 - skip)) & 0xFF
    hi = (((left & 0xFF00) | (right >> 8)) >> (8 - skip)) & 0xFF
    return lo | (hi << 8)


@wp.func
def _reverse8(b: int) -> int:
    b = ((b & 0xF0) >> 4) | ((b & 0x0F) << 4)
    b = ((b & 0xCC) >> 2) | ((b & 0x33) << 2)
    return ((b & 0xAA) >> 1) | ((b & 0x55) << 1)


@wp.func
def _shifted8(bits: int, by: int) -> int:
    """An 8-pixel mask (leftmost pixel in bit 7) moved ``by`` (-7..7) pixels to the right."""
    if by >= 0:
        return bits >> by
    return (bits << (-by)) & 0xFF


@wp.func
def _object_row(mb: wp.uint64, o: int, ly: int, obj_h: int) -> int:
    """The tile row that the object at OAM offset ``o`` shows on line ``ly`` (which its
    rows cover): its low bit plane in bits 0-7 and high one in bits 8-15, X flip applied
    (the leftmost pixel in bit 7 of each), OBP1 in bit 16, BG-over-OBJ in bit 17."""
    oy = _rd(mb, o) - 16
    tile = _rd(mb, o + 2)
    attr = _rd(mb, o + 3)
    if obj_h == 16:
        tile = tile & 0xFE  # 8x16: bit 0 of the tile number is ignored
    row = ly - oy
    if (attr & 0x40) != 0:
        row = obj_h - 1 - row
    lo = _rd(mb, _VRAM + tile * 16 + row * 2)
    hi = _rd(mb, _VRAM + tile * 16 + row * 2 + 1)
    if (attr & 0x20) != 0:
        lo = _reverse8(lo)
        hi = _reverse8(hi)
    return lo | (hi << 8) | (((attr >> 4) & 1) << 16) | (((attr >> 7) & 1) << 17)


@wp.func
def _bit_mask(pal: int, bit: int) -> int:
    """0xFF where bit ``bit`` of palette ``pal`` is set, else 0: one bit of one colour's
    shade for all eight pixels of a group."""
    return (0 - ((pal >> bit) & 1)) & 0xFF


@wp.func
def _pick(sel: int, a: int, b: int) -> int:
    """The bits of ``b`` where ``sel`` has ones and of ``a`` elsewhere."""
    return (a & ~sel) | (b & sel)


@wp.func
def _spread4(nib: int) -> int:
    """Bits 3, 2, 1 and 0 of ``nib`` as bit 0 of bytes 0, 1, 2 and 3: one multiply places
    each bit (3 + 9k for bit 3 - k, no two partial products on one bit), the shift and mask
    keep those four."""
    return ((nib * 0x08040201) >> 3) & 0x01010101


@wp.func_native("*(uint32_t*)(&wp::index(fb, env, ly, 4 * w)) = (uint32_t)v;")
def _st_word(fb: wp.array3d(dtype=wp.uint8), env: int, ly: int, w: int, v: int):
    """Pixels 4w .. 4w+3 of line ``ly`` of ``env`` in one 32-bit store (``v``'s bytes, low
    byte leftmost); ``fb`` is contiguous, so its rows of 160 bytes keep words aligned."""
    ...


@wp.func
def draw_line(
    mb: wp.uint64,
    env: int,
    ly: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
    regs: wp.vec2i,
) -> int:
    """Draw line ``ly`` of ``env`` into ``fb[env, ly, :]`` with the LCD registers ``regs``
    (``line_regs``) and the env's VRAM and OAM; return the new window line counter.

    Eight pixels at a time: each group of eight takes one new map entry and tile row per
    plane (the one before it is carried over), each object covering the line its tile
    row once, and a group's pixels are decided as bit masks (object pixel present, its
    palette, BG-over-OBJ), the highest-priority opaque object claiming a pixel first.
    The shades too are two bit masks, each palette taken as one mask per shade bit and
    colour; one multiply spreads four pixels' bits into the bytes of a 32-bit store. A
    line costs about 60 byte loads and 40 stores, where a pixel at a time costs three
    loads and one store per pixel.

    Only lines 0-143 exist in the framebuffer: any other ``ly`` draws nothing (the PPU
    never draws VBlank lines; the guard keeps a bad state from writing another env's rows).
    ``fb`` must be contiguous (``_st_word``).
    """
    if ly < 0 or ly >= _H:
        return win_line
    if wp.static(CHECK_BOUNDS):
        check_index(ly, _H)  # the framebuffer row (a Warp array, not a kstate accessor)
    lcdc = _reg(regs, 0, 0)
    if (lcdc & 0x80) == 0:
        # LCD off: the DMG shows a blank (white) screen.
        for w in range(_WORDS):
            _st_word(fb, env, ly, w, 0)
        return win_line

    bg_on = lcdc & 0x01
    obj_on = (lcdc >> 1) & 1
    obj_h = wp.int32(8)
    if (lcdc & 0x04) != 0:
        obj_h = 16
    unsigned_tiles = (lcdc >> 4) & 1
    bg_map = wp.int32(0x1800)
    if (lcdc & 0x08) != 0:
        bg_map = 0x1C00
    win_map = wp.int32(0x1800)
    if (lcdc & 0x40) != 0:
        win_map = 0x1C00
    scx = _reg(regs, 0, 1)
    scy = _reg(regs, 0, 2)
    wy = _reg(regs, 0, 3)
    wx = _reg(regs, 1, 0)
    bgp = _reg(regs, 1, 1)
    obp0 = _reg(regs, 1, 2)
    obp1 = _reg(regs, 1, 3)

    # LCDC bit 0 off hides the window too (DMG).
    win_active = wp.int32(0)
    if bg_on != 0 and (lcdc & 0x20) != 0 and ly >= wy and wx <= 166:
        win_active = 1
    win_x0 = wx - 7

    # OAM scan: the first 10 objects (in OAM order) whose rows cover this line,
    # whatever their X. Then order them by drawing priority: lower X first,
    # equal X keeps OAM order (insertion sort is stable).
    objs = _vec10i()
    nobj = wp.int32(0)
    if obj_on != 0:
        for i in range(40):
            if nobj < _MAXOBJ:
                oy = _rd(mb, _OAM + i * 4) - 16
                if ly >= oy and ly < oy + obj_h:
                    objs[nobj] = i
                    nobj += 1
        for a in range(1, nobj):
            cur = objs[a]
            cur_x = _rd(mb, _OAM + cur * 4 + 1)
            b = a - 1
            while b >= 0 and _rd(mb, _OAM + objs[b] * 4 + 1) > cur_x:
                objs[b + 1] = objs[b]
                b -= 1
            objs[b + 1] = cur
    # Each object in that order as its screen X and its tile row (_object_row).
    obj_x = _vec10i()
    obj_row = _vec10i()
    for k in range(nobj):
        o = _OAM + objs[k] * 4
        obj_x[k] = _rd(mb, o + 1) - 8
        obj_row[k] = _object_row(mb, o, ly, obj_h)

    # Each palette as bit masks: shade bit b of colour c, for a whole group at once
    # (colour 0 of an object is transparent, so its palettes need colours 1-3 only).
    g00 = _bit_mask(bgp, 0)
    g01 = _bit_mask(bgp, 1)
    g10 = _bit_mask(bgp, 2)
    g11 = _bit_mask(bgp, 3)
    g20 = _bit_mask(bgp, 4)
    g21 = _bit_mask(bgp, 5)
    g30 = _bit_mask(bgp, 6)
    g31 = _bit_mask(bgp, 7)
    p10 = _bit_mask(obp0, 2)
    p11 = _bit_mask(obp0, 3)
    p20 = _bit_mask(obp0, 4)
    p21 = _bit_mask(obp0, 5)
    p30 = _bit_mask(obp0, 6)
    p31 = _bit_mask(obp0, 7)
    q10 = _bit_mask(obp1, 2)
    q11 = _bit_mask(obp1, 3)
    q20 = _bit_mask(obp1, 4)
    q21 = _bit_mask(obp1, 5)
    q30 = _bit_mask(obp1, 6)
    q31 = _bit_mask(obp1, 7)

    bg_py = (ly + scy) & 255
    bg_skip = scx & 7
    bg_prev = wp.int32(0)
    if bg_on != 0:
        bg_prev = _tile_row_bits(mb, bg_map, unsigned_tiles, scx >> 3, bg_py)
    win_prev = wp.int32(0)
    win_started = wp.int32(0)
    for gi in range(_GROUPS):
        x0 = gi * 8
        planes = wp.int32(0)  # the group's BG/window colour indices (_tile_row_bits form)
        if bg_on != 0:
            d = x0 - win_x0  # window plane x of the group's first pixel
            wmask = wp.int32(0)  # the group's pixels the window covers
            if win_active != 0 and d > -8:
                wmask = 0xFF
                if d < 0:
                    wmask = 0xFF >> (-d)
            if wmask != 0xFF:
                nxt = _tile_row_bits(mb, bg_map, unsigned_tiles, (scx >> 3) + gi + 1, bg_py)
                planes = _eight_from(bg_prev, nxt, bg_skip)
                bg_prev = nxt
            if wmask != 0:
                left = win_prev
                if win_started == 0 and d >= 0:
                    left = _tile_row_bits(mb, win_map, unsigned_tiles, d >> 3, win_line)
                win_started = 1
                right = _tile_row_bits(mb, win_map, unsigned_tiles, (d >> 3) + 1, win_line)
                win = _eight_from(left, right, d & 7)
                win_prev = right
                both = wmask | (wmask << 8)
                planes = (planes & ~both) | (win & both)
        # Objects: the first in priority order with an opaque pixel claims it.
        taken = wp.int32(0)
        o_lo = wp.int32(0)
        o_hi = wp.int32(0)
        o_pal1 = wp.int32(0)
        o_behind = wp.int32(0)
        for k in range(nobj):
            by = obj_x[k] - x0
            if by > -8 and by < 8:
                orow = obj_row[k]
                lo = _shifted8(orow & 0xFF, by)
                hi = _shifted8((orow >> 8) & 0xFF, by)
                claim = (lo | hi) & ~taken
                taken = taken | claim
                o_lo = o_lo | (lo & claim)
                o_hi = o_hi | (hi & claim)
                if ((orow >> 16) & 1) != 0:
                    o_pal1 = o_pal1 | claim
                if ((orow >> 17) & 1) != 0:
                    o_behind = o_behind | claim
        # The group's shades as two bit planes (s0, s1), all eight pixels at once: the
        # BG/window colour through BGP, then the objects' pixels that show (opaque, and
        # not behind a BG/window colour other than 0) through OBP0 or OBP1.
        lo = planes & 0xFF
        hi = (planes >> 8) & 0xFF
        s0 = wp.int32(0)
        s1 = wp.int32(0)
        if bg_on != 0:
            s0 = _pick(hi, _pick(lo, g00, g10), _pick(lo, g20, g30))
            s1 = _pick(hi, _pick(lo, g01, g11), _pick(lo, g21, g31))
        if taken != 0:
            shown = taken & ~(o_behind & (lo | hi))
            # An object pixel shown is opaque: with no high bit its colour is 1.
            t0 = _pick(o_pal1, _pick(o_hi, p10, _pick(o_lo, p20, p30)),
                       _pick(o_hi, q10, _pick(o_lo, q20, q30)))
            t1 = _pick(o_pal1, _pick(o_hi, p11, _pick(o_lo, p21, p31)),
                       _pick(o_hi, q11, _pick(o_lo, q21, q31)))
            s0 = _pick(shown, s0, t0)
            s1 = _pick(shown, s1, t1)
        # Pixel j of the group is bit 7 - j: the first four go to w0, low byte first.
        w0 = _spread4(s0 >> 4) | (_spread4(s1 >> 4) << 1)
        w1 = _spread4(s0 & 15) | (_spread4(s1 & 15) << 1)
        _st_word(fb, env, ly, gi * 2, w0)
        _st_word(fb, env, ly, gi * 2 + 1, w1)

    if win_active != 0 and win_x0 < _W:
        return win_line + 1
    return win_line


@wp.func
def draw_line_small(
    mb: wp.uint64,
    env: int,
    ly: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
    regs: wp.vec2i,
) -> int:
    """``draw_line`` a pixel at a time, with few registers and little code: for the rare
    lines a run kernel draws itself on a GPU (ppu_timing.draw_in_thread), inlined into
    the run kernel where every register counts. Each pixel reads its map entry and tile
    bytes; the first object in priority order with an opaque pixel there decides it. Its
    code is its own, not shared with ``draw_line``'s helpers: the CUDA variant's compiled
    form follows from every line of it."""
    if ly < 0 or ly >= _H:
        return win_line
    if wp.static(CHECK_BOUNDS):
        check_index(ly, _H)  # the framebuffer row (a Warp array, not a kstate accessor)
    lcdc = _reg(regs, 0, 0)
    if (lcdc & 0x80) == 0:
        # LCD off: the DMG shows a blank (white) screen.
        for x in range(_W):
            fb[env, ly, x] = wp.uint8(0)
        return win_line

    bg_on = lcdc & 0x01
    obj_on = (lcdc >> 1) & 1
    obj_h = wp.int32(8)
    if (lcdc & 0x04) != 0:
        obj_h = 16
    unsigned_tiles = (lcdc >> 4) & 1
    bg_map = wp.int32(0x1800)
    if (lcdc & 0x08) != 0:
        bg_map = 0x1C00
    win_map = wp.int32(0x1800)
    if (lcdc & 0x40) != 0:
        win_map = 0x1C00

    scx = _reg(regs, 0, 1)
    scy = _reg(regs, 0, 2)
    wy = _reg(regs, 0, 3)
    wx = _reg(regs, 1, 0)
    bgp = _reg(regs, 1, 1)
    obp0 = _reg(regs, 1, 2)
    obp1 = _reg(regs, 1, 3)

    # LCDC bit 0 off hides the window too (DMG).
    win_active = wp.int32(0)
    if bg_on != 0 and (lcdc & 0x20) != 0 and ly >= wy and wx <= 166:
        win_active = 1
    win_x0 = wx - 7

    # OAM scan: the first 10 objects (in OAM order) whose rows cover this line,
    # whatever their X. Then order them by drawing priority: lower X first,
    # equal X keeps OAM order (insertion sort is stable).
    objs = _vec10i()
    nobj = wp.int32(0)  # a variable, not a constant: it changes inside loops
    if obj_on != 0:
        for i in range(40):
            if nobj < _MAXOBJ:
                oy = _rd(mb, _OAM + i * 4) - 16
                if ly >= oy and ly < oy + obj_h:
                    objs[nobj] = i
                    nobj += 1
        for a in range(1, nobj):
            cur = objs[a]
            cur_x = _rd(mb, _OAM + cur * 4 + 1)
            b = a - 1
            while b >= 0 and _rd(mb, _OAM + objs[b] * 4 + 1) > cur_x:
                objs[b + 1] = objs[b]
                b -= 1
            objs[b + 1] = cur

    for x in range(_W):
        bg_col = wp.int32(0)
        if bg_on != 0:
            if win_active != 0 and x >= win_x0:
                bg_col = _map_pixel(mb, win_map, unsigned_tiles, x - win_x0, win_line)
            else:
                bx = (x + scx) & 255
                by = (ly + scy) & 255
                bg_col = _map_pixel(mb, bg_map, unsigned_tiles, bx, by)
        shade = wp.int32(0)
        if bg_on != 0:
            shade = _palette(bgp, bg_col)

        # The first object in priority order with an opaque pixel here wins; its
        # BG-over-OBJ bit then decides against BG colours 1..3 only. The object's row is
        # read here rather than through _object_row, which gave the CUDA variant, where
        # this renderer is inlined, a longer always-run path (428 SASS instructions, not
        # 424) and a larger frame (816 bytes, not 792).
        for k in range(nobj):
            o = _OAM + objs[k] * 4
            ox = _rd(mb, o + 1) - 8
            if x >= ox and x < ox + 8:
                oy = _rd(mb, o) - 16
                tile = _rd(mb, o + 2)
                attr = _rd(mb, o + 3)
                if obj_h == 16:
                    tile = tile & 0xFE
                row = ly - oy
                if (attr & 0x40) != 0:
                    row = obj_h - 1 - row
                col = x - ox
                if (attr & 0x20) != 0:
                    col = 7 - col
                c = _tile_pixel(mb, tile * 16, row, col)
                if c != 0:
                    if (attr & 0x80) == 0 or bg_col == 0:
                        pal = obp0
                        if (attr & 0x10) != 0:
                            pal = obp1
                        shade = _palette(pal, c)
                    break
        fb[env, ly, x] = wp.uint8(shade)

    if win_active != 0 and win_x0 < _W:
        return win_line + 1
    return win_line

@wp.func
def render_line(
    mb: wp.uint64,
    env: int,
    ly: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
) -> int:
    """``draw_line`` with the LCD registers of the moment."""
    return draw_line(mb, env, ly, win_line, fb, line_regs(mb))


@wp.kernel
def render_frames_kernel(mem_ptr: wp.uint64, fb: wp.array3d(dtype=wp.uint8)):
    """Draw all 144 lines of one env from its current state (one thread per env)."""
    env = wp.tid()
    mb = env_base(mem_ptr, MEM_TILE_BYTES, 1, env)
    win_line = wp.int32(0)
    for ly in range(_H):
        win_line = render_line(mb, env, ly, win_line, fb)


@wp.kernel
def render_frames_small_kernel(mem_ptr: wp.uint64, fb: wp.array3d(dtype=wp.uint8)):
    """``render_frames_kernel`` with ``draw_line_small``."""
    env = wp.tid()
    mb = env_base(mem_ptr, MEM_TILE_BYTES, 1, env)
    win_line = wp.int32(0)
    for ly in range(_H):
        win_line = draw_line_small(mb, env, ly, win_line, fb, line_regs(mb))


def render_frames(mem: wp.array3d, fb: wp.array3d, small: bool = False) -> None:
    """Render every env's current VRAM/OAM/IO state into ``fb`` (``[N, 144, 160]`` uint8).

    ``mem`` is tiled, ``(tiles, MEM_BYTES, TILE)`` (see layout.py); ``fb`` holds the envs
    to draw (at most ``tiles * TILE``). ``small`` draws with ``draw_line_small`` instead
    of ``draw_line``."""
    if tuple(mem.shape[1:]) != (MEM_BYTES, TILE):
        raise ValueError(f"mem must be shaped (tiles, {MEM_BYTES}, {TILE}), got {mem.shape}")
    num_envs = fb.shape[0]
    if tuple(fb.shape[1:]) != (SCREEN_H, SCREEN_W) or num_envs > mem.shape[0] * TILE:
        most = mem.shape[0] * TILE
        raise ValueError(f"fb must be shaped (N <= {most}, {SCREEN_H}, {SCREEN_W}), got {fb.shape}")
    if not mem.is_contiguous or not fb.is_contiguous:
        raise ValueError("mem and fb must be contiguous")
    kernel = render_frames_small_kernel if small else render_frames_kernel
    wp.launch(kernel, dim=num_envs, inputs=[mem.ptr, fb], device=mem.device)
