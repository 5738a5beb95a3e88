"""The DMG APU's observable state machine, without sound output.

What a program can observe of the APU is the sound registers' read-back values, the
channels' on bits in NR52 and wave RAM. This module models what drives them:

* channel on/off: a trigger (NRx4 bit 7) turns a channel on when its DAC is on; turning
  the DAC off (NRx2 & 0xF8 == 0, NR30 bit 7 clear) turns it off; so do an expiring length
  counter and a sweep overflow;
* the frame sequencer, an 8-step counter clocked at 512 Hz by the falling edge of divider
  bit 12 (DIV bit 4): steps 0, 2, 4, 6 clock the length counters, steps 2 and 6 the
  frequency sweep;
* the length counters, including the two DMG quirks around NRx4 writes when the next
  frame-sequencer step does not clock lengths (an extra clock when length is being
  enabled, and a reload to 63/255 instead of 64/256 on a trigger with length enabled);
* the channel-1 sweep: shadow frequency, timer (period 0 counts as 8), the overflow check
  on trigger and on every sweep clock, write-back of the new frequency, and the quirk
  that clearing NR10's negate bit after a negated calculation since the trigger turns
  the channel off;
* power: NR52 bit 7 clear zeroes NR10-NR51 and ignores their writes, except the length
  counters (NRx1), which a DMG keeps and still loads while off; power-on restarts the
  frame sequencer at step 0.

The volume envelope, duty and noise generators only shape the waveform: no DMG register
reads them back, so they are not modelled.

The frame sequencer is caught up lazily, only when a sound register is accessed or DIV is
written: the falling edges of divider bit 12 since the last catch-up are counted from the
cycle counter. The divider as an unbounded count is ``TM_CLOCK + t + c`` with
``c = (S_DIV_OFF - TM_CLOCK) mod 65536`` (constant between DIV writes and across launch
boundaries), so its 8192-cycle blocks (``A_SYNC``) need no rebasing. Nothing here runs in
the CPU loop: the hot path pays nothing unless the program touches the APU.

Per-env state is the tiled ``int32`` array ``apu`` (layout.py, ``A_*`` rows); the
registers themselves and the channel-on bits (NR52 bits 0-3) live in ``mem``'s IO block.
"""

from __future__ import annotations

import numpy as np

from gbx_gameboy.kstate import GB, aget, aset, load_gb, mget, mset, sget, tget
from gbx_gameboy.layout import (
    A_FS,
    A_LEN,
    A_SW_EN,
    A_SW_FREQ,
    A_SW_NEG,
    A_SW_TIMER,
    A_SYNC,
    A_W_LAST,
    A_W_NEXT,
    A_W_POS,
    APU_COUNT,
    IO_OFF,
    NR52,
    S_DIV_OFF,
    TM_CLOCK,
)
from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})

NR10, NR11, NR12, NR13, NR14 = 0x10, 0x11, 0x12, 0x13, 0x14
NR30 = 0x1A
NR33, NR34 = 0x1D, 0x1E
NR51 = 0x25
WAVE_RAM = 0x30
# Ticks caught up one by one at most; beyond that (more than 8 s without any APU access
# while a length counter or the sweep is running) every length counter has expired and
# the sweep has settled, so the remaining ticks only advance the step.
MAX_CATCHUP_TICKS = 4096
# A trigger starts the wave channel's first sample period 6 cycles late (3 ticks of the
# APU's 2 MHz clock).
WAVE_TRIGGER_DELAY = 6
# While channel 3 plays, the CPU reaches wave RAM only when the channel reads it in the
# same cycle (DMG): here, when its read falls in the APU tick (2 MHz, 2 cycles) that ends
# at the access's cycle t.
WAVE_ACCESS_WINDOW = 2


def apu_power_on_rows(post_boot: bool) -> np.ndarray:
    """One env's ``apu`` rows at power-on. After the DMG boot ROM channel 1 is on (the
    boot sound: NR11 = 0x80 loads length 64, length not enabled); with a boot ROM to run,
    everything starts at 0 and the APU is off."""
    rows = np.zeros(APU_COUNT, dtype=np.int32)
    rows[A_SYNC] = -1  # caught up at the first access
    if post_boot:
        rows[A_LEN + 0] = 64
        rows[A_SW_TIMER] = 8
    return rows


# ----------------------------------------------------------------------------- helpers
@wp.func
def nrx4(ch: int) -> int:
    """IO index of channel ch's NRx4 (ch 0..3); NRx1 is 3 below, NRx2 2 below."""
    return NR14 + 5 * ch


@wp.func
def dac_on(g: GB, env: int, ch: int) -> bool:
    on = False
    if ch == 2:
        on = (mget(g, env, IO_OFF + NR30) & 0x80) != 0
    else:
        on = (mget(g, env, IO_OFF + nrx4(ch) - 2) & 0xF8) != 0
    return on


