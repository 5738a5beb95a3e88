"""The DMG memory map as seen by the CPU: ROM/MBC banking, VRAM, cart RAM, WRAM, OAM, IO, HRAM.

Every access takes the cycle ``t`` at which it happens so timer and PPU state are caught up
to that exact M-cycle first (see timer.py, ppu_timing.py).
"""

from __future__ import annotations

from gbx_gameboy.apu import apu_div_write, apu_read, apu_write
from gbx_gameboy.kstate import GB, cget, cset, load_gb, mget, mset, serset, sget, sset, tget, tset
from gbx_gameboy.layout import (
    BOOT_OFF_REG,
    DIV,
    DMA,
    HRAM_OFF,
    IF,
    IO_OFF,
    LCDC,
    LY,
    LYC,
    NEVER,
    OAM_OFF,
    P1,
    PPU_FIRST_LINE,
    S_BANK0,
    S_BANKX,
    S_BUTTONS,
    S_MBC_MODE,
    S_MBC_R1,
    S_MBC_R2,
    S_PPU_FLAGS,
    S_RAMG,
    S_RAMOFF,
    S_RTC_DH,
    S_RTC_DL,
    S_RTC_H,
    S_RTC_LATCH,
    S_RTC_M,
    S_RTC_S,
    S_RTC_SEL,
    S_SER_LEN,
    SB,
    SC,
    STAT,
    T_DMA_END,
    T_DMA_START,
    T_PPU_NEXT,
    T_SERIAL_END,
    T_TIMER_NEXT,
    TAC,
    TIMA,
    TM_CLOCK,
    TM_RTC_OFF,
    TMA,
    VRAM_OFF,
    WRAM_OFF,
)
from gbx_gameboy.oam_bug import OAM_BUG_READ, OAM_BUG_WRITE, oam_corrupt
from gbx_gameboy.ppu_timing import (
    ACCESS_OAM_READ,
    ACCESS_OAM_WRITE,
    ACCESS_VRAM,
    flush_pending,
    lcdc_write,
    lcdon_line_end,
    ppu_sync,
    stat_read,
    stat_update,
    stat_write_quirk,
    vram_oam_blocked,
)
from gbx_gameboy.timer import div_at, raise_if, timer_sync, timer_write
from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})
# Cold paths are ``wp.func(inline=False)``: one call instead of a copy at every call
# site keeps the kernel small and its CPU/NVRTC compile time short. They take ``g.ref``
# rather than the struct itself (see kstate.py: a by-value struct costs a stack copy).

MBC_1 = 1
MBC_2 = 2
MBC_3 = 3
MBC_5 = 5
SERIAL_BIT_CYCLES = 512  # internal clock 8192 Hz
SERIAL_PHASE = 4


# ----------------------------------------------------------------------------- cartridge
@wp.func
def mbc_update_banks(g: GB, env: int):
    """Recompute effective ROM banks and the RAM window from the raw MBC registers."""
    r1 = sget(g, env, S_MBC_R1)
    r2 = sget(g, env, S_MBC_R2)
    mode = sget(g, env, S_MBC_MODE)
    ramg = sget(g, env, S_RAMG)
    bank0 = int(0)
    bankx = int(1)
    ramoff = int(-1)
    ram_on = (ramg & 0x0F) == 0x0A and g.cram_mask >= 0
    if g.mbc == MBC_1:
        bankx = (r2 << 5) | r1
        if mode != 0:
            bank0 = r2 << 5
            if ram_on:
                ramoff = r2 * 0x2000
        elif ram_on:
            ramoff = int(0)
    elif g.mbc == MBC_2:
        bankx = r1
        if ram_on:
            ramoff = int(0)
    elif g.mbc == MBC_3:
        bankx = r1
        if ram_on and r2 < 4:
            ramoff = r2 * 0x2000
    elif g.mbc == MBC_5:
        bankx = r1
        if ram_on:
            ramoff = r2 * 0x2000
    else:
        if g.cram_mask >= 0:
            ramoff = int(0)
    sset(g, env, S_BANK0, bank0)
    sset(g, env, S_BANKX, bankx)
    sset(g, env, S_RAMOFF, ramoff)


