"""The Warp scanline renderer against the plain numpy reference renderer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from render_reference import render_frame as reference_frame

from gbx_gameboy.layout import (
    BGP,
    IO_OFF,
    LCDC,
    MEM_BYTES,
    OAM_OFF,
    OBP0,
    OBP1,
    SCX,
    SCY,
    VRAM_OFF,
    WX,
    WY,
)
from gbx_gameboy.render import line_regs, render_frames, render_line, window_after
from gbx_gameboy.tiles import tile_envs
from gbx_gameboy.warp_setup import import_warp

wp = import_warp()


def devices() -> list[str]:
    out = ["cpu"]
    if wp.get_cuda_device_count() > 0:
        out.append("cuda:0")
    return out


def random_state(rng: np.random.Generator, lcdc: int | None = None) -> np.ndarray:
    """One env's mem column with random tiles, maps, objects and registers."""
    m = np.zeros(MEM_BYTES, dtype=np.uint8)
    m[VRAM_OFF:VRAM_OFF + 0x2000] = rng.integers(0, 256, 0x2000)
    oam = rng.integers(0, 256, 160).astype(np.uint8)
    oam[0::4] = rng.integers(0, 170, 40)  # Y: mostly on screen
    oam[1::4] = rng.integers(0, 176, 40)  # X: some off the edges
    oam[1:20:4] = oam[1]  # a cluster of objects sharing one X
    m[OAM_OFF:OAM_OFF + 160] = oam
    io = m[IO_OFF:IO_OFF + 0x80]
    io[LCDC] = (int(rng.integers(0, 128)) | 0x80) if lcdc is None else lcdc
    io[SCX], io[SCY] = rng.integers(0, 256, 2)
    io[WY] = rng.integers(0, 150)
    io[WX] = rng.integers(0, 175)
    io[BGP], io[OBP0], io[OBP1] = rng.integers(0, 256, 3)
    return m


# Both renderers: draw_line (eight pixels at a time) and draw_line_small (a pixel at a time).
RENDERERS = pytest.mark.parametrize("small", [False, True], ids=["draw_line", "draw_line_small"])


def render_warp(states: np.ndarray, device: str, small: bool = False) -> np.ndarray:
    tiled = tile_envs(torch.from_numpy(states)).numpy()  # (tiles, bytes, TILE)
    mem = wp.array(tiled, dtype=wp.uint8, device=device)
    fb = wp.zeros((states.shape[0], 144, 160), dtype=wp.uint8, device=device)
    render_frames(mem, fb, small)
    return fb.numpy()


@RENDERERS
@pytest.mark.parametrize("device", devices())
def test_random_states_match_reference(device: str, small: bool) -> None:
    rng = np.random.default_rng(1234)
    lcdcs = [None] * 10 + [0xFF, 0xE3, 0x93, 0x97, 0xF3, 0x81, 0x82, 0x87, 0x91, 0x00]
    states = np.stack([random_state(rng, lc) for lc in lcdcs])
    got = render_warp(states, device, small)
    for e in range(len(states)):
        want = reference_frame(states[e])
        bad = np.argwhere(got[e] != want)
        assert bad.size == 0, f"env {e} lcdc={states[e][IO_OFF + LCDC]:#x}: first diff at {bad[0]}"
    # The states really exercise every shade and objects over the BG.
    assert set(np.unique(got)) == {0, 1, 2, 3}



def test_renderers_agree_on_many_random_states() -> None:
    # Fine scroll, the window from every WX, tall and flipped objects at every X: the
    # eight-pixel groups and bit masks of draw_line against draw_line_small's pixels.
    rng = np.random.default_rng(99)
    states = np.stack([random_state(rng, None if i % 3 else int(rng.integers(0, 256)) | 0x80)
                       for i in range(256)])
    states[:32, IO_OFF + WX] = np.arange(32) * 5 % 175  # WX 0-170, the first group's edges
    states[32:64, IO_OFF + SCX] = np.arange(32) % 8  # each fine scroll alone
    eight, small = render_warp(states, "cpu"), render_warp(states, "cpu", small=True)
    bad = np.argwhere(eight != small)
    assert bad.size == 0, f"{len(bad)} pixels differ, first at (env, y, x) = {tuple(bad[0])}"


def solid_tile(m: np.ndarray, tile: int, colour: int) -> None:
    lo = 0xFF if colour & 1 else 0
    hi = 0xFF if colour & 2 else 0
    m[VRAM_OFF + tile * 16:VRAM_OFF + tile * 16 + 16] = [lo, hi] * 8


