"""The DMG OAM corruption bug and the first line after LCD on, each rule stated by a micro-ROM.

The sweep ROM switches the LCD on and makes one access (or one 16-bit increment/decrement
of a value in FE00-FEFF) a given number of M-cycles later, once per slot, each slot one
M-cycle later than the one before, and copies OAM to WRAM after each. The expected OAM
of every slot comes from the rules as Pan Docs states them ("OAM Corruption Bug"),
written out below in plain Python: during the OAM scan the PPU reads one 8-byte row per
M-cycle, row 0 is never corrupted, and what an access does depends only on its kind and
on that row.
"""

from __future__ import annotations

import random

import pytest
import torch

from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.microrom import micro_rom

SLOTS = 28
ROWS = 20
# OAM before each access: random bytes, so that every formula gives its own result.
_RNG = random.Random(20)
FILL = bytes(_RNG.randrange(256) for _ in range(160))
FILL_TABLE = 'SECTION "fill", ROM0\nOamFill:\n    db ' + ", ".join(f"${b:02X}" for b in FILL)
FILL_MACRO = """
MACRO FILL_OAM
    ld de, OamFill
    ld hl, $FE00
.fill\\@:
    ld a, [de]
    ld [hl+], a
    inc de
    ld a, l
    cp $A0
    jr nz, .fill\\@
ENDM
"""


# ---- the rules, on OAM as 80 little-endian words (4 per row)
def _words(oam: bytes) -> list[int]:
    return [oam[2 * i] | oam[2 * i + 1] << 8 for i in range(80)]


def _bytes(words: list[int]) -> bytes:
    return b"".join(bytes([w & 0xFF, w >> 8]) for w in words)


def _plain(w: list[int], row: int, read: bool) -> None:
    """Write corruption, or read corruption: the row's first word from a formula, its
    other three words copied from the preceding row."""
    if not 1 <= row < ROWS:
        return
    a, b, c = w[4 * row], w[4 * row - 4], w[4 * row - 2]
    w[4 * row] = (b | (a & c)) if read else (((a ^ c) & (b ^ c)) ^ c)
    w[4 * row + 1 : 4 * row + 4] = w[4 * row - 3 : 4 * row]


def _idu_during_read(w: list[int], row: int) -> None:
    """The extra corruption of a read whose M-cycle also increments/decrements."""
    if not 4 <= row < ROWS - 1:
        return
    a, b, c, d = w[4 * row - 8], w[4 * row - 4], w[4 * row], w[4 * row - 2]
    w[4 * row - 4] = (b & (a | c | d)) | (a & c & d)
    w[4 * row : 4 * row + 4] = w[4 * row - 4 : 4 * row]
    w[4 * row - 8 : 4 * row - 4] = w[4 * row - 4 : 4 * row]


def _expect(events: list[tuple[int, str]], row0: int) -> bytes:
    """OAM after the events (M-cycle offset, kind) when the first falls on row0."""
    w = _words(FILL)
    for dm, kind in events:
        row = row0 + dm
        if kind == "idu_read":
            _idu_during_read(w, row)
            _plain(w, row, read=True)
        else:
            _plain(w, row, read=kind == "read")
    return _bytes(w)


# ---- the sweep ROM
def _sweep_rom(snippet: str, lcd_on: bool = True, base_nops: int = 102) -> bytes:
    on = "ld a, $81\n    ldh [$40], a" if lcd_on else "xor a\n    ldh [$40], a"
    body = FILL_MACRO + f"""
    di
    ld sp, $DFF0
.vb:
    ldh a, [$44]
    cp 144
    jr nz, .vb
    xor a
    ldh [$40], a        ; LCD off for the whole set-up
    ldh [$80], a        ; slot number
Slot:
    FILL_OAM            ; LCD off: nothing corrupts
    ldh a, [$80]
    ld b, a
    ld a, {SLOTS - 1}
    sub b
    ld e, a
    ld d, 0
    ld hl, Sled
    add hl, de
    push hl             ; the sled entry: 'slot' nops before the fixed ones
    {on}
    ret
Sled:
    REPT {SLOTS - 1 + base_nops}
    nop
    ENDR
    {snippet}
    xor a
    ldh [$40], a        ; LCD off at once: no scan after the access
    ld sp, $DFF0
    ldh a, [$80]
    add $C1
    ld d, a
    ld e, 0
    ld hl, $FE00
.copy:
    ld a, [hl+]
    ld [de], a
    inc e
    ld a, e
    cp 160
    jr nz, .copy
    ldh a, [$80]
    inc a
    ldh [$80], a
    cp {SLOTS}
    jp nz, Slot
    ld a, 1
    ld [$C000], a
    DONE
"""
    return micro_rom(body, extra=FILL_TABLE)


