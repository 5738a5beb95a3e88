"""Countdown loops in one step (decode.RUN_LOOP): how many passes a loop runs at once, and
what they leave, for both variants of the run kernel (docs/emulator.md, "Kernel design").

A module of its own: the CUDA variant's module compiles these only when built with them
(``cpu.CUDA_LOOPS``), so its default code stays as it is."""

from __future__ import annotations

from gbx_gameboy.decode import LOOP_HIGH, LOOP_JP, LOOP_JRS_SHIFT, LOOP_NOPS_SHIFT
from gbx_gameboy.warp_setup import wp


@wp.func
def loop_pass_cycles(lw: int) -> int:
    """Cycles of one pass of the countdown loop with predecoded word ``lw`` that ends with
    the jump back: its NOPs and JR +0s, the DEC, the taken JR NZ / JP NZ."""
    return (4 * ((lw >> LOOP_NOPS_SHIFT) & 31) + 12 * ((lw >> LOOP_JRS_SHIFT) & 31) + 4
            + wp.where((lw & LOOP_JP) != 0, 16, 12))


@wp.func
def loop_pass_instructions(lw: int) -> int:
    return ((lw >> LOOP_NOPS_SHIFT) & 31) + ((lw >> LOOP_JRS_SHIFT) & 31) + 2


@wp.func
def loop_passes(lw: int, count: int, pc: int, t: int, next_ev: int, dma_s: int,
                dma_e: int) -> int:
    """How many passes of the countdown loop at ``pc`` (predecoded word ``lw``, its
    register holding ``count``) run at once from cycle ``t``: those that end with the jump
    back (all but the last: DEC leaves a non-zero count) and whose jump starts before
    ``next_ev``, as the instructions one by one would start only before it; none in OAM
    DMA, and none where a JP NZ's target lies in the other half of the map (an MBC5 can
    map bank 0 at 0x4000: the jump leaves for the low half)."""
    jump = wp.where((lw & LOOP_JP) != 0, 16, 12)
    span = loop_pass_cycles(lw)
    n = wp.min((count - 1) & 0xFF, (next_ev - t + jump - 1) // span)
    if (lw & LOOP_JP) != 0 and (pc >= 0x4000) != ((lw & LOOP_HIGH) != 0):
        n = int(0)
    if t + span * n + 8 >= dma_s and t + 4 < dma_e:
        n = int(0)
    return n


@wp.func
def loop_flags(f: int, count: int) -> int:
    """F after a countdown loop's last DEC that left ``count`` (not 0: the jump was taken):
    Z clear, N set, H from the borrow out of the low nibble, C kept."""
    return (f & 0x10) | 0x40 | wp.where(((count + 1) & 0xF) == 0, 0x20, 0)