def blank_state(lcdc: int = 0x93) -> np.ndarray:
    m = np.zeros(MEM_BYTES, dtype=np.uint8)
    io = m[IO_OFF:IO_OFF + 0x80]
    io[LCDC], io[BGP], io[OBP0], io[OBP1], io[WX] = lcdc, 0xE4, 0xE4, 0x1B, 0xFF
    return m


def put_obj(m: np.ndarray, i: int, y: int, x: int, tile: int, attr: int = 0) -> None:
    m[OAM_OFF + 4 * i:OAM_OFF + 4 * i + 4] = [y + 16, x + 8, tile, attr]


@RENDERERS
def test_ten_objects_per_line_in_oam_order(small: bool) -> None:
    m = blank_state()
    solid_tile(m, 1, 3)
    for i in range(12):  # 12 objects on line 0; the last two are dropped
        put_obj(m, i, 0, 8 * i, 1)
    got = render_warp(m[None], "cpu", small)[0]
    assert (got[0, 0:80] == 3).all()
    assert (got[0, 80:] == 0).all()
    # An object off-screen in X still uses up one of the ten slots.
    put_obj(m, 0, 0, -8, 1)
    got = render_warp(m[None], "cpu", small)[0]
    assert (got[0, 0:8] == 0).all() and (got[0, 8:80] == 3).all() and (got[0, 80:] == 0).all()


@RENDERERS
def test_object_priority_lower_x_then_oam_index(small: bool) -> None:
    m = blank_state()
    solid_tile(m, 1, 1)
    solid_tile(m, 2, 2)
    put_obj(m, 0, 0, 4, 1)  # higher X, lower index: behind object 1
    put_obj(m, 1, 0, 0, 2)
    put_obj(m, 2, 20, 50, 1)  # same X: lower OAM index wins
    put_obj(m, 3, 20, 50, 2)
    got = render_warp(m[None], "cpu", small)[0]
    assert list(got[0, 0:12]) == [2] * 8 + [1] * 4
    assert (got[20, 50:58] == 1).all()


@RENDERERS
def test_bg_over_obj_flips_palettes_and_tall_objects(small: bool) -> None:
    m = blank_state(lcdc=0x97)  # 8x16 objects
    solid_tile(m, 4, 3)  # tile 4 (top) and 5 (bottom) of the pair 4/5
    solid_tile(m, 5, 1)
    put_obj(m, 0, 0, 0, 5)  # bit 0 of the tile number is ignored in 8x16 mode
    put_obj(m, 1, 0, 20, 4, attr=0x40)  # Y flip: bottom tile on top
    put_obj(m, 2, 0, 40, 4, attr=0x10)  # OBP1 = 0x1B maps 3 -> 0, 1 -> 2
    solid_tile(m, 7, 2)
    m[VRAM_OFF + 0x1800 + 32 * 4 + 0] = 7  # BG tile row 4 (lines 32..39), col 0: colour 2
    put_obj(m, 3, 32, 0, 4, attr=0x80)  # behind BG colour 2
    put_obj(m, 4, 32, 8, 4, attr=0x80)  # over BG colour 0
    x_tile = np.zeros(16, dtype=np.uint8)
    x_tile[0] = 0x80  # one pixel at the left edge of row 0
    m[VRAM_OFF + 8 * 16:VRAM_OFF + 9 * 16] = x_tile
    put_obj(m, 5, 60, 60, 8, attr=0x20)  # X flip moves it to the right edge
    got = render_warp(m[None], "cpu", small)[0]
    assert (got[0:8, 0:8] == 3).all() and (got[8:16, 0:8] == 1).all()
    assert (got[0:8, 20:28] == 1).all() and (got[8:16, 20:28] == 3).all()
    assert (got[0:8, 40:48] == 0).all() and (got[8:16, 40:48] == 2).all()
    assert (got[32:40, 0:8] == 2).all()  # BG wins
    assert (got[32:40, 8:16] == 3).all()  # object over BG colour 0
    assert got[60, 67] == 1 and got[60, 60] == 0
    assert (reference_frame(m) == got).all()


@RENDERERS
def test_bg_disabled_is_white_but_objects_show(small: bool) -> None:
    m = blank_state(lcdc=0x92)
    m[IO_OFF + BGP] = 0xFF  # would be black if BG colour 0 were drawn
    solid_tile(m, 1, 3)
    put_obj(m, 0, 10, 10, 1, attr=0x80)
    got = render_warp(m[None], "cpu", small)[0]
    assert got[0, 0] == 0 and (got[10:18, 10:18] == 3).all()


