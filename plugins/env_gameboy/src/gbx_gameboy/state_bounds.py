"""Bring a loaded env state into the ranges the hardware (and the kernels) can hold.

A savestate is untrusted input: any field may hold any value its integer type allows.
:func:`sanitize` maps every field of one env's state (``EnvState``, host tensors) into
the range the DMG can be in (Pan Docs), so that the kernels' indices stay inside the
env's slice and every scheduled event happens within a bounded time:

* CPU registers are masked to 8/16 bits, the run flags to their few legal values;
* LY is at most 153 and 0 with the LCD off; the PPU's mode and scanline phase are
  derived again from LCDC, LY and STAT's mode when the stored pair is not one the
  PPU can be in (LY 144-153 is VBlank: mode 1, as is line 153 once LY reads 0);
* MBC registers are masked to the bits the controller latches, and the mapped ROM
  banks and cart-RAM window are recomputed from them (the kernel's rules);
* the timer's next event is recomputed from DIV, TIMA, TMA and TAC; every other event
  time is clamped to the window the emulator can schedule it in.

A state the emulator itself wrote is already in range: :func:`sanitize` returns it
unchanged (bit for bit), which the savestate tests check.
"""

from __future__ import annotations

import numpy as np

from gbx_gameboy import layout as L
from gbx_gameboy.cartridge import MBC_1, MBC_2, MBC_3, MBC_5, Cartridge
from gbx_gameboy.cpu import PAST_LIMIT
from gbx_gameboy.ppu_timing import (
    MAX_OBJECT_PENALTY,
    MODE3_BASE,
    PH_DRAW,
    PH_HBLANK,
    PH_LINE153,
    PH_LINE_START,
    PH_OAM,
    PH_PRE,
    PH_VBLANK,
    WINDOW_DOTS,
)
from gbx_gameboy.snapshot import EnvState

LAST_LINE = 153  # LY 0-143 visible, 144-153 VBlank
TIMER_PERIODS = {0: 1024, 1: 16, 2: 64, 3: 256}
# How far ahead the emulator ever schedules each event (cycles from "now").
_RELOAD_AHEAD = 8  # TIMA reload: 4 cycles after the overflow
_TIMER_AHEAD = 256 * 1024 + 1024 + 8  # 256 increments of the slowest period
_SERIAL_AHEAD = 9 * 512 + 8  # 8 bits at 8192 Hz plus the clock phase
_DMA_AHEAD = 8 + 640 + 8  # set-up M-cycle plus 160 bytes
_MODE3_MAX = MODE3_BASE + (7 + WINDOW_DOTS + 3) // 4 * 4 + MAX_OBJECT_PENALTY
# MBC register bits each controller latches (memory.py's rom_write).
_MBC_R1_MASK = {MBC_1: 0x1F, MBC_2: 0x0F, MBC_3: 0x7F, MBC_5: 0x1FF}
_MBC_R2_MASK = {MBC_1: 0x03, MBC_3: 0x0F, MBC_5: 0x0F}
# Valid (phase, STAT mode) pairs on lines 0-143 with the LCD on; mode 0 in PH_OAM is the
# first line after the LCD is switched on (no OAM scan).
_LINE_PAIRS = {
    (PH_LINE_START, 0), (PH_OAM, 2), (PH_OAM, 0), (PH_DRAW, 3), (PH_HBLANK, 0), (PH_PRE, 0),
}
_PHASE_OF_MODE = {0: PH_HBLANK, 2: PH_OAM, 3: PH_DRAW}