@wp.func
def channel_off(g: GB, env: int, ch: int):
    mset(g, env, IO_OFF + NR52, mget(g, env, IO_OFF + NR52) & ~(1 << ch))


@wp.func
def div_blocks(g: GB, env: int, t: int) -> int:
    """Falling edges of divider bit 12 since power-on (see the module docstring)."""
    clk = tget(g, env, TM_CLOCK)
    c = (wp.int64(sget(g, env, S_DIV_OFF)) - clk) & wp.int64(0xFFFF)
    return int((clk + wp.int64(t) + c) >> wp.int64(13))


@wp.func
def sweep_calc(g: GB, env: int) -> int:
    """The sweep's next frequency from the shadow register; turns channel 1 off on
    overflow (above 2047) and remembers a negated calculation."""
    nr10 = mget(g, env, IO_OFF + NR10)
    f = aget(g, env, A_SW_FREQ)
    d = f >> (nr10 & 7)
    if (nr10 & 8) != 0:
        f = f - d
        aset(g, env, A_SW_NEG, 1)
    else:
        f = f + d
    if f > 2047:
        channel_off(g, env, 0)
    return f


@wp.func
def clock_lengths(g: GB, env: int):
    for ch in range(4):
        n = aget(g, env, A_LEN + ch)
        if n > 0 and (mget(g, env, IO_OFF + nrx4(ch)) & 0x40) != 0:
            n = n - 1
            aset(g, env, A_LEN + ch, n)
            if n == 0:
                channel_off(g, env, ch)


@wp.func
def clock_sweep(g: GB, env: int):
    timer = aget(g, env, A_SW_TIMER) - 1
    if timer <= 0:
        nr10 = mget(g, env, IO_OFF + NR10)
        period = (nr10 >> 4) & 7
        timer = wp.where(period == 0, 8, period)
        if aget(g, env, A_SW_EN) != 0 and period != 0:
            f = sweep_calc(g, env)
            if f <= 2047 and (nr10 & 7) != 0:
                aset(g, env, A_SW_FREQ, f)
                mset(g, env, IO_OFF + NR13, f & 0xFF)
                mset(g, env, IO_OFF + NR14, (mget(g, env, IO_OFF + NR14) & 0xF8) | (f >> 8))
                sweep_calc(g, env)  # overflow check of the following step, not stored
    aset(g, env, A_SW_TIMER, timer)


@wp.func
def apu_busy(g: GB, env: int) -> bool:
    """Whether a frame-sequencer tick can change anything: a running length counter, or
    channel 1 on with its sweep enabled."""
    busy = False
    for ch in range(4):
        if aget(g, env, A_LEN + ch) > 0 and (mget(g, env, IO_OFF + nrx4(ch)) & 0x40) != 0:
            busy = True
    if (mget(g, env, IO_OFF + NR52) & 1) != 0 and aget(g, env, A_SW_EN) != 0:
        busy = True
    return busy


@wp.func
def apu_ticks(g: GB, env: int, n: int):
    """Run n frame-sequencer steps."""
    fs = aget(g, env, A_FS)
    left = n
    if left > MAX_CATCHUP_TICKS:
        fs = (fs + left - MAX_CATCHUP_TICKS) & 7
        left = MAX_CATCHUP_TICKS
    while left > 0 and apu_busy(g, env):
        if (fs & 1) == 0:
            clock_lengths(g, env)
        if fs == 2 or fs == 6:
            if (mget(g, env, IO_OFF + NR52) & 1) != 0:
                clock_sweep(g, env)
        fs = (fs + 1) & 7
        left = left - 1
    aset(g, env, A_FS, (fs + left) & 7)


@wp.func
def apu_sync(g: GB, env: int, t: int):
    """Catch the frame sequencer up to cycle t (it stands still while the APU is off)."""
    now = div_blocks(g, env, t)
    last = aget(g, env, A_SYNC)
    aset(g, env, A_SYNC, now)
    if last >= 0 and now > last and (mget(g, env, IO_OFF + NR52) & 0x80) != 0:
        apu_ticks(g, env, now - last)


# ----------------------------------------------------------------------------- wave
TWO32 = 4294967296
HALF32 = 2147483648


@wp.func
def aget64(g: GB, env: int, k: int) -> wp.int64:
    """A non-negative int64 kept in rows k (low 32 bits) and k + 1 (high)."""
    lo = wp.int64(aget(g, env, k))
    if lo < wp.int64(0):
        lo = lo + wp.int64(TWO32)
    return wp.int64(aget(g, env, k + 1)) * wp.int64(TWO32) + lo


