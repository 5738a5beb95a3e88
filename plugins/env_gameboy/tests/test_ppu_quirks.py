"""DMG PPU quirks games rely on, each checked by a micro-ROM that states the rule."""

from __future__ import annotations

import pytest
from devices import DEVICES

from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.microrom import micro_rom


def test_dmg_stat_write_requests_the_interrupt_when_a_condition_holds() -> None:
    # Pan Docs (STAT): on a DMG, writing STAT acts for one cycle as if all interrupt
    # enables were set, so during VBlank (mode 1) even a write of $00 requests the STAT
    # interrupt; with the LCD off no condition holds and nothing is requested.
    body = """
    di
    xor a
    ldh [$FF], a        ; no interrupt is taken: IF only records the request
.vb:
    ldh a, [$44]
    cp 145
    jr nz, .vb          ; LY = 145: mode 1, LY != LYC (0)
    xor a
    ldh [$0F], a
    ldh [$41], a        ; STAT = $00 in VBlank
    ldh a, [$0F]
    ld [$C000], a       ; bit 1 set by the write
    xor a
    ldh [$0F], a
    ldh a, [$0F]
    ld [$C001], a       ; control: nothing else requests it meanwhile
    xor a
    ldh [$40], a        ; LCD off (still in VBlank)
    ldh [$0F], a
    ldh [$41], a        ; STAT write with the LCD off
    ldh a, [$0F]
    ld [$C002], a       ; bit 1 clear
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(3)
    got = [batch.read_memory(0, 0xC000 + i) & 0x02 for i in range(3)]
    assert got == [0x02, 0x00, 0x00]


def test_ly_reads_0_during_most_of_line_153() -> None:
    # DMG: LY reads 153 only in the first M-cycle of line 153 and 0 for the rest of it,
    # while STAT still shows mode 1 (VBlank); LYC=0 matches there already. The ROM polls
    # LY and STAT together and records the first LY=0 read made in mode 1, then waits for
    # mode 2 of line 0 and records that LY is still 0 (the line counter did not restart).
    body = """
    ld a, 0
    ldh [$45], a        ; LYC = 0
.wait150:
    ldh a, [$44]
    cp 150
    jr nz, .wait150
.poll:
    ldh a, [$41]
    ld b, a             ; STAT first, then LY: if LY reads 0 and STAT said mode 1, the
    ldh a, [$44]        ; LY read came at most one instruction later
    and a
    jr nz, .poll
    ld a, b
    ld [$C000], a       ; STAT just before the first LY=0 read
.m2:
    ldh a, [$41]
    and 3
    cp 2
    jr nz, .m2
    ldh a, [$44]
    ld [$C001], a       ; LY in line 0's OAM scan
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(3)
    stat = batch.read_memory(0, 0xC000)
    assert stat & 3 == 1  # LY read 0 while the PPU was still in VBlank
    assert stat & 4  # and LYC=0 already matched
    assert batch.read_memory(0, 0xC001) == 0


# Jump to B bytes before SledEnd: into a sled of NOPs, B M-cycles before what follows it.
SLED_JUMP = """    ld hl, SledEnd
    ld a, l
    sub b
    ld l, a
    ld a, h
    sbc 0
    ld h, a
    jp hl
"""


def line153_probe(lyc: int, count: int) -> str:
    """A ROM that wakes as VBlank starts (HALT with IME=0) 3 * ``count`` times and, N =
    0..count-1 M-cycles later each time, reads LY, then STAT, then IF (one register per
    frame, the same instruction, ``ldh a, [c]``), storing them at $C000 + 3N. The reads
    fall around the start of line 153; LYC = ``lyc``, the STAT interrupt on LY=LYC only
    (IME=0: IF records the request)."""
    return f"""
    ld a, {lyc}
    ldh [$45], a
    ld a, $40
    ldh [$41], a
    ld a, $01
    ldh [$FF], a
    di
    ld de, $C000
    ld b, 0
Next:
    ld c, $44
    call Probe
    ld c, $41
    call Probe
    ld c, $0F
    call Probe
    inc b
    ld a, b
    cp {count}
    jr nz, Next
    DONE
Probe:
    xor a
    ldh [$0F], a
    halt                ; wakes as VBlank starts
    ld a, 250
.delay:
    dec a
    jr nz, .delay       ; to the end of line 152
{SLED_JUMP}Sled:
    ds {count}, $00
SledEnd:
    ldh a, [c]
    ld [de], a
    inc de
    ret
"""


