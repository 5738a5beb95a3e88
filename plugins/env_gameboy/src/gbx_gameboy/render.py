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

``draw_line_host`` (``render_line_host``) draws the same picture a tile row at a time (one
map entry and one pair of tile bytes per 8 pixels, where ``draw_line`` reads them per
pixel): the CPU variant of the run kernel draws with it, the CUDA variant with
``draw_line``.

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

    Only lines 0-143 exist in the framebuffer: any other ``ly`` draws nothing (the PPU
    never draws VBlank lines; the guard keeps a bad state from writing another env's rows).
    """
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

        # The first object in priority order with an opaque pixel here wins;
        # its BG-over-OBJ bit then decides against BG colours 1..3 only.
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


@wp.func
def _plane_span(
    mb: wp.uint64, env: int, ly: int, fb: wp.array3d(dtype=wp.uint8),
    map_base: int, unsigned_tiles: int, x0: int, x1: int, px0: int, py: int,
    bgp: int, keep_index: int,
):
    """Pixels x0..x1-1 of line ``ly`` from the BG/window plane at ``map_base``, starting at
    plane pixel (px0, py): one map entry and one pair of tile bytes per tile row. Each
    pixel gets its shade, plus its colour index in bits 0-1 (shade in bits 2-3) when
    ``keep_index`` is set, for the object pass to decide BG-over-OBJ."""
    x = x0
    px = px0
    row = (py & 7) * 2
    while x < x1:
        tile_no = _rd(mb, _VRAM + map_base + ((py >> 3) & 31) * 32 + ((px >> 3) & 31))
        tile_addr = tile_no * 16
        if unsigned_tiles == 0:
            if tile_no >= 128:
                tile_no = tile_no - 256
            tile_addr = 0x1000 + tile_no * 16
        lo = _rd(mb, _VRAM + tile_addr + row)
        hi = _rd(mb, _VRAM + tile_addr + row + 1)
        col = px & 7
        n = wp.min(8 - col, x1 - x)
        for j in range(n):
            bit = 7 - (col + j)
            c = ((lo >> bit) & 1) | (((hi >> bit) & 1) << 1)
            v = _palette(bgp, c)
            if keep_index != 0:
                v = c | (v << 2)
            fb[env, ly, x + j] = wp.uint8(v)
        x += n
        px += n


@wp.func
def draw_line_host(
    mb: wp.uint64,
    env: int,
    ly: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
    regs: wp.vec2i,
) -> int:
    """``draw_line`` for one CPU thread: the same picture, drawn a tile row at a time.

    The background and window take one map entry and one pair of tile bytes per 8
    pixels, each object its pair of tile bytes once; objects are drawn from the lowest
    drawing priority to the highest, each opaque pixel deciding against the BG colour
    index kept beside the shade, so the highest-priority opaque object decides, as in
    ``draw_line``. The CPU variant of the run kernel draws with it
    (``cpu.run_kernel_host``); ``test_render.py`` checks it against ``draw_line``."""
    if ly < 0 or ly >= _H:
        return win_line
    if wp.static(CHECK_BOUNDS):
        check_index(ly, _H)
    lcdc = _reg(regs, 0, 0)
    if (lcdc & 0x80) == 0:
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

    win_active = wp.int32(0)
    if bg_on != 0 and (lcdc & 0x20) != 0 and ly >= wy and wx <= 166:
        win_active = 1
    win_x0 = wx - 7

    # The same object selection and order as draw_line, repeated rather than shared:
    # moving it into a helper changes the CUDA variant's recorded PTX.
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

    keep = wp.int32(0)
    if nobj > 0:
        keep = 1
    if bg_on == 0:
        for x in range(_W):
            fb[env, ly, x] = wp.uint8(0)  # index 0, shade 0
    else:
        bg_end = wp.int32(_W)
        if win_active != 0:
            bg_end = wp.clamp(win_x0, 0, _W)
        _plane_span(mb, env, ly, fb, bg_map, unsigned_tiles, 0, bg_end,
                    scx, (ly + scy) & 255, bgp, keep)
        if bg_end < _W:
            _plane_span(mb, env, ly, fb, win_map, unsigned_tiles, bg_end, _W,
                        bg_end - win_x0, win_line, bgp, keep)

    if nobj > 0:
        obp0 = _reg(regs, 1, 2)
        obp1 = _reg(regs, 1, 3)
        for k in range(nobj):
            o = _OAM + objs[nobj - 1 - k] * 4
            oy = _rd(mb, o) - 16
            ox = _rd(mb, o + 1) - 8
            tile = _rd(mb, o + 2)
            attr = _rd(mb, o + 3)
            if obj_h == 16:
                tile = tile & 0xFE
            row = ly - oy
            if (attr & 0x40) != 0:
                row = obj_h - 1 - row
            lo = _rd(mb, _VRAM + tile * 16 + row * 2)
            hi = _rd(mb, _VRAM + tile * 16 + row * 2 + 1)
            pal = obp0
            if (attr & 0x10) != 0:
                pal = obp1
            for j in range(8):
                x = ox + j
                if x >= 0 and x < _W:
                    bit = 7 - j
                    if (attr & 0x20) != 0:
                        bit = j
                    c = ((lo >> bit) & 1) | (((hi >> bit) & 1) << 1)
                    if c != 0:
                        v = wp.int32(fb[env, ly, x])
                        bg_col = v & 3
                        shade = _palette(bgp, bg_col)
                        if bg_on == 0:
                            shade = 0
                        if (attr & 0x80) == 0 or bg_col == 0:
                            shade = _palette(pal, c)
                        fb[env, ly, x] = wp.uint8(bg_col | (shade << 2))
        for x in range(_W):
            fb[env, ly, x] = wp.uint8((wp.int32(fb[env, ly, x]) >> 2) & 3)

    if win_active != 0 and win_x0 < _W:
        return win_line + 1
    return win_line


@wp.func
def render_line_host(
    mb: wp.uint64,
    env: int,
    ly: int,
    win_line: int,
    fb: wp.array3d(dtype=wp.uint8),
) -> int:
    """``draw_line_host`` with the LCD registers of the moment."""
    return draw_line_host(mb, env, ly, win_line, fb, line_regs(mb))


@wp.kernel
def render_frames_kernel(mem_ptr: wp.uint64, fb: wp.array3d(dtype=wp.uint8)):
    """Draw all 144 lines of one env from its current state (one thread per env)."""
    env = wp.tid()
    mb = env_base(mem_ptr, MEM_TILE_BYTES, 1, env)
    win_line = wp.int32(0)
    for ly in range(_H):
        win_line = render_line(mb, env, ly, win_line, fb)


@wp.kernel
def render_frames_host_kernel(mem_ptr: wp.uint64, fb: wp.array3d(dtype=wp.uint8)):
    """``render_frames_kernel`` with ``render_line_host``."""
    env = wp.tid()
    mb = env_base(mem_ptr, MEM_TILE_BYTES, 1, env)
    win_line = wp.int32(0)
    for ly in range(_H):
        win_line = render_line_host(mb, env, ly, win_line, fb)


def render_frames(mem: wp.array3d, fb: wp.array3d, host: bool = False) -> None:
    """Render every env's current VRAM/OAM/IO state into ``fb`` (``[N, 144, 160]`` uint8).

    ``mem`` is tiled, ``(tiles, MEM_BYTES, TILE)`` (see layout.py); ``fb`` holds the envs
    to draw (at most ``tiles * TILE``). ``host`` draws with ``render_line_host`` (the CPU
    variant's renderer) instead of ``render_line``."""
    if tuple(mem.shape[1:]) != (MEM_BYTES, TILE):
        raise ValueError(f"mem must be shaped (tiles, {MEM_BYTES}, {TILE}), got {mem.shape}")
    num_envs = fb.shape[0]
    if tuple(fb.shape[1:]) != (SCREEN_H, SCREEN_W) or num_envs > mem.shape[0] * TILE:
        most = mem.shape[0] * TILE
        raise ValueError(f"fb must be shaped (N <= {most}, {SCREEN_H}, {SCREEN_W}), got {fb.shape}")
    if not mem.is_contiguous:
        raise ValueError("mem must be contiguous")
    kernel = render_frames_host_kernel if host else render_frames_kernel
    wp.launch(kernel, dim=num_envs, inputs=[mem.ptr, fb], device=mem.device)