@wp.func
def aset64(g: GB, env: int, k: int, v: wp.int64):
    hi = v // wp.int64(TWO32)  # type: ignore[operator]  # (Warp stub lacks int64 //)
    lo = v - hi * wp.int64(TWO32)
    if lo >= wp.int64(HALF32):
        lo = lo - wp.int64(TWO32)
    aset(g, env, k, int(lo))
    aset(g, env, k + 1, int(hi))


@wp.func
def wave_period(g: GB, env: int) -> wp.int64:
    """Cycles between two wave RAM reads: 2 * (2048 - frequency)."""
    f = mget(g, env, IO_OFF + NR33) | ((mget(g, env, IO_OFF + NR34) & 7) << 8)
    return wp.int64(2 * (2048 - f))


@wp.func
def wave_sync(g: GB, env: int, now: wp.int64):
    """Advance channel 3's wave RAM reads up to absolute cycle ``now``. The period
    between reads is the one in NR33/NR34 (they are caught up before every write)."""
    if (mget(g, env, IO_OFF + NR52) & 4) != 0:
        nxt = aget64(g, env, A_W_NEXT)
        if now >= nxt:
            p = wave_period(g, env)
            k = (now - nxt) // p + wp.int64(1)
            aset(g, env, A_W_POS, int((wp.int64(aget(g, env, A_W_POS)) + k) & wp.int64(31)))
            aset64(g, env, A_W_LAST, nxt + (k - wp.int64(1)) * p)
            aset64(g, env, A_W_NEXT, nxt + k * p)


@wp.func
def abs_cycle(g: GB, env: int, t: int) -> wp.int64:
    return tget(g, env, TM_CLOCK) + wp.int64(t)


@wp.func
def wave_byte_at(g: GB, env: int, i: int, t: int) -> int:
    """Offset of the wave RAM byte that a CPU access of FF00+i at cycle t reaches, or -1
    when channel 3 plays and is not reading wave RAM right then."""
    off = i
    if (mget(g, env, IO_OFF + NR52) & 4) != 0:
        now = abs_cycle(g, env, t)
        wave_sync(g, env, now)
        off = int(-1)
        if now - aget64(g, env, A_W_LAST) < wp.int64(WAVE_ACCESS_WINDOW):
            off = WAVE_RAM + (aget(g, env, A_W_POS) >> 1)
    return off


@wp.func
def wave_trigger(g: GB, env: int, t: int):
    """Restart channel 3 at sample 0. On a DMG, a trigger while the channel is about to
    read wave RAM corrupts its first bytes: the 4-byte block holding the byte about to be
    read is copied over bytes 0-3 (only byte 0, from that byte, in the first block)."""
    now = abs_cycle(g, env, t)
    if (mget(g, env, IO_OFF + NR52) & 4) != 0:
        wave_sync(g, env, now)
        if aget64(g, env, A_W_NEXT) - now <= wp.int64(2):
            b = ((aget(g, env, A_W_POS) + 1) >> 1) & 15
            if b < 4:
                mset(g, env, IO_OFF + WAVE_RAM, mget(g, env, IO_OFF + WAVE_RAM + b))
            else:
                for j in range(4):
                    src = IO_OFF + WAVE_RAM + (b & 12) + j
                    mset(g, env, IO_OFF + WAVE_RAM + j, mget(g, env, src))
    aset(g, env, A_W_POS, 0)
    aset64(g, env, A_W_LAST, now - wp.int64(WAVE_ACCESS_WINDOW))  # no read just now
    aset64(g, env, A_W_NEXT, now + wave_period(g, env) + wp.int64(WAVE_TRIGGER_DELAY))


# ----------------------------------------------------------------------------- writes
@wp.func
def length_load(g: GB, env: int, ch: int, v: int):
    """NRx1 write: the length counter counts up from the written value to 64 (256)."""
    if ch == 2:
        aset(g, env, A_LEN + 2, 256 - v)
    else:
        aset(g, env, A_LEN + ch, 64 - (v & 0x3F))


@wp.func
def sweep_trigger(g: GB, env: int):
    nr10 = mget(g, env, IO_OFF + NR10)
    period = (nr10 >> 4) & 7
    shift = nr10 & 7
    aset(g, env, A_SW_FREQ, mget(g, env, IO_OFF + NR13) | ((mget(g, env, IO_OFF + NR14) & 7) << 8))
    aset(g, env, A_SW_TIMER, wp.where(period == 0, 8, period))
    aset(g, env, A_SW_EN, wp.where(period != 0 or shift != 0, 1, 0))
    aset(g, env, A_SW_NEG, 0)
    if shift != 0:
        sweep_calc(g, env)  # overflow check only; the shadow keeps the old value


