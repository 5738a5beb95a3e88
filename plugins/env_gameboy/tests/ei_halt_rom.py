"""A micro-ROM for ``ei`` directly followed by ``halt`` while an interrupt is pending.

IME is 0 and VBlank is already requested when ``ei; halt`` runs. HALT sees IME=0 with an
interrupt pending (the HALT-bug path); EI's delay then ends and the interrupt is taken at
once. The handler records the return address it finds on the stack (at $C001/$C005) and
counts its runs ($C000); the main loop counts its wake-ups ($C002). On hardware the return
address is the HALT itself, which halts again after RETI, so the handler runs once per
frame and the loop counts one less than the handler.
"""

from __future__ import annotations

from gbx_gameboy.microrom import micro_rom

BODY = """
    di
    ld sp, $DFFF
    xor a
    ld [$C000], a
    ld [$C001], a
    ld [$C002], a
    ld [$C005], a
    ld a, LOW(HaltAt)
    ld [$C003], a
    ld a, HIGH(HaltAt)
    ld [$C004], a
    ld a, $01
    ldh [$FF], a
    xor a
    ldh [$0F], a
.wait:
    ldh a, [$0F]
    and $01
    jr z, .wait        ; VBlank requested while IME is still 0
    ei
HaltAt:
    halt
    nop
    ld a, [$C002]
    inc a
    ld [$C002], a
    jr HaltAt
"""

HANDLER = """
SECTION "vblank", ROM0[$0040]
    jp OnVBlank
SECTION "handler", ROM0[$1000]
OnVBlank:
    push af
    push hl
    ld a, [$C000]
    and a
    jr nz, .counted
    ld hl, sp+4        ; the return address pushed by the dispatch
    ld a, [hl+]
    ld [$C001], a
    ld a, [hl]
    ld [$C005], a
.counted:
    ld a, [$C000]
    inc a
    ld [$C000], a
    pop hl
    pop af
    reti
"""

COUNT, RET_LO, LOOPS, HALT_LO, HALT_HI, RET_HI = (0xC000 + i for i in range(6))


def ei_halt_rom() -> bytes:
    return micro_rom(BODY, extra=HANDLER)