@pytest.mark.parametrize("device", DEVICES)
def test_ly_lyc_in_line_153_matches_153_then_nothing_then_0(device: str) -> None:
    # DMG, line 153 (the docboy test suite's DMG measurements; the line-0 LY=LYC interrupt
    # about 8 dots into line 153 that other emulators document): in the line's first
    # M-cycle the LY=LYC comparison matches LYC=153, in the second nothing (it is catching
    # up with LY's change to 0, as it does one M-cycle after every LY change), from the
    # third on LYC=0; STAT bit 2 and the STAT interrupt both follow it, so an LYC=0
    # interrupt comes 8 dots into line 153, an LYC=153 one as the line starts. LY reads
    # 153 for one M-cycle, then 0 (here together with the comparison's step at the line
    # start; on a DMG LY leads by one M-cycle at every line: docs/emulator.md, Known gaps).
    count = 20
    seen = {}
    for lyc in (152, 153, 0):
        batch = GameBoyBatch(micro_rom(line153_probe(lyc, count)), 1, device)
        batch.run_frames(3 * count + 4)
        vals = [batch.read_memory(0, 0xC000 + i) for i in range(3 * count)]
        ly, stat, irq = vals[0::3], vals[1::3], vals[2::3]
        first = ly.index(153)
        assert 2 <= first <= count - 5, ly  # the sweep covers the change
        assert ly == [152] * first + [153] + [0] * (count - first - 1), ly
        assert {v & 3 for v in stat} == {1}, stat  # VBlank throughout
        seen[lyc] = ([int(v & 4 != 0) for v in stat], [int(v & 2 != 0) for v in irq], first)
    flag, _, first = seen[152]
    assert flag == [1] * first + [0] * (count - first)  # line 152's match ends with it
    flag, irq153, first = seen[153]
    assert flag == [int(n == first) for n in range(count)]  # one M-cycle
    flag, irq0, first = seen[0]
    assert flag == [int(n >= first + 2) for n in range(count)]
    # Each request comes as its match starts (IF is read on the PPU's side of the M-cycle
    # boundary, so both may show it one read earlier): LYC=0's two M-cycles after LYC=153's.
    rise153, rise0 = irq153.index(1), irq0.index(1)
    assert irq153 == [int(n >= rise153) for n in range(count)], irq153
    assert irq0 == [int(n >= rise0) for n in range(count)], irq0
    assert rise0 - rise153 == 2 and rise153 in (first - 1, first)


LCD_OFF_ON = """
    ld a, $FF
    ldh [$47], a        ; BGP: every colour shows black while the LCD is on
    ld b, 3
.frames:
    ldh a, [$44]
    cp 144
    jr z, .frames       ; leave the VBlank line it may be on
.vb:
    ldh a, [$44]
    cp 144
    jr nz, .vb
    dec b
    jr nz, .frames      ; three frames drawn
.ly72:
    ldh a, [$44]
    cp 72
    jr nz, .ly72
    xor a
    ldh [$40], a        ; LCD off in the middle of a frame
    ld bc, 7600         ; about three frames (28 cycles per loop)
.delay:
    dec bc
    ld a, b
    or c
    jr nz, .delay
    ld a, $91
    ldh [$40], a        ; LCD on again
.idle:
    jr .idle
"""


