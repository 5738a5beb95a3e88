"""The APU's observable state (apu.py), each rule checked by a micro-ROM that reads the
sound registers itself (the frame sequencer is caught up only by CPU accesses)."""

from __future__ import annotations

import torch

from gbx_gameboy.machine import GameBoyBatch, io_read_mask
from gbx_gameboy.microrom import micro_rom
from gbx_gameboy.savestate import RomId, decode, encode, load_into
from gbx_gameboy.snapshot import capture
from gbx_gameboy.tiles import env_rows

# Channel 2 on with length enabled and a full length of 64 (NR21 = 0): it must turn off
# after 64 clocks of the 256 Hz length clock, 1/4 s = 14.9 frames.
START_CH2_LEN64 = """
    ld a, $F0
    ldh [$17], a        ; NR22: DAC on
    xor a
    ldh [$16], a        ; NR21: length 64
    ld a, $C0
    ldh [$19], a        ; NR24: trigger, length enabled
"""

# Copy NR52 to $C000 forever.
POLL_NR52 = """
.poll:
    ldh a, [$26]
    ld [$C000], a
    jr .poll
"""


def wram(batch: GameBoyBatch, addr: int) -> int:
    return batch.read_memory(0, addr)


def test_length_counter_turns_the_channel_off_after_64_clocks_of_256_hz() -> None:
    batch = GameBoyBatch(micro_rom(START_CH2_LEN64 + POLL_NR52), 1, "cpu")
    batch.run_frames(14)
    assert wram(batch, 0xC000) & 0x02  # 14 frames < 1/4 s: still on
    batch.run_frames(2)
    assert wram(batch, 0xC000) == 0xF1  # off; channel 1 still on from the boot sound


def test_frame_sequencer_runs_off_div_so_div_writes_hold_the_length_counter() -> None:
    # Resetting DIV every ~1000 cycles keeps divider bit 12 from ever falling (DIV-APU
    # never ticks), so the length counter does not move while the loop runs.
    body = START_CH2_LEN64 + """
    ld de, 3000         ; about 3 M-cycles * 16 * 3000 = 40 frames of DIV resets
.hold:
    ldh [$04], a        ; DIV reset
    ld b, 60
.spin:
    dec b
    jr nz, .spin
    ldh a, [$26]
    ld [$C001], a
    dec de
    ld a, d
    or e
    jr nz, .hold
""" + POLL_NR52
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(30)
    assert wram(batch, 0xC001) & 0x02  # 30 frames, still on: no DIV-APU ticks
    batch.run_frames(60)
    assert wram(batch, 0xC000) & 0x02 == 0  # loop over, the counter ran out


def test_sweep_overflow_check_on_trigger_and_negate_quirk() -> None:
    body = """
    ld a, $F0
    ldh [$12], a        ; NR12: DAC on
    ld a, $01
    ldh [$10], a        ; NR10: period 0, add, shift 1
    ld a, $FF
    ldh [$13], a
    ld a, $87
    ldh [$14], a        ; trigger at 2047: 2047 + 1023 overflows: channel 1 off at once
    ldh a, [$26]
    ld [$C000], a
    ld a, $00
    ldh [$13], a
    ld a, $84
    ldh [$14], a        ; trigger at 1024: 1024 + 512 fits: on
    ldh a, [$26]
    ld [$C001], a
    ld a, $79
    ldh [$10], a        ; period 7, negate, shift 1
    ld a, $84
    ldh [$14], a        ; trigger: the overflow check calculates with negate
    ldh a, [$26]
    ld [$C002], a
    ld a, $71
    ldh [$10], a        ; clearing negate after a negated calculation: channel 1 off
    ldh a, [$26]
    ld [$C003], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(2)
    assert [wram(batch, 0xC000 + i) & 1 for i in range(4)] == [0, 1, 1, 0]


def test_dac_off_turns_the_channel_off_and_a_trigger_cannot_turn_it_on() -> None:
    body = """
    ld a, $F0
    ldh [$17], a
    ld a, $80
    ldh [$19], a        ; channel 2 on
    ldh a, [$26]
    ld [$C000], a
    ld a, $07
    ldh [$17], a        ; NR22 & $F8 == 0: DAC off, channel off
    ldh a, [$26]
    ld [$C001], a
    ld a, $80
    ldh [$19], a        ; trigger with the DAC off: stays off
    ldh a, [$26]
    ld [$C002], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(2)
    assert [wram(batch, 0xC000 + i) & 2 for i in range(3)] == [2, 0, 0]


