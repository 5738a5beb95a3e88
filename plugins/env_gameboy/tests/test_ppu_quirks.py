"""DMG PPU quirks games rely on, each checked by a micro-ROM that states the rule."""

from __future__ import annotations

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