@pytest.mark.parametrize("device", DEVICES)
def test_screen_is_blank_while_the_lcd_is_off_and_during_the_first_frame_after(
    device: str,
) -> None:
    # Pan Docs (LCDC bit 7): with the LCD off the DMG screen is blank (white), and after it
    # is turned on again the PPU draws the first frame but the screen stays blank for it.
    # Each frame is rendered; a frame is all black (BGP=$FF) or all white (shade 0).
    batch = GameBoyBatch(micro_rom(LCD_OFF_ON), 1, device)
    seen = []
    for _ in range(12):
        batch.run_frames(1, render_last=True)
        shades = set(batch.fb[0].cpu().unique().tolist())
        seen.append((bool(batch.read_memory(0, 0xFF40) & 0x80), shades))
    on = [lcd for lcd, _ in seen]
    off_at = on.index(False)  # the frame in which the LCD went off (at line 72)
    back_at = on.index(True, off_at)  # the first frame that ends with the LCD on again
    assert off_at >= 3 and back_at - off_at >= 3, seen
    assert all(s == {3} for _, s in seen[:off_at]), seen  # drawn while on
    assert all(s == {0} for _, s in seen[off_at:back_at]), seen  # off: blank at once
    assert seen[back_at][1] == {0}, seen  # first frame after LCD on: blank
    assert all(s == {3} for _, s in seen[back_at + 1:]), seen


def mode3_probe(scx: int, window: bool) -> str:
    """A ROM that wakes at the start of line 50 (LY=LYC interrupt, HALT with IME=0) 100
    times, each time runs N = 0..99 NOPs and stores STAT's mode at $C000 + N."""
    lcdc = 0xB1 if window else 0x91  # window on (WX=7, WY=0: every line) or off
    return f"""
    ld a, {scx}
    ldh [$43], a
    xor a
    ldh [$4A], a
    ld a, 7
    ldh [$4B], a
    ld a, {lcdc}
    ldh [$40], a
    ld a, 50
    ldh [$45], a
    ld a, $40
    ldh [$41], a        ; STAT interrupt on LY=LYC only
    ld a, $02
    ldh [$FF], a
    di
    ld de, $C000
    ld b, 0
Next:
    xor a
    ldh [$0F], a
    halt                ; wakes as line 50 starts
{SLED_JUMP}Sled:
    ds 100, $00
SledEnd:
    ldh a, [$41]
    and 3
    ld [de], a
    inc de
    inc b
    ld a, b
    cp 100
    jr nz, Next
    DONE
"""


def mode3_cycles(scx: int, window: bool, device: str) -> int:
    batch = GameBoyBatch(micro_rom(mode3_probe(scx, window)), 1, device)
    batch.run_frames(110)
    modes = [batch.read_memory(0, 0xC000 + n) for n in range(100)]
    assert modes[0] == 2 and modes[-1] == 0 and 3 in modes, modes
    first = modes.index(3)
    assert set(modes[first:]) == {3, 0} and modes[first:].count(3) == modes[first:].index(0)
    return modes.count(3)  # M-cycles in which a STAT read shows mode 3


@pytest.mark.parametrize("device", DEVICES)
def test_the_window_adds_six_dots_to_mode_3(device: str) -> None:
    # Pan Docs (mode 3 length): when the window starts on a line the fetcher is set up
    # again for it, 6 more dots; with the fine-scroll delay SCX%8 the CPU sees mode 3 end
    # at the first M-cycle boundary at or after 172 + SCX%8 + 6 dots.
    def ceil4(d: int) -> int:
        return (d + 3) // 4

    base = mode3_cycles(0, False, device)
    for scx in (0, 1, 3, 5, 7):
        assert mode3_cycles(scx, False, device) - base == ceil4(scx), scx
        assert mode3_cycles(scx, True, device) - base == ceil4(scx + 6), scx


