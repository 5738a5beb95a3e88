"""Interrupts, HALT, EI delay, timer, serial, joypad and illegal opcodes on micro-ROMs."""

from __future__ import annotations

import pytest
import torch
from devices import DEVICES
from ei_halt_rom import COUNT, HALT_HI, HALT_LO, LOOPS, RET_HI, RET_LO, ei_halt_rom

from gbx_gameboy import layout as L
from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.microrom import micro_rom
from gbx_gameboy.tiles import env_rows

# Interrupt vectors: each handler bumps a counter in HRAM and returns.
VECTORS = """
SECTION "vblank", ROM0[$0040]
    jp OnVBlank
SECTION "timer", ROM0[$0050]
    jp OnTimer
SECTION "serial", ROM0[$0058]
    jp OnSerial
SECTION "joypad", ROM0[$0060]
    jp OnJoypad
SECTION "handlers", ROM0[$1000]
OnVBlank:
    push af
    ldh a, [$90]
    inc a
    ldh [$90], a
    pop af
    reti
OnTimer:
    push af
    ldh a, [$91]
    inc a
    ldh [$91], a
    jr nz, .no_carry
    ldh a, [$92]
    inc a
    ldh [$92], a
.no_carry:
    pop af
    reti
OnSerial:
    push af
    ldh a, [$93]
    inc a
    ldh [$93], a
    pop af
    reti
OnJoypad:
    push af
    ldh a, [$94]
    inc a
    ldh [$94], a
    pop af
    reti
"""


def hram(batch: GameBoyBatch, addr: int, env: int = 0) -> int:
    return batch.read_memory(env, addr)


