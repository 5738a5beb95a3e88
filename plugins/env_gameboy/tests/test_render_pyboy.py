"""PPU micro-ROMs (scroll, window, object priority and limits): gbx's screen vs PyBoy's.

Each ROM draws one still scene with the LCD off (tiles, both tile maps, OAM,
registers), turns the LCD on and halts; after both emulators have run well past
the scene's first frame, the two screens must be equal pixel for pixel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gbx_gameboy.asm import assemble
from gbx_gameboy.microrom import LCD_OFF_START

pyboy = pytest.importorskip("pyboy", reason="PyBoy is the reference screen for these ROMs")

PYBOY_FRAMES = 320  # PyBoy runs its own boot ROM (about 2.5 s) before the game
GBX_FRAMES = 12
_SHADE = np.zeros(256, np.uint8)
_SHADE[[255, 153, 85, 0]] = [0, 1, 2, 3]

SCENE = """
HEADER_TITLE "GBX PPU SCENE"
""" + LCD_OFF_START + """
    ; tiles $8000-$97FF: byte = low(address) xor (address >> 5), a dense mix of colours
    ld hl, $8000
.tiles:
    ld a, h
    swap a
    rlca
    xor l
    ld [hl+], a
    ld a, h
    cp $98
    jr nz, .tiles
    ; map $9800: tile = (x * 3 + y) & $FF ; map $9C00: tile = (x + 5 * y) ^ $80
    ld hl, $9800
.map:
    ld a, l
    and $1F
    ld b, a
    add a, a
    add a, b
    ld b, a
    ld a, l
    swap a
    rrca
    and $07
    add a, b
    ld [hl+], a
    ld a, h
    cp $9C
    jr nz, .map
.wmap:
    ld a, l
    xor $80
    add a, h
    ld [hl+], a
    ld a, h
    cp $A0
    jr nz, .wmap
    ; OAM from the table
    ld hl, Objects
    ld de, $FE00
    ld b, 160
.oam:
    ld a, [hl+]
    ld [de], a
    inc de
    dec b
    jr nz, .oam
    ld a, {scx}
    ldh [$43], a
    ld a, {scy}
    ldh [$42], a
    ld a, {wx}
    ldh [$4B], a
    ld a, {wy}
    ldh [$4A], a
    ld a, $E4
    ldh [$47], a
    ld a, $D2
    ldh [$48], a
    ld a, $1B
    ldh [$49], a
    ld a, {lcdc}
    ldh [$40], a
.idle:
    halt
    nop
    jr .idle
Objects:
{objects}
"""


def objects_table(objs: list[tuple[int, int, int, int]]) -> str:
    rows = list(objs) + [(0, 0, 0, 0)] * (40 - len(objs))
    return "\n".join(f"    db {y}, {x}, {t}, {a}" for y, x, t, a in rows)


SCENES = {
    "scroll": dict(scx=13, scy=200, wx=0, wy=0, lcdc=0x91, objects=[]),
    "scroll_signed_tiles": dict(scx=250, scy=7, wx=0, wy=0, lcdc=0x81, objects=[]),
    "window": dict(scx=5, scy=3, wx=50, wy=40, lcdc=0xF1, objects=[]),
    "window_left_edge": dict(scx=0, scy=0, wx=7, wy=100, lcdc=0xB1, objects=[]),
    "object_priority": dict(
        scx=0, scy=0, wx=0, wy=0, lcdc=0x93,
        objects=[
            (40, 40, 0x11, 0x00), (40, 44, 0x12, 0x10), (44, 40, 0x13, 0x20),
            (60, 60, 0x14, 0x40), (60, 60, 0x15, 0x60), (80, 80, 0x16, 0x80),
            (84, 82, 0x17, 0x90), (100, 8, 0x18, 0x00), (100, 4, 0x19, 0x30),
        ],
    ),
    "object_limit_8x16": dict(
        scx=0, scy=0, wx=0, wy=0, lcdc=0x97,
        objects=[(50, 8 + 12 * i, 0x20 + i, (i % 4) << 4) for i in range(12)]
        + [(120, 0, 0x31, 0), (120, 170, 0x33, 0)],
    ),
}


@pytest.mark.parametrize("name", sorted(SCENES))
def test_scene_matches_pyboy(tmp_path: Path, name: str) -> None:
    from gbx_gameboy.machine import GameBoyBatch

    s = dict(SCENES[name])
    objs = s.pop("objects")
    src = SCENE.format(objects=objects_table(objs), **{k: f"${v:02X}" for k, v in s.items()})
    rom = tmp_path / f"{name}.gb"
    rom.write_bytes(assemble(src))

    emu = pyboy.PyBoy(str(rom), window="null", sound_emulated=False)
    for _ in range(PYBOY_FRAMES):
        emu.tick()
    want = _SHADE[np.asarray(emu.screen.ndarray)[..., 0]]
    emu.stop(save=False)

    batch = GameBoyBatch(rom, 1, "cpu")
    batch.run_frames(GBX_FRAMES, render_last=True)
    got = batch.fb[0].numpy()
    assert len(np.unique(want)) >= 3, "the scene should use several shades"
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{name}: {len(bad)} pixels differ, first at (y, x) = {tuple(bad[0])}"