def oam_gap_probe(count: int) -> str:
    """A ROM that wakes as line 49 starts (LY=LYC interrupt, HALT with IME=0) 3 * ``count``
    times, waits to the start of line 50 and, N = 0..count-1 M-cycles later, reads STAT
    (stored at $C000 + N), reads OAM byte $FE10 ($C100 + N), or writes $A5 there and, in
    VBlank, stores what $FE10 holds ($C200 + N) and puts $5A back. The three accesses are
    the 4th M-cycle of ``ld a, [nn]`` / ``ld [nn], a``, each after ``ld a, c``. OAM holds
    $5A everywhere: the OAM bug (reads and writes in the scan) leaves a uniform OAM as
    it is."""
    return f"""
    ld hl, $FE00
    ld a, $5A
.fill:
    ld [hl], a
    inc l
    ld a, l
    cp $A0
    ld a, $5A
    jr nz, .fill        ; LCD on, but the ROM starts in VBlank (OAM free)
    ld a, 49
    ldh [$45], a
    ld a, $40
    ldh [$41], a        ; STAT interrupt on LY=LYC only
    ld a, $02
    ldh [$FF], a
    di
    ld b, 0
    ld c, $A5
Next:
    call Wake
{SLED_JUMP.replace("SledEnd", "EndStat")}
    ds {count}, $00
EndStat:
    ld a, c             ; as in the write pass
    ld a, [$FF41]
    and 3
    ld e, b
    ld d, $C0
    ld [de], a
    call Wake
{SLED_JUMP.replace("SledEnd", "EndRead")}
    ds {count}, $00
EndRead:
    ld a, c
    ld a, [$FE10]
    ld e, b
    ld d, $C1
    ld [de], a
    call Wake
{SLED_JUMP.replace("SledEnd", "EndWrite")}
    ds {count}, $00
EndWrite:
    ld a, c
    ld [$FE10], a
.vb:
    ldh a, [$44]
    cp 145
    jr nz, .vb
    ld a, [$FE10]
    ld e, b
    ld d, $C2
    ld [de], a
    ld a, $5A
    ld [$FE10], a
    inc b
    ld a, b
    cp {count}
    jp nz, Next
    DONE
Wake:
    xor a
    ldh [$0F], a
    halt                ; wakes as line 49 starts
    ld a, 25
.delay:
    dec a
    jr nz, .delay       ; to the start of line 50
    ret
"""


@pytest.mark.parametrize("device", DEVICES)
def test_oam_writes_get_through_before_mode_3_where_reads_do_not(device: str) -> None:
    # DMG: the CPU's OAM block of the OAM scan ends one M-cycle before mode 3 for writes
    # (mooneye lcdon_write_timing), while reads stay blocked into mode 3 (mooneye
    # lcdon_timing: a read in that M-cycle gives $FF). So in the M-cycle before STAT shows
    # mode 3 a write lands and a read gives $FF; both are refused through the scan and
    # mode 3, and both work again in mode 0.
    count = 80
    batch = GameBoyBatch(micro_rom(oam_gap_probe(count)), 1, device)
    batch.run_frames(3 * count + 4)
    modes = [batch.read_memory(0, 0xC000 + n) for n in range(count)]
    reads = [batch.read_memory(0, 0xC100 + n) for n in range(count)]
    landed = [batch.read_memory(0, 0xC200 + n) == 0xA5 for n in range(count)]
    m3 = modes.index(3)
    m0 = modes.index(0, m3)
    assert modes[:m3] == [2] * m3 and modes[m3:m0] == [3] * (m0 - m3), modes
    assert m3 >= 3 and count - m0 >= 3, modes  # the sweep covers the scan's end and mode 3
    assert set(modes[m0:]) == {0}, modes
    assert reads == [0xFF] * m0 + [0x5A] * (count - m0), reads
    assert landed == [n == m3 - 1 or n >= m0 for n in range(count)], landed