def _clip(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


def _event(v: int, ahead: int, never_ok: bool = True) -> int:
    """An event time: NEVER stays NEVER, anything else within [-PAST_LIMIT, ahead]."""
    if never_ok and v >= L.NEVER:
        return L.NEVER
    return _clip(v, -PAST_LIMIT, ahead)


def update_banks(cart: Cartridge, st: np.ndarray) -> None:
    """The effective ROM banks and cart-RAM window for the raw MBC registers in ``st``
    (the rules of memory.py's ``mbc_update_banks``)."""
    r1, r2, mode = int(st[L.S_MBC_R1]), int(st[L.S_MBC_R2]), int(st[L.S_MBC_MODE])
    ram_on = (int(st[L.S_RAMG]) & 0x0F) == 0x0A and cart.ram_bytes > 0
    bank0, bankx, ramoff = 0, 1, -1
    if cart.mbc == MBC_1:
        bankx = (r2 << 5) | r1
        if mode:
            bank0 = r2 << 5
        if ram_on:
            ramoff = r2 * 0x2000 if mode else 0
    elif cart.mbc == MBC_2:
        bankx = r1
        ramoff = 0 if ram_on else -1
    elif cart.mbc == MBC_3:
        bankx = r1
        if ram_on and r2 < 4:
            ramoff = r2 * 0x2000
    elif cart.mbc == MBC_5:
        bankx = r1
        if ram_on:
            ramoff = r2 * 0x2000
    elif cart.ram_bytes > 0:
        ramoff = 0
    st[L.S_BANK0], st[L.S_BANKX], st[L.S_RAMOFF] = bank0, bankx, ramoff


def ppu_phase(lcd_on: bool, ly: int, mode: int, phase: int) -> tuple[int, int]:
    """(phase, mode) the PPU is in: the stored pair when the PPU can be in it at line
    ``ly``, else the one STAT's mode names (VBlank on lines 144-153)."""
    if not lcd_on:
        return PH_HBLANK, 0
    if ly >= 144:
        return PH_VBLANK, 1
    if ly == 0 and (phase, mode) == (PH_LINE153, 1):
        return phase, mode  # line 153 after LY turned 0
    if (phase, mode) in _LINE_PAIRS:
        return phase, mode
    mode = mode if mode in _PHASE_OF_MODE else 0
    return _PHASE_OF_MODE[mode], mode


def timer_next(st: np.ndarray, io: np.ndarray) -> int:
    """The next TIMA reload after the last timer sync (timer.py's ``timer_schedule``)."""
    if st[L.S_TIMA_PEND]:
        return int(st[L.T_RELOAD])
    tac = int(io[L.TAC])
    if not tac & 4:
        return L.NEVER
    p = TIMER_PERIODS[tac & 3]
    t = int(st[L.T_TSYNC])
    s0 = (t + int(st[L.S_DIV_OFF])) & 0xFFFF
    return t + (p - s0 % p) + (255 - int(io[L.TIMA])) * p + 4


def _sanitize_st(st: np.ndarray, mem: np.ndarray, cart: Cartridge) -> None:
    """Clamp the int32 state fields of one env in place (see the module docstring)."""
    v = st.astype(np.int64)  # arithmetic below must not wrap
    for k in range(8):
        v[k] &= 0xFF
    v[L.R_F] &= 0xF0
    v[L.R_SP] &= 0xFFFF
    v[L.R_PC] &= 0xFFFF
    v[L.S_IME] = int(v[L.S_IME] != 0)
    v[L.S_HALTED] = _clip(int(v[L.S_HALTED]), 0, 2)
    v[L.S_EI_DELAY] = _clip(int(v[L.S_EI_DELAY]), 0, 2)
    v[L.S_LOCKED] = _clip(int(v[L.S_LOCKED]), 0, 2)
    v[L.S_HALT_BUG] = int(v[L.S_HALT_BUG] != 0)
    # Memory bank controller: raw registers, then what follows from them.
    v[L.S_MBC_R1] &= _MBC_R1_MASK.get(cart.mbc, 0x1FF)
    if cart.mbc in (MBC_1, MBC_2, MBC_3) and v[L.S_MBC_R1] == 0:
        v[L.S_MBC_R1] = 1  # these controllers map bank 1 for a written 0
    v[L.S_MBC_R2] &= _MBC_R2_MASK.get(cart.mbc, 0)
    v[L.S_MBC_MODE] &= 1
    v[L.S_RAMG] &= 0xFF
    v[L.S_RTC_SEL] = v[L.S_RTC_SEL] if 0x08 <= v[L.S_RTC_SEL] <= 0x0C else 0
    v[L.S_RTC_LATCH] &= 0xFF
    for k, mask in ((L.S_RTC_S, 0x3F), (L.S_RTC_M, 0x3F), (L.S_RTC_H, 0x1F),
                    (L.S_RTC_DL, 0xFF), (L.S_RTC_DH, 0xC1)):
        v[k] &= mask
    update_banks(cart, v)
    # Timer and serial port.
    v[L.S_DIV_OFF] &= 0xFFFF
    v[L.S_TIMA_PEND] = int(v[L.S_TIMA_PEND] != 0)
    v[L.T_TSYNC] = _clip(int(v[L.T_TSYNC]), -PAST_LIMIT, 0)
    v[L.T_RELOAD] = _event(int(v[L.T_RELOAD]), _RELOAD_AHEAD)
    if v[L.S_TIMA_PEND] and v[L.T_RELOAD] == L.NEVER:
        v[L.T_RELOAD] = 0  # a pending reload happens now
    io = mem[L.IO_OFF:L.IO_OFF + 0x80]
    v[L.T_TIMER_NEXT] = _event(timer_next(v, io), _TIMER_AHEAD)
    v[L.T_SERIAL_END] = _event(int(v[L.T_SERIAL_END]), _SERIAL_AHEAD)
    v[L.S_SER_LEN] = max(int(v[L.S_SER_LEN]), 0)
    v[L.T_DMA_END] = _event(int(v[L.T_DMA_END]), _DMA_AHEAD, never_ok=False)
    v[L.T_DMA_START] = _clip(int(v[L.T_DMA_START]), -PAST_LIMIT, int(v[L.T_DMA_END]))
    v[L.S_BUTTONS] &= 0xFF
    # PPU: LY, mode and phase, then the times of the line.
    lcd_on = bool(io[L.LCDC] & 0x80)
    ly = _clip(int(io[L.LY]), 0, LAST_LINE) if lcd_on else 0
    io[L.LY] = ly
    phase, mode = ppu_phase(lcd_on, ly, int(v[L.S_PPU_MODE]), int(v[L.S_PPU_PHASE]))
    v[L.S_PPU_PHASE], v[L.S_PPU_MODE] = phase, mode
    v[L.S_MODE3_LEN] = _clip(int(v[L.S_MODE3_LEN]), MODE3_BASE, _MODE3_MAX)
    v[L.S_STAT_LINE] = int(v[L.S_STAT_LINE] != 0)
    v[L.S_WIN_LINE] = _clip(int(v[L.S_WIN_LINE]), 0, 144)
    # PPU flags, each only where it can hold: the first line after LCD on is line 0, its
    # blank frame lines 0-143, an older pending VBlank request line 144, the LY=LYC gap
    # line 153 after LY turned 0.
    flags = int(v[L.S_PPU_FLAGS])
    keep = 0
    if lcd_on:
        keep = (L.PPU_FIRST_LINE if ly == 0 else 0) | (L.PPU_BLANK_FRAME if ly < 144 else 0)
        keep |= L.PPU_VBLANK_PENDING if ly == 144 else 0
        keep |= L.PPU_LY153_GAP if phase == PH_LINE153 else 0
    v[L.S_PPU_FLAGS] = flags & keep
    v[L.T_PPU_NEXT] = _clip(int(v[L.T_PPU_NEXT]), -L.CYCLES_PER_FRAME, L.CYCLES_PER_FRAME)
    v[L.T_LINE_AT] = _clip(int(v[L.T_LINE_AT]), -PAST_LIMIT, L.CYCLES_PER_FRAME)
    st[:] = v.astype(np.int32)


def sanitize(arrays: EnvState, cart: Cartridge) -> EnvState:
    """A copy of one env's host state with every field in range (see the module docstring)."""
    out = {k: t.detach().to("cpu").clone() for k, t in arrays.items()}
    if "st" in out and "mem" in out:
        _sanitize_st(out["st"].numpy(), out["mem"].numpy(), cart)
    if "tm" in out:
        tm = out["tm"].numpy()
        for k in (L.TM_CLOCK, L.TM_FRAMES, L.TM_INSTRS):
            tm[k] = max(int(tm[k]), 0)
        # The RTC adds this offset to the cycle clock; keep the sum far from int64's end.
        tm[L.TM_RTC_OFF] = _clip(int(tm[L.TM_RTC_OFF]), -(1 << 60), 1 << 60)
    if "apu" in out:
        _sanitize_apu(out["apu"].numpy())
    if "fb" in out:
        out["fb"] &= 3  # shade indices
    return out


def _sanitize_apu(a: np.ndarray) -> None:
    """The APU rows (apu.py): the wave position indexes wave RAM and the frame-sequencer
    step picks what a tick clocks, so both are masked; counters keep their ranges."""
    a[L.A_FS] &= 7
    a[L.A_W_POS] &= 31
    for ch in range(4):  # length counters count down from 64 (256 for the wave channel)
        a[L.A_LEN + ch] = _clip(int(a[L.A_LEN + ch]), 0, 256 if ch == 2 else 64)
    a[L.A_SW_TIMER] = _clip(int(a[L.A_SW_TIMER]), 0, 8)
    a[L.A_SW_EN] = int(a[L.A_SW_EN] != 0)
    a[L.A_SW_NEG] = int(a[L.A_SW_NEG] != 0)
    a[L.A_SYNC] = max(int(a[L.A_SYNC]), -1)  # -1: caught up at the first access
