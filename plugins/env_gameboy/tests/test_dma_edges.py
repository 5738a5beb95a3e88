"""OAM DMA edge cases (Pan Docs "OAM DMA transfer", mooneye's OAM DMA write-ups), each
checked by a micro-ROM.

During a transfer the CPU runs from HRAM, as games do: a routine is copied to $FF80 and
called there. Results go to HRAM ($FFF0 on, after the routine); the LCD is off, so only
the DMA blocks OAM.
"""

from __future__ import annotations

import pytest
from devices import DEVICES

from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.microrom import micro_rom

# Fill $C100-$C19F with $40 + i, $C200-$C29F with $80 + i, $DE00/$DF00 with $D1/$D2, VRAM
# $8000 with $77; copy Routine..RoutineEnd to $FF80 and run it.
SETUP = """
    di
    ld sp, $FFFE
.vb:
    ldh a, [$44]
    cp 144
    jr nz, .vb
    xor a
    ldh [$40], a        ; LCD off: VRAM and OAM open to the CPU
    ld hl, $C100
    ld b, 160
    ld a, $40
.fill1:
    ld [hl+], a
    inc a
    dec b
    jr nz, .fill1
    ld hl, $C200
    ld b, 160
    ld a, $80
.fill2:
    ld [hl+], a
    inc a
    dec b
    jr nz, .fill2
    ld a, $D1
    ld [$DE00], a
    ld a, $D2
    ld [$DF00], a
    ld a, $77
    ld [$8000], a
    ld hl, Routine
    ld de, $FF80
    ld b, RoutineEnd - Routine
.copy:
    ld a, [hl+]
    ld [de], a
    inc de
    dec b
    jr nz, .copy
    call $FF80
    DONE
SECTION "data", ROM0[$3F00]
    db $EE
SECTION "routine", ROM0[$2000]
"""

WAIT_DMA = """
    ld b, 41            ; 41 x 4 M-cycles: past the set-up and 160 transfer M-cycles
.wdma:
    dec b
    jr nz, .wdma
"""


def run_routine(routine: str, device: str) -> list[int]:
    """Run the routine (relative jumps only: it runs from HRAM); return $FFF0-$FFF7."""
    rom = micro_rom(SETUP, extra=f"Routine:\n{routine}\n    ret\nRoutineEnd:\n"
                    "    ASSERT RoutineEnd - Routine <= $70, \"the routine overlaps $FFF0\"\n")
    batch = GameBoyBatch(rom, 1, device)
    batch.run_frames(5)
    return [batch.read_memory(0, 0xFFF0 + i) for i in range(8)]


@pytest.mark.parametrize("device", DEVICES)
def test_reads_during_dma_see_the_transferred_byte_on_its_bus(device: str) -> None:
    # The DMA reads its source (here WRAM, the external bus) one byte per M-cycle after one
    # set-up M-cycle. A CPU read on the same bus (ROM, WRAM, cart RAM) gets the byte the
    # DMA is moving in that M-cycle; the VRAM bus is free; OAM reads $FF.
    got = run_routine(f"""
    ld a, $C1
    ldh [$46], a        ; DMA from $C100 (the write ends at cycle t)
    ld a, [$3F00]       ; ROM, read at t + 16: byte 2 ($42) is on the bus
    ldh [$F0], a
    ld a, [$3F00]       ; 7 M-cycles later: byte 9
    ldh [$F1], a
    ld a, [$C000]       ; WRAM, 7 M-cycles later again: byte 16
    ldh [$F2], a
    ld a, [$8000]       ; VRAM: not the DMA's bus
    ldh [$F3], a
    ld a, [$FE00]       ; OAM: $FF while the DMA runs
    ldh [$F4], a
{WAIT_DMA}
    ld a, [$3F00]       ; after the transfer: the ROM byte again
    ldh [$F5], a
    ld a, [$FE00]       ; and OAM holds the copy
    ldh [$F6], a
    ld a, [$FE9F]
    ldh [$F7], a
""", device)
    assert got[:8] == [0x42, 0x49, 0x50, 0x77, 0xFF, 0xEE, 0x40, 0x40 + 159]