@wp.func
def nrx4_write(g: GB, env: int, ch: int, old: int, v: int, t: int):
    """Length enable and trigger. ``old`` is NRx4 before the write."""
    n = aget(g, env, A_LEN + ch)
    # The next step does not clock lengths: enabling length clocks it once now, and a
    # trigger that reloads an expired counter with length enabled starts one lower.
    first_half = (aget(g, env, A_FS) & 1) != 0
    len_on = (v & 0x40) != 0
    if first_half and (old & 0x40) == 0 and len_on and n > 0:
        n = n - 1
        if n == 0 and (v & 0x80) == 0:
            channel_off(g, env, ch)
    if (v & 0x80) != 0:
        if ch == 2:
            wave_trigger(g, env, t)  # before the on bit is set: it checks a running channel
        if dac_on(g, env, ch):
            mset(g, env, IO_OFF + NR52, mget(g, env, IO_OFF + NR52) | (1 << ch))
        if n == 0:
            n = wp.where(ch == 2, 256, 64)
            if len_on and first_half:
                n = n - 1
        if ch == 0:
            sweep_trigger(g, env)
    aset(g, env, A_LEN + ch, n)


@wp.func
def power_off(g: GB, env: int):
    """NR52 bit 7 cleared: NR10-NR51 read as zero, every channel off (lengths kept)."""
    for i in range(NR10, NR51 + 1):
        mset(g, env, IO_OFF + i, 0)
    mset(g, env, IO_OFF + NR52, 0)
    aset(g, env, A_SW_EN, 0)
    aset(g, env, A_SW_NEG, 0)


@wp.func(inline=False)
def apu_write(ref: wp.uint64, env: int, i: int, v: int, t: int):
    """CPU write of byte v to sound register or wave RAM FF00+i (0x10 <= i < 0x40)."""
    g = load_gb(ref)
    apu_sync(g, env, t)
    on = (mget(g, env, IO_OFF + NR52) & 0x80) != 0
    if i == NR52:
        if (v & 0x80) == 0:
            if on:
                power_off(g, env)
        elif not on:
            mset(g, env, IO_OFF + NR52, 0x80)
            aset(g, env, A_FS, 0)  # the next frame-sequencer step is step 0
    elif i >= WAVE_RAM:
        off = wave_byte_at(g, env, i, t)
        if off >= 0:
            mset(g, env, IO_OFF + off, v)
    elif i < NR52:
        ch = (i - NR10) // 5
        reg = (i - NR10) % 5
        if ch > 3:
            # NR50/NR51: plain storage
            if on:
                mset(g, env, IO_OFF + i, v)
        elif reg == 1:
            # Length counters work while the APU is off (DMG); the rest of NRx1 does not.
            length_load(g, env, ch, v)
            if on:
                mset(g, env, IO_OFF + i, v)
        elif on:
            if i == NR33 or i == NR34:
                wave_sync(g, env, abs_cycle(g, env, t))  # reads so far at the old period
            old = mget(g, env, IO_OFF + i)
            mset(g, env, IO_OFF + i, v)
            if i == NR10:
                if (v & 8) == 0 and aget(g, env, A_SW_NEG) != 0:
                    channel_off(g, env, 0)
            elif i == NR30 or (reg == 2 and ch != 2):
                if not dac_on(g, env, ch):
                    channel_off(g, env, ch)
            elif reg == 4:
                nrx4_write(g, env, ch, old, v, t)
    # FF27-FF2F are unused: writes are dropped


# ----------------------------------------------------------------------------- reads
@wp.func(inline=False)
def apu_read(ref: wp.uint64, env: int, i: int, t: int) -> int:
    """CPU read of sound register or wave RAM FF00+i (0x10 <= i < 0x40)."""
    g = load_gb(ref)
    v = int(0xFF)
    if i == NR52:
        apu_sync(g, env, t)
        v = (mget(g, env, IO_OFF + NR52) & 0x8F) | 0x70
    elif i >= WAVE_RAM:
        apu_sync(g, env, t)
        off = wave_byte_at(g, env, i, t)
        if off >= 0:
            v = mget(g, env, IO_OFF + off)
    else:
        v = mget(g, env, IO_OFF + i) | int(g.io_mask[i])
    return v


@wp.func(inline=False)
def apu_div_write(ref: wp.uint64, env: int, t: int):
    """DIV is about to be reset at cycle t: catch up, clock the frame sequencer once more if
    divider bit 12 falls with the reset, and restart the block count from the reset value
    (the divider reads 0 at t, so its unbounded count is the next multiple of 65536)."""
    g = load_gb(ref)
    apu_sync(g, env, t)
    bit12 = ((t + sget(g, env, S_DIV_OFF)) & 0x1000) != 0
    if bit12 and (mget(g, env, IO_OFF + NR52) & 0x80) != 0:
        apu_ticks(g, env, 1)
    now = tget(g, env, TM_CLOCK) + wp.int64(t)
    aset(g, env, A_SYNC, int(((now + wp.int64(0xFFFF)) >> wp.int64(16)) << wp.int64(3)))