def test_power_off_clears_registers_ignores_writes_but_keeps_dmg_length_writes() -> None:
    # Power off, write every register FF10-FF25, power on, dump FF10-FF3F to C000: all
    # read as their unused bits only. Then the length written while off (NR21 = $3F,
    # length 1) is still in force: a trigger with length enabled ends within 1/256 s.
    body = """
    xor a
    ldh [$26], a        ; power off
    ld c, $10
.fill:
    ld a, $FF
    ldh [c], a
    inc c
    ld a, c
    cp $26
    jr nz, .fill
    ld a, $3F
    ldh [$16], a        ; NR21 while off: length 1 (DMG)
    ld a, $80
    ldh [$26], a        ; power on
    ld hl, $C000
    ld c, $10
.dump:
    ldh a, [c]
    ld [hl+], a
    inc c
    ld a, c
    cp $40
    jr nz, .dump
    ld a, $F0
    ldh [$17], a
    ld a, $C0
    ldh [$19], a        ; trigger, length enabled, counter 1
    ldh a, [$26]
    ld [$C040], a
    ld bc, 2000         ; > 1/256 s
.wait:
    dec bc
    ld a, b
    or c
    jr nz, .wait
    ldh a, [$26]
    ld [$C041], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(3)
    mask = io_read_mask()
    dump = [wram(batch, 0xC000 + i) for i in range(0x30)]
    want = [int(mask[0x10 + i]) for i in range(0x16)] + [0xF0] + [0xFF] * 9
    assert dump[:0x20] == want
    assert wram(batch, 0xC040) == 0xF2  # on after the trigger
    assert wram(batch, 0xC041) == 0xF0  # the length 1 loaded while off ran out


def test_apu_state_travels_in_savestates_and_old_states_get_power_on_defaults() -> None:
    rom = micro_rom(START_CH2_LEN64 + POLL_NR52)
    src = GameBoyBatch(rom, 1, "cpu")
    src.run_frames(8)
    arrays = capture(src.state_tensors(), 0)
    state = decode(encode(RomId.of(src.cart), arrays))
    dst = GameBoyBatch(rom, 1, "cpu")
    load_into(dst, state)
    assert torch.equal(env_rows(dst.state_tensors()["apu"], 0), arrays["apu"].cpu())
    dst.run_frames(6)
    assert wram(dst, 0xC000) & 0x02  # 14 frames in all: on
    dst.run_frames(2)
    assert wram(dst, 0xC000) & 0x02 == 0  # the length counter continued from the state
    old = {k: v for k, v in arrays.items() if k != "apu"}
    load_into(dst, decode(encode(RomId.of(src.cart), old)))
    rows = env_rows(dst.state_tensors()["apu"], 0).tolist()
    assert rows[0] == -1 and not any(rows[1:])



def test_wave_ram_is_out_of_reach_while_channel_3_plays_except_when_it_reads() -> None:
    # Channel 3 at frequency 0 reads wave RAM every 4096 cycles, the first time 4102
    # cycles after the trigger: CPU accesses in between read $FF and their writes are lost.
    # Turning the DAC off stops the channel and wave RAM is plain memory again.
    body = """
    ld a, $5A
    ldh [$30], a        ; wave RAM byte 0 while channel 3 is off
    ld a, $80
    ldh [$1A], a        ; NR30: DAC on
    xor a
    ldh [$1D], a        ; NR33: frequency 0
    ld a, $80
    ldh [$1E], a        ; NR34: trigger
    ldh a, [$30]
    ld [$C000], a       ; $FF: the channel is not reading now
    ld a, $11
    ldh [$30], a        ; lost
    ldh a, [$26]
    ld [$C001], a       ; channel 3 on
    xor a
    ldh [$1A], a        ; DAC off: channel 3 off
    ldh a, [$30]
    ld [$C002], a       ; $5A: the write while playing did not land
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(2)
    assert [wram(batch, 0xC000 + i) for i in range(3)] == [0xFF, 0xF5, 0x5A]