@wp.func(inline=False)
def rtc_latch(ref: wp.uint64, env: int, t: int):
    """MBC3 RTC: latch the time derived from emulated cycles (deterministic, no wall clock)."""
    g = load_gb(ref)
    now = tget(g, env, TM_CLOCK) + wp.int64(t)
    secs = (now + tget(g, env, TM_RTC_OFF)) // wp.int64(4194304)
    s = int(secs % wp.int64(60))
    m = int((secs // wp.int64(60)) % wp.int64(60))
    h = int((secs // wp.int64(3600)) % wp.int64(24))
    days = int((secs // wp.int64(86400)) % wp.int64(512))
    sset(g, env, S_RTC_S, s)
    sset(g, env, S_RTC_M, m)
    sset(g, env, S_RTC_H, h)
    sset(g, env, S_RTC_DL, days & 0xFF)
    sset(g, env, S_RTC_DH, (days >> 8) & 1)


@wp.func(inline=False)
def rom_write(ref: wp.uint64, env: int, a: int, v: int, t: int):
    """Writes to 0000-7FFF program the memory bank controller."""
    g = load_gb(ref)
    if g.mbc == MBC_1:
        if a < 0x2000:
            sset(g, env, S_RAMG, v)
        elif a < 0x4000:
            r1 = v & 0x1F
            if r1 == 0:
                r1 = int(1)
            sset(g, env, S_MBC_R1, r1)
        elif a < 0x6000:
            sset(g, env, S_MBC_R2, v & 3)
        else:
            sset(g, env, S_MBC_MODE, v & 1)
    elif g.mbc == MBC_2:
        if a < 0x4000:
            if (a & 0x100) != 0:
                r1 = v & 0x0F
                if r1 == 0:
                    r1 = int(1)
                sset(g, env, S_MBC_R1, r1)
            else:
                sset(g, env, S_RAMG, v)
    elif g.mbc == MBC_3:
        if a < 0x2000:
            sset(g, env, S_RAMG, v)
        elif a < 0x4000:
            r1 = v & 0x7F
            if r1 == 0:
                r1 = int(1)
            sset(g, env, S_MBC_R1, r1)
        elif a < 0x6000:
            sset(g, env, S_MBC_R2, v & 0x0F)
            if v >= 0x08 and v <= 0x0C:
                sset(g, env, S_RTC_SEL, v)
            else:
                sset(g, env, S_RTC_SEL, 0)
        else:
            if sget(g, env, S_RTC_LATCH) == 0 and v == 1:
                rtc_latch(g.ref, env, t)
            sset(g, env, S_RTC_LATCH, v)
    elif g.mbc == MBC_5:
        if a < 0x2000:
            sset(g, env, S_RAMG, v)
        elif a < 0x3000:
            sset(g, env, S_MBC_R1, (sget(g, env, S_MBC_R1) & 0x100) | v)
        elif a < 0x4000:
            sset(g, env, S_MBC_R1, (sget(g, env, S_MBC_R1) & 0xFF) | ((v & 1) << 8))
        elif a < 0x6000:
            sset(g, env, S_MBC_R2, v & 0x0F)
    mbc_update_banks(g, env)


@wp.func(inline=False)
def rtc_read(ref: wp.uint64, env: int, sel: int) -> int:
    g = load_gb(ref)
    v = int(0xFF)
    if sel == 0x08:
        v = sget(g, env, S_RTC_S)
    elif sel == 0x09:
        v = sget(g, env, S_RTC_M)
    elif sel == 0x0A:
        v = sget(g, env, S_RTC_H)
    elif sel == 0x0B:
        v = sget(g, env, S_RTC_DL)
    elif sel == 0x0C:
        v = sget(g, env, S_RTC_DH)
    return v


@wp.func(inline=False)
def rtc_write(ref: wp.uint64, env: int, sel: int, v: int, t: int):
    """Set one RTC field: shift the cycle-driven clock so the running time has that value."""
    g = load_gb(ref)
    now = tget(g, env, TM_CLOCK) + wp.int64(t)
    secs = (now + tget(g, env, TM_RTC_OFF)) // wp.int64(4194304)
    s = secs % wp.int64(60)
    m = (secs // wp.int64(60)) % wp.int64(60)
    h = (secs // wp.int64(3600)) % wp.int64(24)
    d = (secs // wp.int64(86400)) % wp.int64(512)
    vv = wp.int64(v)
    if sel == 0x08:
        s = vv % wp.int64(60)
    elif sel == 0x09:
        m = vv % wp.int64(60)
    elif sel == 0x0A:
        h = vv % wp.int64(24)
    elif sel == 0x0B:
        d = (d & wp.int64(0x100)) | vv
    else:
        d = (d & wp.int64(0xFF)) | ((vv & wp.int64(1)) << wp.int64(8))
    total = ((d * wp.int64(24) + h) * wp.int64(60) + m) * wp.int64(60) + s
    tset(g, env, TM_RTC_OFF, total * wp.int64(4194304) - now)
    rtc_latch(g.ref, env, t)


@wp.func(inline=False)
def cart_ram_read(ref: wp.uint64, env: int, a: int) -> int:
    g = load_gb(ref)
    v = int(0xFF)
    off = sget(g, env, S_RAMOFF)
    if g.mbc == MBC_3 and sget(g, env, S_RTC_SEL) != 0:
        if (sget(g, env, S_RAMG) & 0x0F) == 0x0A:
            v = rtc_read(g.ref, env, sget(g, env, S_RTC_SEL))
    elif off >= 0 and g.cram_mask >= 0:  # a state's RAM window needs RAM to exist
        if g.mbc == MBC_2:
            v = 0xF0 | cget(g, env, a & 0x1FF)
        else:
            v = cget(g, env, (off + (a - 0xA000)) & g.cram_mask)
    return v


@wp.func(inline=False)
def cart_ram_write(ref: wp.uint64, env: int, a: int, v: int, t: int):
    g = load_gb(ref)
    off = sget(g, env, S_RAMOFF)
    if g.mbc == MBC_3 and sget(g, env, S_RTC_SEL) != 0:
        if (sget(g, env, S_RAMG) & 0x0F) == 0x0A:
            rtc_write(g.ref, env, sget(g, env, S_RTC_SEL), v, t)
    elif off >= 0 and g.cram_mask >= 0:
        if g.mbc == MBC_2:
            cset(g, env, a & 0x1FF, v & 0x0F)
        else:
            cset(g, env, (off + (a - 0xA000)) & g.cram_mask, v)


# ----------------------------------------------------------------------------- IO
@wp.func
def joypad_value(g: GB, env: int) -> int:
    sel = mget(g, env, IO_OFF + P1) & 0x30
    btn = sget(g, env, S_BUTTONS)
    low = int(0x0F)
    if (sel & 0x10) == 0:
        low = low & ~(btn & 0x0F)
    if (sel & 0x20) == 0:
        low = low & ~((btn >> 4) & 0x0F)
    return 0xC0 | sel | low


@wp.func(inline=False)
def set_buttons(ref: wp.uint64, env: int, buttons: int):
    """Change the held buttons; a newly pressed, selected button requests the joypad IRQ."""
    g = load_gb(ref)
    before = joypad_value(g, env) & 0x0F
    sset(g, env, S_BUTTONS, buttons & 0xFF)
    after = joypad_value(g, env) & 0x0F
    if (before & ~after) != 0:
        raise_if(g, env, 0x10)


@wp.func(inline=False)
def serial_sync(ref: wp.uint64, env: int, t: int):
    g = load_gb(ref)
    if sget(g, env, T_SERIAL_END) <= t:
        mset(g, env, IO_OFF + SB, 0xFF)  # nothing connected: all ones shifted in
        mset(g, env, IO_OFF + SC, mget(g, env, IO_OFF + SC) & 0x7F)
        raise_if(g, env, 8)
        sset(g, env, T_SERIAL_END, NEVER)


@wp.func(inline=False)
def serial_start(ref: wp.uint64, env: int, t: int):
    """SC written with bit 7 and bit 0: capture SB and schedule the end of the transfer."""
    g = load_gb(ref)
    n = wp.max(sget(g, env, S_SER_LEN), 0)  # a count from a state: never a negative slot
    serset(g, env, n % g.ser_cap, mget(g, env, IO_OFF + SB))
    sset(g, env, S_SER_LEN, n + 1)
    # 8 bits clocked at 8192 Hz by the divider; the serial clock edge sits 4 cycles after
    # divider bit 8 falls (matches the DMG boot alignment).
    d = div_at(g, env, t) + SERIAL_PHASE
    sset(g, env, T_SERIAL_END, t + (SERIAL_BIT_CYCLES - d % SERIAL_BIT_CYCLES) + 7 * 512)


DMA_BYTES = 160  # OAM DMA: one byte per M-cycle


@wp.func(inline=False)
def oam_dma(ref: wp.uint64, env: int, v: int, t: int):
    """Copy 160 bytes to OAM; OAM stays unreadable by the CPU for the 160 M-cycles."""
    g = load_gb(ref)
    src = (v & 0xFF) << 8
    if src >= 0xE000:
        src = src - 0x2000  # E000-FFFF sources see the WRAM echo
    flush_pending(g, env)  # lines still to draw see OAM as it was
    if src >= 0xC000:
        # WRAM, where games keep their shadow OAM (C000-DF9F at most), copied without
        # the memory map: on a GPU the other threads of the warp wait for this copy.
        w = WRAM_OFF + (src & 0x1FFF)
        for i in range(DMA_BYTES // 4):
            for j in range(4):
                mset(g, env, OAM_OFF + 4 * i + j, mget(g, env, w + 4 * i + j))
    else:
        for i in range(DMA_BYTES):
            mset(g, env, OAM_OFF + i, bus_peek(g, env, src + i))
    # One set-up M-cycle, then one byte per M-cycle; a restart keeps OAM blocked.
    if not (t >= sget(g, env, T_DMA_START) and t < sget(g, env, T_DMA_END)):
        sset(g, env, T_DMA_START, t + 8)
    sset(g, env, T_DMA_END, t + 8 + DMA_BYTES * 4)


@wp.func
def bus_peek(g: GB, env: int, a: int) -> int:
    """Side-effect-free read used by OAM DMA (ROM, VRAM, cart RAM, WRAM)."""
    v = int(0xFF)
    if a < 0x4000:
        v = int(g.rom[(sget(g, env, S_BANK0) * 0x4000 + a) & g.rom_mask])
    elif a < 0x8000:
        v = int(g.rom[(sget(g, env, S_BANKX) * 0x4000 + (a - 0x4000)) & g.rom_mask])
    elif a < 0xA000:
        v = mget(g, env, VRAM_OFF + (a - 0x8000))
    elif a < 0xC000:
        v = cart_ram_read(g.ref, env, a)
    else:
        v = mget(g, env, WRAM_OFF + (a & 0x1FFF))
    return v


@wp.func
def sync_to(g: GB, env: int, t: int):
    """Bring the timer, PPU and serial port up to cycle t (only those with an event due)."""
    if t >= sget(g, env, T_TIMER_NEXT):
        timer_sync(g.ref, env, t)
    if t >= sget(g, env, T_PPU_NEXT):
        ppu_sync(g.ref, env, t)
    if t >= sget(g, env, T_SERIAL_END):
        serial_sync(g.ref, env, t)


@wp.func
def io_read(g: GB, env: int, i: int, t: int) -> int:
    """IO register read; inlined once, into rd_call. The LY/STAT/IF reads that busy-waiting
    games poll call into the PPU/timer only when one of their events is due."""
    v = int(0xFF)
    if i == P1:
        v = joypad_value(g, env)
    elif i == DIV:
        v = div_at(g, env, t) >> 8
    elif i == TIMA:
        timer_sync(g.ref, env, t)
        v = mget(g, env, IO_OFF + TIMA)
    elif i == IF:
        sync_to(g, env, t)
        v = mget(g, env, IO_OFF + IF) | 0xE0
    elif i == STAT:
        v = stat_read(g.ref, env, t - g.ppu_lag)
    elif i == LY:
        if t - g.ppu_lag >= sget(g, env, T_PPU_NEXT):
            ppu_sync(g.ref, env, t - g.ppu_lag)
        v = mget(g, env, IO_OFF + LY)
        if (sget(g, env, S_PPU_FLAGS) & PPU_FIRST_LINE) != 0:
            if lcdon_line_end(g, env):
                v = v + 1  # the first line after LCD on (ppu_timing.lcdon_line_end)
    elif i == SC:
        serial_sync(g.ref, env, t)
        v = mget(g, env, IO_OFF + SC) | 0x7E
    elif i >= 0x10 and i < 0x40:
        v = apu_read(g.ref, env, i, t)  # sound registers and wave RAM (apu.py)
    else:
        v = mget(g, env, IO_OFF + i) | int(g.io_mask[i])
    return v


@wp.func
def io_write(g: GB, env: int, i: int, v: int, t: int):
    """IO register write; inlined once, into wr_call."""
    if i == P1:
        # Selecting a row with a held button pulls a line low: joypad interrupt.
        before = joypad_value(g, env) & 0x0F
        mset(g, env, IO_OFF + P1, v & 0x30)
        if (before & ~joypad_value(g, env)) != 0:
            raise_if(g, env, 0x10)
    elif i == SC:
        serial_sync(g.ref, env, t)
        mset(g, env, IO_OFF + SC, v)
        if (v & 0x81) == 0x81:
            serial_start(g.ref, env, t)
    elif i == DIV or i == TIMA or i == TMA or i == TAC:
        if i == DIV:
            apu_div_write(g.ref, env, t)  # the frame sequencer is clocked by the divider
        timer_write(g.ref, env, i, v, t)
    elif i == IF:
        sync_to(g, env, t)
        mset(g, env, IO_OFF + IF, v & 0x1F)
    elif i == LCDC:
        lcdc_write(g.ref, env, v, t)
    elif i == STAT or i == LYC:
        ppu_sync(g.ref, env, t)
        if i == STAT:
            stat_write_quirk(g.ref, env)
            mset(g, env, IO_OFF + STAT, v & 0x78)
        else:
            mset(g, env, IO_OFF + LYC, v)
        stat_update(g.ref, env)
    elif i == LY:
        pass  # LY is read-only
    elif i == DMA:
        ppu_sync(g.ref, env, t)
        mset(g, env, IO_OFF + DMA, v)
        oam_dma(g.ref, env, v, t)
    elif i >= 0x10 and i < 0x40:
        apu_write(g.ref, env, i, v, t)  # sound registers and wave RAM (apu.py)
    elif i == BOOT_OFF_REG:
        if mget(g, env, IO_OFF + BOOT_OFF_REG) == 0:
            mset(g, env, IO_OFF + BOOT_OFF_REG, v & 1)
    else:
        if i >= 0x40:
            ppu_sync(g.ref, env, t)  # SCX/SCY/palettes/window: land on the right line
        mset(g, env, IO_OFF + i, v)


# ----------------------------------------------------------------------------- CPU bus
@wp.func
def oam_blocked(g: GB, env: int, t: int, access: int) -> bool:
    """OAM refused to a CPU read or write (``access``) at cycle t: DMA, scan or mode 3."""
    blocked = t >= sget(g, env, T_DMA_START) and t < sget(g, env, T_DMA_END)
    if not blocked:
        blocked = vram_oam_blocked(g, env, t, access)
    return blocked


@wp.func(inline=False)
def rd_call(ref: wp.uint64, env: int, a: int, t: int) -> int:
    """The one out-of-line copy of the complete CPU read (everything but the opcode fetch's
    ROM/WRAM/HRAM fast path comes here).

    The memory map (``rd_mapped``) is inlined at one site only: a read during OAM DMA
    that is not a bus conflict reads what any other read does."""
    g = load_gb(ref)
    v = int(0xFF)
    if dma_conflict(g, env, a, t):
        # The DMA owns this bus: the CPU sees the byte being transferred. Bytes are
        # counted from the latest transfer's start (a restart keeps T_DMA_START, the
        # start of the OAM block, but copies its new source from byte 0 on).
        first = sget(g, env, T_DMA_END) - DMA_BYTES * 4
        i = wp.max(wp.min((t - first) // 4, DMA_BYTES - 1), 0)
        v = mget(g, env, OAM_OFF + i)
    elif a >= 0xFF80:
        v = mget(g, env, HRAM_OFF + (a - 0xFF80))
    elif a >= 0xC000 and a < 0xFE00:
        v = mget(g, env, WRAM_OFF + (a & 0x1FFF))
    else:
        v = rd_mapped(g, env, a, t)
    return v


@wp.func(inline=False)
def oam_read(ref: wp.uint64, env: int, a: int, t: int) -> int:
    """CPU read of FE00-FEFF at cycle t: OAM, or 0xFF where it is blocked or unusable."""
    g = load_gb(ref)
    oam_corrupt(g, env, t, OAM_BUG_READ)  # DMG: during the OAM scan (oam_bug.py)
    v = int(0xFF)
    if a < 0xFEA0 and not oam_blocked(g, env, t, ACCESS_OAM_READ):
        v = mget(g, env, OAM_OFF + (a - 0xFE00))
    return v


@wp.func
def rom_code_byte(g: GB, a: int, bank0: int, bankx: int) -> int:
    """Byte of cartridge ROM at CPU address a (0000-7FFF) with the given banks mapped."""
    bank = wp.where(a < 0x4000, bank0, bankx)
    return int(g.rom[(bank * 0x4000 + (a & 0x3FFF)) & g.rom_mask])


@wp.func
def rd_cpu(g: GB, env: int, a: int, t: int, bank0: int, bankx: int, dma_s: int, dma_e: int) -> int:
    """CPU read of address a at cycle t, inlined into the run loop's three read sites.

    HRAM (and IE) at any cycle, ROM and WRAM outside OAM DMA are read directly, with the
    ROM banks and the DMA window the loop passes in (the CPU variant keeps them in
    registers and reloads them after MBC and IO writes, the CUDA variant loads them from
    the state at every instruction); everything else goes through ``rd_call``."""
    v = int(0xFF)
    if a >= 0xFF80:
        v = mget(g, env, HRAM_OFF + (a - 0xFF80))  # also in OAM DMA: not the DMA's bus
    elif t < dma_e and t >= dma_s:
        v = rd_call(g.ref, env, a, t)
    elif a < 0x4000 and (a >= 0x100 or g.has_boot == 0):
        v = int(g.rom[(bank0 * 0x4000 + a) & g.rom_mask])
    elif a >= 0x4000 and a < 0x8000:
        v = int(g.rom[(bankx * 0x4000 + (a - 0x4000)) & g.rom_mask])
    elif a >= 0xC000 and a < 0xFE00:
        v = mget(g, env, WRAM_OFF + (a & 0x1FFF))
    else:
        v = rd_call(g.ref, env, a, t)
    return v


@wp.func
def wr_cpu(g: GB, env: int, a: int, v: int, t: int) -> int:
    """CPU write of byte v to a at cycle t, inlined into the run loop's one write site:
    WRAM and HRAM directly, the rest through ``wr_call``. Returns 1 when the write may have
    changed what the loop keeps in registers (MBC banks, IO registers incl. the OAM DMA
    start and event times, IE; not the sound registers), 0 otherwise."""
    dirty = int(0)
    if a >= 0xC000 and a < 0xFE00:
        mset(g, env, WRAM_OFF + (a & 0x1FFF), v)
    elif a >= 0xFF80 and a < 0xFFFF:
        mset(g, env, HRAM_OFF + (a - 0xFF80), v)
    else:
        wr_call(g.ref, env, a, v, t)
        # Sound registers and wave RAM (FF10-FF3F) are only stored: a music driver's many
        # writes per frame need not make the loop reload its cached state.
        if a < 0x8000 or (a >= 0xFF00 and (a < 0xFF10 or a >= 0xFF40)):
            dirty = int(1)
    return dirty


@wp.func
def dma_conflict(g: GB, env: int, a: int, t: int) -> bool:
    """A CPU read at cycle t of address a on the bus the running OAM DMA is using (below
    FE00: the external bus or the VRAM bus)."""
    conflict = False
    if t < sget(g, env, T_DMA_END) and t >= sget(g, env, T_DMA_START) and a < 0xFE00:
        conflict = dma_bus(a) == dma_bus(mget(g, env, IO_OFF + DMA) << 8)
    return conflict


@wp.func
def dma_bus(a: int) -> int:
    """0 for the external bus (ROM, cart RAM, WRAM), 1 for the VRAM bus."""
    b = int(0)
    if a >= 0x8000 and a < 0xA000:
        b = 1
    return b


@wp.func
def rd_mapped(g: GB, env: int, a: int, t: int) -> int:
    v = int(0xFF)
    if a < 0x4000:
        if a < 0x100 and g.has_boot != 0 and mget(g, env, IO_OFF + BOOT_OFF_REG) == 0:
            v = int(g.boot[a])
        else:
            v = int(g.rom[(sget(g, env, S_BANK0) * 0x4000 + a) & g.rom_mask])
    elif a < 0x8000:
        v = int(g.rom[(sget(g, env, S_BANKX) * 0x4000 + (a - 0x4000)) & g.rom_mask])
    elif a < 0xA000:
        if not vram_oam_blocked(g, env, t, ACCESS_VRAM):
            v = mget(g, env, VRAM_OFF + (a - 0x8000))
    elif a < 0xC000:
        v = cart_ram_read(g.ref, env, a)
    elif a < 0xFE00:
        v = mget(g, env, WRAM_OFF + (a & 0x1FFF))
    elif a < 0xFF00:
        v = oam_read(g.ref, env, a, t)
    elif a < 0xFF80:
        v = io_read(g, env, a - 0xFF00, t)
    else:
        v = mget(g, env, HRAM_OFF + (a - 0xFF80))
    return v


@wp.func
def wr(g: GB, env: int, a: int, v: int, t: int):
    """CPU write of byte v to address a at cycle t: one out-of-line call."""
    wr_call(g.ref, env, a, v, t)


@wp.func(inline=False)
def wr_call(ref: wp.uint64, env: int, a: int, v: int, t: int):
    """The one out-of-line copy of the complete CPU write."""
    g = load_gb(ref)
    if a >= 0xC000 and a < 0xFE00:
        mset(g, env, WRAM_OFF + (a & 0x1FFF), v)
    elif a >= 0xFF80:
        mset(g, env, HRAM_OFF + (a - 0xFF80), v)
    else:
        wr_slow(g, env, a, v & 0xFF, t)


@wp.func
def wr_slow(g: GB, env: int, a: int, v: int, t: int):
    if (a >= 0x8000 and a < 0xA000) or (a >= 0xFE00 and a < 0xFF00):
        flush_pending(g, env)  # lines still to draw see VRAM and OAM as they were
    if a < 0x8000:
        rom_write(g.ref, env, a, v, t)
    elif a < 0xA000:
        if not vram_oam_blocked(g, env, t, ACCESS_VRAM):
            mset(g, env, VRAM_OFF + (a - 0x8000), v)
    elif a < 0xC000:
        cart_ram_write(g.ref, env, a, v, t)
    elif a < 0xFE00:
        mset(g, env, WRAM_OFF + (a & 0x1FFF), v)
    elif a < 0xFF00:
        oam_corrupt(g, env, t, OAM_BUG_WRITE)  # DMG: during the OAM scan (oam_bug.py)
        # FEA0-FEFF (unusable) ignores writes.
        if a < 0xFEA0 and not oam_blocked(g, env, t, ACCESS_OAM_WRITE):
            mset(g, env, OAM_OFF + (a - 0xFE00), v)
    elif a < 0xFF80:
        io_write(g, env, a - 0xFF00, v, t)
    else:
        mset(g, env, HRAM_OFF + (a - 0xFF80), v)