@RENDERERS
def test_lcd_off_is_blank(small: bool) -> None:
    m = blank_state(lcdc=0x13)
    m[IO_OFF + BGP] = 0xFF
    assert (render_warp(m[None], "cpu", small)[0] == 0).all()


@wp.kernel
def _render_with_line_io(
    mem: wp.array3d(dtype=wp.uint8),
    mem_ptr: wp.uint64,
    line_io: wp.array3d(dtype=wp.uint8),
    fb: wp.array3d(dtype=wp.uint8),
    win_lines: wp.array2d(dtype=wp.int32),
):
    """Like the machine: IO registers may change between lines (envs of tile 0)."""
    env = wp.tid()
    win = wp.int32(0)
    for ly in range(144):
        for r in range(0x40, 0x4C):
            mem[0, IO_OFF + r, env] = line_io[env, ly, r]
        win = render_line(mem_ptr + wp.uint64(env), env, ly, win, fb)
        win_lines[env, ly] = win


def test_window_line_counter_pauses_while_window_hidden() -> None:
    rng = np.random.default_rng(7)
    m = random_state(rng, lcdc=0xF3)
    io = np.repeat(m[None, IO_OFF:IO_OFF + 0x80], 144, axis=0)
    io[:, WY] = 20
    io[:, WX] = 30
    io[50:70, WX] = 200  # window off the screen: counter must not advance
    io[80:90, LCDC] = 0xD3  # window disabled
    io[100:110, SCX] = np.arange(10) * 3  # scrolling changes between lines
    io[120:, LCDC] = 0xE3  # window switches to the 0x9800 map, tiles 0x8800
    mem = wp.array(tile_envs(torch.from_numpy(m[None])).numpy(), dtype=wp.uint8, device="cpu")
    line_io = wp.array(io[None].copy(), dtype=wp.uint8, device="cpu")
    fb = wp.zeros((1, 144, 160), dtype=wp.uint8, device="cpu")
    wins = wp.zeros((1, 144), dtype=wp.int32, device="cpu")
    wp.launch(_render_with_line_io, dim=1, inputs=[mem, mem.ptr, line_io, fb, wins], device="cpu")
    want = reference_frame(m, line_io=list(io))
    assert (fb.numpy()[0] == want).all()
    w = wins.numpy()[0]
    assert w[19] == 0 and w[20] == 1
    assert w[69] == w[49] and w[89] == w[79]
    assert w[143] == 144 - 20 - 20 - 10


@wp.kernel
def _counters_with_line_io(
    mem: wp.array3d(dtype=wp.uint8),
    mem_ptr: wp.uint64,
    line_io: wp.array3d(dtype=wp.uint8),
    fb: wp.array3d(dtype=wp.uint8),
    drawn: wp.array2d(dtype=wp.int32),
    counted: wp.array2d(dtype=wp.int32),
):
    """For every line and register set: render_line's counter and window_after's."""
    env = wp.tid()
    for ly in range(-1, 146):
        row = wp.clamp(ly, 0, 143)
        for r in range(0x40, 0x4C):
            mem[0, IO_OFF + r, env] = line_io[env, row, r]
        drawn[env, ly + 1] = render_line(mem_ptr + wp.uint64(env), env, ly, 5, fb)
        counted[env, ly + 1] = window_after(ly, 5, line_regs(mem_ptr + wp.uint64(env)))


def test_window_after_counts_as_render_line_does() -> None:
    rng = np.random.default_rng(11)
    states = np.stack([random_state(rng) for _ in range(8)])
    io = np.repeat(states[:, None, IO_OFF:IO_OFF + 0x80], 144, axis=1)
    io[:, :, LCDC] = rng.integers(0, 256, (8, 144))  # LCD, BG and window bits in all mixes
    io[:, :, WY] = rng.integers(0, 150, (8, 144))
    io[:, :, WX] = rng.integers(0, 175, (8, 144))
    mem = wp.array(tile_envs(torch.from_numpy(states)).numpy(), dtype=wp.uint8, device="cpu")
    line_io = wp.array(io.copy(), dtype=wp.uint8, device="cpu")
    fb = wp.zeros((8, 144, 160), dtype=wp.uint8, device="cpu")
    drawn = wp.zeros((8, 147), dtype=wp.int32, device="cpu")
    counted = wp.zeros((8, 147), dtype=wp.int32, device="cpu")
    wp.launch(_counters_with_line_io, dim=8, inputs=[mem, mem.ptr, line_io, fb, drawn, counted],
              device="cpu")
    assert (drawn.numpy() == counted.numpy()).all()
    assert set(np.unique(drawn.numpy())) == {5, 6}  # lines with and without the window