@pytest.mark.parametrize("device", DEVICES)
def test_dma_restart_keeps_oam_blocked_and_copies_the_new_source(device: str) -> None:
    # Writing DMA while a transfer runs starts a new one from the new source, which a
    # read on its bus sees byte by byte from its own start; OAM stays unreadable.
    got = run_routine(f"""
    ld a, $C1
    ldh [$46], a        ; first transfer from $C100
    ld b, 10
.w1:
    dec b
    jr nz, .w1
    ld a, $C2
    ld hl, $FE00
    ldh [$46], a        ; restart from $C200
    ld a, [hl]          ; read at t + 8, the new transfer's first M-cycle: $FF
    ldh [$F0], a
    ld a, [$C000]       ; read at t + 36: the new transfer's byte 7 ($87) on the bus
    ldh [$F1], a
{WAIT_DMA}
    ld a, [$FE00]
    ldh [$F2], a
    ld a, [$FE9F]
    ldh [$F3], a
""", device)
    assert got[:4] == [0xFF, 0x87, 0x80, (0x80 + 159) & 0xFF]


@pytest.mark.parametrize(("page", "first"), [(0xE1, 0x40), (0xFE, 0xD1), (0xFF, 0xD2)])
@pytest.mark.parametrize("device", DEVICES)
def test_sources_above_e000_read_the_wram_echo(page: int, first: int, device: str) -> None:
    # DMG: a source page of $E0-$FF reads WRAM through its echo ($E100 -> $C100,
    # $FE00 -> $DE00, $FF00 -> $DF00), not OAM, IO or HRAM.
    got = run_routine(f"""
    ld a, ${page:02X}
    ldh [$46], a
{WAIT_DMA}
    ld a, [$FE00]
    ldh [$F0], a
""", device)
    assert got[0] == first


@pytest.mark.parametrize(("page", "expected"), [
    (0xC1, [(0x40 + i) & 0xFF for i in range(160)]),  # WRAM
    (0xE2, [(0x80 + i) & 0xFF for i in range(160)]),  # its echo: $C200
    (0x3E, [(7 * i + 3) & 0xFF for i in range(160)]),  # ROM, through the memory map
])
@pytest.mark.parametrize("device", DEVICES)
def test_every_byte_of_a_transfer_lands_in_oam(page: int, expected: list[int],
                                               device: str) -> None:
    # A WRAM source (where games keep their shadow OAM) is copied without the memory
    # map; every other source goes through it. Both give the 160 bytes in order.
    table = ", ".join(f"${(7 * i + 3) & 0xFF:02X}" for i in range(160))
    rom = micro_rom(SETUP, extra=f"""Routine:
    ld a, ${page:02X}
    ldh [$46], a
{WAIT_DMA}
    ret
RoutineEnd:
SECTION "page", ROM0[$3E00]
    db {table}
""")
    batch = GameBoyBatch(rom, 1, device)
    batch.run_frames(5)
    assert [batch.read_memory(0, 0xFE00 + i) for i in range(160)] == expected


@pytest.mark.parametrize("device", DEVICES)
def test_a_dma_from_vram_owns_the_vram_bus_only(device: str) -> None:
    # Source $8000 (the VRAM bus): VRAM reads see the transferred byte ($8000 holds $77,
    # the rest of the page 0), ROM and WRAM on the external bus read normally.
    got = run_routine(f"""
    ld a, $80
    ldh [$46], a        ; DMA from $8000
    ld a, [$3F00]       ; ROM at t + 16: the external bus is free
    ldh [$F0], a
    ld a, [$C100]       ; WRAM: free too
    ldh [$F1], a
    ld a, [$8000]       ; VRAM at t + 44: byte 9 of $8000-$809F is on the bus
    ldh [$F2], a
{WAIT_DMA}
    ld a, [$8000]       ; after the transfer: VRAM itself
    ldh [$F3], a
    ld a, [$FE00]
    ldh [$F4], a
""", device)
    assert got[:5] == [0xEE, 0x40, 0x00, 0x77, 0x77]