def test_timer_interrupt_wakes_halt_at_the_programmed_rate() -> None:
    # TAC=5: 262144 Hz, TMA=0 -> one overflow per 256*16 = 4096 cycles.
    body = """
    xor a
    ldh [$91], a
    ldh [$92], a
    ldh [$06], a
    ldh [$05], a
    ld a, $05
    ldh [$07], a
    ld a, $04
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ei
.wait:
    halt
    jr .wait
"""
    batch = GameBoyBatch(micro_rom(body, extra=VECTORS), 1, "cpu")
    batch.run_frames(60)
    count = hram(batch, 0xFF91) | (hram(batch, 0xFF92) << 8)
    cycles = int(batch.cycle_count[0])
    assert abs(count - cycles // 4096) <= 1
    assert int(batch.instruction_count[0]) < 20 * count  # halted between interrupts


def test_vblank_interrupt_once_per_frame() -> None:
    body = """
    ld a, $01
    ldh [$FF], a
    xor a
    ldh [$90], a
    ldh [$0F], a
    ei
.wait:
    halt
    jr .wait
"""
    batch = GameBoyBatch(micro_rom(body, extra=VECTORS), 1, "cpu")
    batch.run_frames(10)
    first = hram(batch, 0xFF90)
    batch.run_frames(25)
    assert hram(batch, 0xFF90) - first == 25


def test_ei_delays_by_one_instruction_and_di_cancels() -> None:
    # IF has VBlank pending and IE enables it: EI; DI must not let it through,
    # while EI; NOP takes it after the NOP.
    body = """
    ld a, $01
    ldh [$FF], a
    ldh [$0F], a
    xor a
    ldh [$90], a
    ei
    di
    ldh a, [$90]
    ld [$C000], a
    ei
    nop
    ldh a, [$90]
    ld [$C001], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body, extra=VECTORS), 1, "cpu")
    batch.run_frames(3)
    assert batch.read_memory(0, 0xC000) == 0
    assert batch.read_memory(0, 0xC001) == 1


def test_halt_bug_executes_next_byte_twice() -> None:
    # IME=0 with an interrupt pending: HALT does not halt and "inc a" runs twice.
    body = """
    ld a, $01
    ldh [$FF], a
    ldh [$0F], a
    di
    xor a
    halt
    inc a
    ld [$C000], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(2)
    assert batch.read_memory(0, 0xC000) == 2


def test_ei_halt_with_pending_interrupt_returns_to_the_halt() -> None:
    # ei; halt with VBlank already requested: the interrupt is taken right after HALT and
    # its return address is the HALT, which halts again. The handler's first byte must not
    # be fetched twice (that ran the handler many times per frame and crashed into RAM).
    batch = GameBoyBatch(ei_halt_rom(), 1, "cpu")
    batch.run_frames(2)
    first = batch.read_memory(0, COUNT)
    assert first >= 1
    halt_at = batch.read_memory(0, HALT_LO) | (batch.read_memory(0, HALT_HI) << 8)
    ret = batch.read_memory(0, RET_LO) | (batch.read_memory(0, RET_HI) << 8)
    assert ret == halt_at
    batch.run_frames(20)
    assert batch.read_memory(0, COUNT) - first == 20  # once per frame
    assert batch.read_memory(0, LOOPS) == batch.read_memory(0, COUNT) - 1
    assert batch.regs(0)["sp"] == 0xDFFF and batch.regs(0)["halted"] == 1
    assert not bool(batch.locked[0])


def test_serial_bytes_are_captured_and_complete_with_interrupt() -> None:
    body = """
    ld a, $08
    ldh [$FF], a
    xor a
    ldh [$93], a
    ld hl, Text
.next:
    ld a, [hl+]
    and a
    jr z, .end
    ldh [$01], a
    ld a, $81
    ldh [$02], a
.busy:
    ldh a, [$02]
    bit 7, a
    jr nz, .busy
    jr .next
.end:
    ldh a, [$01]
    ld [$C000], a
    ldh a, [$0F]
    ld [$C001], a
    DONE
Text:
    db "Hi!", 0
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(3)
    assert batch.serial_output(0) == b"Hi!"
    assert batch.read_memory(0, 0xC000) == 0xFF  # nothing connected: ones shifted in
    assert batch.read_memory(0, 0xC001) & 0x08  # serial interrupt requested


def test_joypad_register_and_interrupt_follow_the_button_mask() -> None:
    body = """
    ld a, $10
    ldh [$FF], a
    xor a
    ldh [$94], a
    ldh [$0F], a
    ei
.loop:
    ld a, $10          ; select the action buttons (P15 low)
    ldh [$00], a
    ldh a, [$00]
    ld [$C000], a
    ld a, $20          ; select the direction keys (P14 low)
    ldh [$00], a
    ldh a, [$00]
    ld [$C001], a
    jr .loop
"""
    batch = GameBoyBatch(micro_rom(body, extra=VECTORS), 3, "cpu")
    batch.run_frames(1)
    buttons = torch.tensor([0x00, 0x80 | 0x10, 0x01 | 0x08], dtype=torch.int32)
    batch.step_frames(buttons, frames=4, release_after=4, render_last=False)
    # bit0..3 of P1: A/Right, B/Left, Select/Up, Start/Down; 0 = pressed
    assert [batch.read_memory(e, 0xC000) & 0x0F for e in range(3)] == [0x0F, 0x06, 0x0F]
    assert [batch.read_memory(e, 0xC001) & 0x0F for e in range(3)] == [0x0F, 0x0F, 0x06]
    irqs = [batch.read_memory(e, 0xFF94) for e in range(3)]
    assert irqs[0] == 0 and irqs[1] >= 1 and irqs[2] >= 1
    batch.step_frames(buttons, frames=4, release_after=0, render_last=False)
    assert [batch.read_memory(e, 0xC000) & 0x0F for e in range(3)] == [0x0F, 0x0F, 0x0F]


def test_illegal_opcode_locks_only_that_env() -> None:
    body = """
.loop:
    ld a, $20
    ldh [$00], a
    ldh a, [$00]
    bit 0, a           ; RIGHT pressed -> run the illegal opcode
    jr nz, .loop
    db $D3
"""
    batch = GameBoyBatch(micro_rom(body), 2, "cpu")
    batch.step_frames(torch.tensor([1, 0], dtype=torch.int32), 5, 5, render_last=False)
    assert batch.locked.tolist() == [1, 0]
    locked_pc, running_cycles = batch.regs(0)["pc"], int(batch.cycle_count[1])
    frames_before = batch.frame_count.tolist()
    batch.run_frames(3)
    assert batch.regs(0)["pc"] == locked_pc  # frozen at the opcode
    assert batch.frame_count.tolist() == [frames_before[0], frames_before[1] + 3]
    assert batch.locked.tolist() == [1, 0]  # env 1 still runs, never locked by env 0
    assert int(batch.cycle_count[1]) > running_cycles
    code = micro_rom(body)
    assert code[batch.regs(0)["pc"]] == 0xD3


def test_timer_div_write_resets_divider() -> None:
    body = """
    ld b, 0
.spin:
    dec b
    jr nz, .spin
    ldh [$04], a       ; reset DIV
    ldh a, [$04]
    ld [$C000], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(2)
    assert batch.read_memory(0, 0xC000) == 0


# Every VBlank: count the frames the ROM saw RIGHT held ($C000) and all frames ($C001).
RIGHT_COUNTER = """
    ld a, $01
    ldh [$FF], a
    ld a, $20          ; select the direction keys
    ldh [$00], a
    xor a
    ld [$C000], a
    ld [$C001], a
    ldh [$0F], a
    ei
.wait:
    halt
    jr .wait
"""
RIGHT_HANDLER = """
SECTION "vblank", ROM0[$0040]
    jp OnVBlank
SECTION "handler", ROM0[$1000]
OnVBlank:
    push af
    ld a, [$C001]
    inc a
    ld [$C001], a
    ldh a, [$00]
    bit 0, a           ; 0 = RIGHT pressed
    jr nz, .done
    ld a, [$C000]
    inc a
    ld [$C000], a
.done:
    pop af
    reti
"""


def test_step_frames_holds_for_min_of_release_and_frames_then_releases() -> None:
    # One 3-frame step holding RIGHT with release_after = 0, 1, 2, 3 or 10, then 4 more
    # frames without input. The VBlank handler runs as each frame starts (the step's first
    # one included), so it sees RIGHT held min(release_after, frames) times, never after.
    release = [0, 1, 2, 3, 10]
    rom = micro_rom(RIGHT_COUNTER, extra=RIGHT_HANDLER)
    seen = []
    for r in release:
        batch = GameBoyBatch(rom, 1, "cpu")
        batch.run_frames(2)
        before = batch.read_memory(0, 0xC001)
        batch.step_frames(torch.tensor([0x01], dtype=torch.int32), 3, r, render_last=False)
        st = env_rows(batch.state_tensors()["st"], 0)
        assert int(st[L.S_BUTTONS]) == 0  # released at the end
        batch.run_frames(4)
        assert batch.read_memory(0, 0xC001) - before == 7  # the handler ran every frame
        seen.append(batch.read_memory(0, 0xC000))
    assert seen == [min(r, 3) for r in release]


# After HALT wakes on VBlank (IME=1) and the handler jumps back with JP HL, this code
# reaches the next VBlank request at an instruction boundary: with 6 NOPs the request is
# taken before the instruction that follows, with 5 a DI placed there runs first and masks
# it. That is the timing DMG hardware shows in mooneye's di_timing-GS.
# Waits for line 144, then halts with IME=1 until the next VBlank, whose handler
# (VBLANK_JP_HL) jumps to HL: the code at HL starts at the same cycle of every frame.
WAIT_AND_HALT = """
WaitAndHalt:
.vbl:
    ldh a, [$44]
    cp 144
    jr nz, .vbl
    xor a
    ldh [$0F], a
    ei
    halt
    nop
.stuck:
    jr .stuck
"""
VBLANK_EDGE = r"""
MACRO ROUND_DELAY
    ld a, $09
    ld b, a
    ld a, $C9
    ld c, a
.loop\@:
    dec bc
    ld a, b
    or c
    jr nz, .loop\@
ENDM
    di
    ld sp, $DFFF
    xor a
    ld [$C000], a
    ld [$C001], a
    ld a, $01
    ldh [$FF], a
    ld hl, Round1
    jp WaitAndHalt
Round1:
    ld hl, Taken1
    ei
    ROUND_DELAY
    REPT 6
    nop
    ENDR
    di                 ; reached only if the VBlank request came too late
    ld a, 2
    ld [$C000], a
    jr Round2Setup
Taken1:
    ld a, 1
    ld [$C000], a
Round2Setup:
    ld hl, Round2
    jp WaitAndHalt
Round2:
    ld hl, Taken2
    ei
    ROUND_DELAY
    REPT 5
    nop
    ENDR
    di                 ; must run before the request is taken
    nop
    ld a, 1
    ld [$C001], a
    DONE
Taken2:
    ld a, 2
    ld [$C001], a
    DONE

"""
VBLANK_JP_HL = """
SECTION "vblank", ROM0[$0040]
    jp hl
"""


def test_vblank_request_at_a_boundary_is_taken_one_instruction_later() -> None:
    batch = GameBoyBatch(micro_rom(VBLANK_EDGE + WAIT_AND_HALT, extra=VBLANK_JP_HL), 1, "cpu")
    batch.run_frames(8)
    assert batch.read_memory(0, 0xC000) == 1  # 6 NOPs: taken before the DI
    assert batch.read_memory(0, 0xC001) == 1  # 5 NOPs: the DI ran first


# The same timing as VBLANK_EDGE's second round, where the new VBlank request lands on the
# boundary before the DI and is taken one instruction late. Here IME is 0 until an EI
# that takes effect at that very boundary, and IF bit 0 is written first: set, an older
# request is pending there and is taken at once (the DI never runs); clear, only the new
# request exists, it comes one instruction late and the DI masks it.
VBLANK_PENDING = r"""
MACRO DELAY_BC
    ld a, $09
    ld b, a
    ld a, $C8          ; one loop pass (7 M-cycles) shorter than ROUND_DELAY
    ld c, a
.loop\@:
    dec bc
    ld a, b
    or c
    jr nz, .loop\@
ENDM
MACRO ROUND
    ld hl, Taken\1
    di
    ld a, \2
    ldh [$0F], a       ; IF bit 0: an older VBlank request (1) or none (0)
    DELAY_BC
    REPT 5
    nop
    ENDR
    ei
    nop                ; IME is 1 from the next boundary on, where the new request lands
    di
    nop
    ld a, 1
    ld [$C000 + \1], a ; not taken
    jp Next\1
Taken\1:
    ld a, 2
    ld [$C000 + \1], a ; taken before the DI
Next\1:
ENDM
    di
    ld sp, $DFFF
    xor a
    ld [$C000], a
    ld [$C001], a
    ld a, $01
    ldh [$FF], a
    ld hl, Round0
    jp WaitAndHalt
Round0:
    ROUND 0, 1
    ld hl, Round1
    jp WaitAndHalt
Round1:
    ROUND 1, 0
    DONE

"""


@pytest.mark.parametrize("device", DEVICES)
def test_an_older_pending_vblank_request_is_not_delayed(device: str) -> None:
    batch = GameBoyBatch(micro_rom(VBLANK_PENDING + WAIT_AND_HALT, extra=VBLANK_JP_HL), 1, device)
    batch.run_frames(8)
    assert batch.read_memory(0, 0xC000) == 2  # pending from before: taken at the boundary
    assert batch.read_memory(0, 0xC001) == 1  # only the new request: one instruction late
