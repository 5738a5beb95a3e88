"""Countdown and fill loops in one step (decode.RUN_LOOP): how many passes a loop runs at
once, and what they leave, for both variants of the run kernel (docs/emulator.md, "Kernel
design").

A module of its own: the CUDA variant's module compiles these only when built with them
(``cpu.CUDA_LOOPS``, the default), so a build without them has none of their code."""

from __future__ import annotations

from gbx_gameboy.decode import (
    LOOP_FILL,
    LOOP_FILL_DOWN,
    LOOP_HIGH,
    LOOP_JP,
    LOOP_JRS_SHIFT,
    LOOP_NOPS_SHIFT,
    LOOP_REG_SHIFT,
    QUICK_RUN,
    QUICK_SHIFT,
    RUN_LOOP,
)
from gbx_gameboy.kstate import GB, mset
from gbx_gameboy.layout import WRAM_OFF
from gbx_gameboy.warp_setup import wp


@wp.func
def loop_pass_cycles(lw: int) -> int:
    """Cycles of one pass of the loop with predecoded word ``lw`` that ends with the jump
    back: a fill loop's store, the NOPs and JR +0s, the DEC, the taken JR NZ / JP NZ."""
    return (4 * ((lw >> LOOP_NOPS_SHIFT) & 31) + 12 * ((lw >> LOOP_JRS_SHIFT) & 31) + 4
            + wp.where((lw & LOOP_JP) != 0, 16, 12) + wp.where((lw & LOOP_FILL) != 0, 8, 0))


@wp.func
def loop_pass_instructions(lw: int) -> int:
    return (((lw >> LOOP_NOPS_SHIFT) & 31) + ((lw >> LOOP_JRS_SHIFT) & 31) + 2
            + wp.where((lw & LOOP_FILL) != 0, 1, 0))


@wp.func
def loop_bytes(lw: int) -> int:
    """Bytes of the loop with predecoded word ``lw``, from its start to the byte after its
    jump: where the CPU goes on after the last pass."""
    return (((lw >> LOOP_NOPS_SHIFT) & 31) + 2 * ((lw >> LOOP_JRS_SHIFT) & 31) + 1
            + wp.where((lw & LOOP_JP) != 0, 3, 2) + wp.where((lw & LOOP_FILL) != 0, 1, 0))


@wp.func
def loop_passes(lw: int, count: int, pc: int, t: int, next_ev: int, dma_s: int,
                dma_e: int) -> int:
    """How many passes of the countdown loop at ``pc`` (predecoded word ``lw``, its
    register holding ``count``) run at once from cycle ``t``: those whose jump starts
    before ``next_ev``, as the instructions one by one would start only before it, up to
    the last (the one whose DEC leaves 0, whose jump is not taken); none where a JP NZ's
    target lies in the other half of the map (an MBC5 can map bank 0 at 0x4000: the jump
    leaves for the low half), and, for a loop in ROM, none in OAM DMA (a loop in HRAM,
    which the CPU reads during DMA, runs on through it)."""
    jump = wp.where((lw & LOOP_JP) != 0, 16, 12)
    span = loop_pass_cycles(lw)
    n = wp.min(((count - 1) & 0xFF) + 1, (next_ev - t + jump - 1) // span)
    if (lw & LOOP_JP) != 0 and (pc >= 0x4000) != ((lw & LOOP_HIGH) != 0):
        n = int(0)
    if pc < 0x8000 and t + span * n + 8 >= dma_s and t + 4 < dma_e:
        n = int(0)
    return n


@wp.func
def fill_room(lw: int, hl: int) -> int:
    """How many passes of the loop with word ``lw`` may run at once for where HL points: any
    number for a countdown loop; for a fill loop, those whose stores stay in WRAM (with
    its echo, C000-FDFF), where a store is only a store at any cycle outside OAM DMA."""
    room = int(256)
    if (lw & LOOP_FILL) != 0:
        if hl < 0xC000 or hl >= 0xFE00:
            room = int(0)
        elif (lw & LOOP_FILL_DOWN) != 0:
            room = hl - 0xBFFF
        else:
            room = 0xFE00 - hl
    return room


@wp.func
def hram_loop_word(head: int, switch: int) -> int:
    """The loop word (decode.RUN_LOOP) of ``DEC r; JR NZ, -3`` run from HRAM, whose first
    byte is ``head``, or 0 when ``head`` is not DEC B ... DEC A (not (HL)) or ``switch``,
    the word after the predecoded ROM's (decode.rom_predecode), holds no RUN_LOOP. Games
    start OAM DMA from such a routine, copied to HRAM: it counts a register down while the
    DMA runs, the CPU reading only HRAM. HRAM can be written, so the check is made at run
    time."""
    lw = int(0)
    if (head & 0xC7) == 0x05 and head != 0x35 and (switch & RUN_LOOP) != 0:
        lw = (QUICK_RUN << QUICK_SHIFT) | RUN_LOOP | (((head >> 3) & 7) << LOOP_REG_SHIFT)
    return lw


@wp.func
def loop_flags(f: int, count: int) -> int:
    """F after a countdown loop's last DEC that left ``count``: Z when 0, N set, H from
    the borrow out of the low nibble, C kept."""
    return ((f & 0x10) | 0x40 | wp.where(count == 0, 0x80, 0)
            | wp.where(((count + 1) & 0xF) == 0, 0x20, 0))


# What loop_run returns: passes run, the register, F, HL, cycles, instructions, PC.
loop_result = wp.types.vector(length=7, dtype=wp.int32)


@wp.func
def loop_run(g: GB, env: int, lw: int, count: int, f: int, hl: int, a: int, pc: int,
             t: int, next_ev: int, dma_s: int, dma_e: int) -> loop_result:
    """Run at once the passes of the loop with word ``lw`` at ``pc`` (cycle ``t``) that
    ``loop_passes`` and ``fill_room`` allow, its register holding ``count``: a fill loop's
    stores of A at HL, HL +- 1, ... are made. Returns the passes run (0: none, nothing
    changed), the register, F and HL after them (the caller sets HL first, then the
    register, which may be H or L in a countdown loop), the cycles and instructions
    they took, and PC: the loop's start, or past its jump after the last pass (whose
    jump, not taken, takes 4 cycles less)."""
    n = wp.min(loop_passes(lw, count, pc, t, next_ev, dma_s, dma_e), fill_room(lw, hl))
    out = loop_result(0, count, f, hl, 0, 0, pc)
    if n >= 1:
        left = (count - n) & 0xFF
        if (lw & LOOP_FILL) != 0:
            step = wp.where((lw & LOOP_FILL_DOWN) != 0, -1, 1)
            for i in range(n):
                mset(g, env, WRAM_OFF + ((hl + step * i) & 0x1FFF), a)
            hl = (hl + step * n) & 0xFFFF
        out = loop_result(n, left, loop_flags(f, left), hl,
                          loop_pass_cycles(lw) * n - wp.where(left == 0, 4, 0),
                          loop_pass_instructions(lw) * n,
                          wp.where(left == 0, pc + loop_bytes(lw), pc))
    return out