def _run_sweep(snippet: str, lcd_on: bool = True, device: str = "cpu",
               kernel: str = "auto") -> list[bytes]:
    batch = GameBoyBatch(micro_rom_cache(snippet, lcd_on), 1, device, kernel=kernel)
    batch.run_frames(12)
    assert batch.read_memory(0, 0xC000) == 1, "the sweep ROM did not finish"
    return [bytes(batch.read_memory(0, 0xC100 + 0x100 * k + i) for i in range(160))
            for k in range(SLOTS)]


_ROMS: dict[tuple[str, bool], bytes] = {}


def micro_rom_cache(snippet: str, lcd_on: bool) -> bytes:
    key = (snippet, lcd_on)
    if key not in _ROMS:
        _ROMS[key] = _sweep_rom(snippet, lcd_on)
    return _ROMS[key]


def _alignment(slots: list[bytes], events: list[tuple[int, str]]) -> int:
    """The row of slot 0's first event that makes every slot match the rules."""
    fits = [r0 for r0 in range(-SLOTS - 2, ROWS + 2)
            if all(s == _expect(events, r0 + k) for k, s in enumerate(slots))]
    assert len(fits) == 1, f"no single row alignment explains the sweep: {fits}"
    return fits[0]


CASES = {
    # name: (snippet; its events as (M-cycle after the first, kind))
    "write": ("ld hl, $FEC0\n    ld [hl], a", [(0, "write")]),
    "read": ("ld hl, $FEA8\n    ld a, [hl]", [(0, "read")]),
    "inc_de": ("ld de, $FE00\n    inc de", [(0, "write")]),
    "dec_sp": ("ld sp, $FE80\n    dec sp", [(0, "write")]),
    "ld_a_hl_inc": ("ld hl, $FEF0\n    ld a, [hl+]", [(0, "idu_read")]),
    "ld_hl_dec_a": ("ld hl, $FEF0\n    ld [hl-], a", [(0, "write")]),
    "push": ("ld sp, $FEF0\n    push bc", [(0, "write"), (1, "write"), (2, "write")]),
    "pop": ("ld sp, $FEF0\n    pop bc", [(0, "idu_read"), (1, "read")]),
}


@pytest.fixture(scope="module")
def alignments() -> dict[str, int]:
    return {}


@pytest.mark.parametrize("name", list(CASES))
def test_oam_scan_corrupts_the_row_it_reads(name: str, alignments: dict[str, int]) -> None:
    # Writes go to FEA0-FEFF, which ignores them, so only the corruption changes OAM.
    # Every case starts its first event at the same cycle after the LCDC write (a 3-M-cycle
    # load, then the event in the instruction's second M-cycle), so one alignment explains
    # all: the sweep crosses line 1's OAM scan and each slot hits the next row.
    snippet, events = CASES[name]
    slots = _run_sweep(snippet)
    r0 = _alignment(slots, events)
    hit_rows = {r0 + k for k in range(SLOTS)}
    assert set(range(1, ROWS)) <= hit_rows  # the sweep covers the whole scan
    assert any(s != FILL for s in slots)
    alignments[name] = r0
    assert len(set(alignments.values())) == 1, alignments


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_sweeps_equal_the_cpu() -> None:
    for name in ("read", "inc_de", "push", "pop"):
        snippet = CASES[name][0]
        assert _run_sweep(snippet, device="cuda") == _run_sweep(snippet), name


