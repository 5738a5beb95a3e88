"""DIV/TIMA/TMA/TAC as a closed-form function of the 16-bit divider, caught up lazily.

The divider is ``(t + S_DIV_OFF) & 0xFFFF`` at cycle ``t``. TIMA counts falling edges of
one divider bit (selected by TAC), i.e. the cycles where the divider becomes a multiple of
the period 1024/16/64/256. After an overflow TIMA reads 0 for one M-cycle, then TMA is
loaded and IF bit 2 set. ``timer_sync`` processes every event up to a cycle in O(1) per
overflow, so the CPU can read TIMA at the exact M-cycle of the access and HALT can jump.
"""

from __future__ import annotations

from gbx_gameboy.kstate import GB, load_gb, mget, mset, sget, sset
from gbx_gameboy.layout import (
    DIV,
    IF,
    IO_OFF,
    NEVER,
    S_DIV_OFF,
    S_TIMA_PEND,
    T_RELOAD,
    T_TIMER_NEXT,
    T_TSYNC,
    TAC,
    TIMA,
    TMA,
)
from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})
# Cold paths are ``wp.func(inline=False)``: one call instead of a copy at every call
# site keeps the kernel small and its CPU/NVRTC compile time short. They take ``g.ref``
# rather than the struct itself (see kstate.py: a by-value struct costs a stack copy).


@wp.func
def timer_period(tac: int) -> int:
    sel = tac & 3
    p = int(1024)
    if sel == 1:
        p = int(16)
    elif sel == 2:
        p = int(64)
    elif sel == 3:
        p = int(256)
    return p


@wp.func
def div_at(g: GB, env: int, t: int) -> int:
    """The 16-bit divider at cycle t."""
    return (t + sget(g, env, S_DIV_OFF)) & 0xFFFF


@wp.func
def raise_if(g: GB, env: int, bits: int):
    mset(g, env, IO_OFF + IF, mget(g, env, IO_OFF + IF) | bits)


@wp.func
def timer_schedule(g: GB, env: int, t: int):
    """Store the cycle of the next TIMA reload (the next timer interrupt)."""
    nxt = int(NEVER)
    tac = mget(g, env, IO_OFF + TAC)
    if sget(g, env, S_TIMA_PEND) != 0:
        nxt = sget(g, env, T_RELOAD)
    elif (tac & 4) != 0:
        p = timer_period(tac)
        s0 = div_at(g, env, t)
        tima = mget(g, env, IO_OFF + TIMA)
        nxt = t + (p - s0 % p) + (255 - tima) * p + 4
    sset(g, env, T_TIMER_NEXT, nxt)


@wp.func(inline=False)
def timer_sync(ref: wp.uint64, env: int, t: int):
    """Apply every TIMA increment, overflow and reload at cycles <= t."""
    g = load_gb(ref)
    cur = sget(g, env, T_TSYNC)
    if t > cur:
        tima = mget(g, env, IO_OFF + TIMA)
        tac = mget(g, env, IO_OFF + TAC)
        pend = sget(g, env, S_TIMA_PEND)
        while True:
            if pend != 0:
                r = sget(g, env, T_RELOAD)
                if r <= t:
                    tima = mget(g, env, IO_OFF + TMA)
                    raise_if(g, env, 4)
                    pend = int(0)
                    cur = r
                else:
                    break
            if (tac & 4) == 0:
                break
            p = timer_period(tac)
            s0 = div_at(g, env, cur)
            edges = (s0 + (t - cur)) // p - s0 // p
            if tima + edges < 256:
                tima = tima + edges
                break
            e = cur + (p - s0 % p) + (255 - tima) * p
            tima = int(0)
            pend = int(1)
            sset(g, env, T_RELOAD, e + 4)
            cur = e
        mset(g, env, IO_OFF + TIMA, tima)
        sset(g, env, S_TIMA_PEND, pend)
        sset(g, env, T_TSYNC, t)
        timer_schedule(g, env, t)


@wp.func
def timer_tick_once(g: GB, env: int, t: int):
    """One forced TIMA increment at cycle t (DIV/TAC write glitch); timer already synced."""
    tima = mget(g, env, IO_OFF + TIMA) + 1
    if tima > 255:
        tima = int(0)
        sset(g, env, S_TIMA_PEND, 1)
        sset(g, env, T_RELOAD, t + 4)
    mset(g, env, IO_OFF + TIMA, tima)


@wp.func(inline=False)
def timer_write(ref: wp.uint64, env: int, reg: int, v: int, t: int):
    """CPU write of DIV, TIMA, TMA or TAC at cycle t."""
    g = load_gb(ref)
    if reg == DIV:
        timer_sync(g.ref, env, t)
        tac = mget(g, env, IO_OFF + TAC)
        if (tac & 4) != 0:
            if (div_at(g, env, t) & (timer_period(tac) >> 1)) != 0:
                timer_tick_once(g, env, t)
        sset(g, env, S_DIV_OFF, (0x10000 - (t & 0xFFFF)) & 0xFFFF)
    elif reg == TAC:
        timer_sync(g.ref, env, t)
        old = mget(g, env, IO_OFF + TAC)
        d = div_at(g, env, t)
        old_sig = (old & 4) != 0 and (d & (timer_period(old) >> 1)) != 0
        new_sig = (v & 4) != 0 and (d & (timer_period(v) >> 1)) != 0
        mset(g, env, IO_OFF + TAC, v | 0xF8)
        if old_sig and not new_sig:
            timer_tick_once(g, env, t)
    else:
        timer_sync(g.ref, env, t)
        # A TMA reload that happened on this very cycle wins over a TIMA write and picks
        # up a TMA written on the same cycle.
        reload_now = sget(g, env, S_TIMA_PEND) == 0 and sget(g, env, T_RELOAD) == t
        if reg == TIMA:
            if not reload_now:
                sset(g, env, S_TIMA_PEND, 0)  # a write during the 0x00 cycle cancels the reload
                mset(g, env, IO_OFF + TIMA, v)
        else:
            mset(g, env, IO_OFF + TMA, v)
            if reload_now:
                mset(g, env, IO_OFF + TIMA, v)
    timer_schedule(g, env, sget(g, env, T_TSYNC))