def test_cuda_variant_sweeps_equal_the_cpu_variant() -> None:
    # The CUDA variant's own hooks (one for every increment/decrement case), run on the CPU
    # device: every case's corrupted rows equal the CPU variant's.
    for name, (snippet, _) in CASES.items():
        assert _run_sweep(snippet, kernel="cuda") == _run_sweep(snippet), name


def test_oam_bug_needs_the_lcd_on() -> None:
    # The same increment of DE = FE00 and OAM write with the LCD left off: OAM unchanged.
    for snippet in ("ld de, $FE00\n    inc de", "ld hl, $FEC0\n    ld [hl], a"):
        assert all(s == FILL for s in _run_sweep(snippet, lcd_on=False))


def test_no_oam_bug_in_vblank_or_on_the_first_line_after_lcd_on() -> None:
    # In VBlank (LY 145) and right after the LCD is switched on (that line has no OAM
    # scan), increments of FE00-FEFF values and OAM reads/writes leave OAM alone.
    body = FILL_MACRO + """
    di
    ld sp, $DFF0
.vb:
    ldh a, [$44]
    cp 144
    jr nz, .vb
    xor a
    ldh [$40], a
    FILL_OAM
    ld a, $81
    ldh [$40], a        ; LCD on: line 0 has no OAM scan
    ld de, $FE00
    REPT 4
    inc de
    ENDR
    ld hl, $FE40
    ld [hl], a          ; 64 cycles after the LCDC write, before mode 3
    ld a, [hl]
.v145:
    ldh a, [$44]
    cp 145
    jr nz, .v145
    ld de, $FE00
    REPT 8
    inc de
    ENDR
    ld a, [hl+]
    ld a, [hl-]
    ld a, [hl]
    ld sp, $FEF0
    push bc
    pop bc
    ld sp, $DFF0
    ld a, 1
    ld [$C000], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body, extra=FILL_TABLE), 1, "cpu")
    batch.run_frames(4)
    assert batch.read_memory(0, 0xC000) == 1
    oam = bytes(batch.read_memory(0, 0xFE00 + i) for i in range(160))
    # The CPU's own write during line 0 lands (OAM is accessible then); nothing else moved.
    want = bytearray(FILL)
    want[0x40] = 0x81
    assert oam == bytes(want)


def test_ly_reads_1_from_452_cycles_after_lcd_on() -> None:
    # The first line after LCD on is 4 cycles shorter as LY shows it: a read 448 cycles
    # after the LCDC write still sees 0, one at 452 sees 1 (blargg oam_bug/1-lcd_sync,
    # mooneye lcdon_timing). In those 4 cycles STAT shows mode 0 and LY=LYC matches
    # neither line (LYC = 0 here), and OAM stays writable (lcdon_write_timing).
    def rom(nops: int, reg: int, write_oam: bool) -> bytes:
        access = "ld [hl], a" if write_oam else f"ldh a, [${reg:02X}]"
        body = f"""
    di
.vb:
    ldh a, [$44]
    cp 144
    jr nz, .vb
    xor a
    ldh [$40], a
    ldh [$45], a        ; LYC = 0
    ld [$FE00], a
    ld hl, $FE00
    ld a, $81
    ldh [$40], a        ; LCD on
    REPT {nops}
    nop
    ENDR
    {access}
    ld [$C000], a
    DONE
"""
        return micro_rom(body)

    def value(nops: int, reg: int = 0x44, write_oam: bool = False) -> int:
        batch = GameBoyBatch(rom(nops, reg, write_oam), 1, "cpu")
        batch.run_frames(3)
        return batch.read_memory(0, 0xFE00 if write_oam else 0xC000)

    # ldh a,[n] reads in its third M-cycle: 4 * nops + 12 cycles after the LCDC write.
    assert value(109) == 0  # 448 cycles
    assert value(110) == 1  # 452 cycles
    assert value(111) == 1
    assert value(110, reg=0x41) & 0x07 == 0  # mode 0, no LY=LYC match
    assert value(109, reg=0x41) & 0x07 == 4  # still line 0: LY=LYC=0
    # ld [hl],a writes in its second M-cycle: 4 * nops + 8 cycles; 452 and the cycle before.
    assert value(111, write_oam=True) == 0x81
    assert value(112, write_oam=True) == 0  # line 1's OAM scan has begun: write refused
