"""The DMG memory map as seen by the CPU: ROM/MBC banking, VRAM, cart RAM, WRAM, OAM, IO, HRAM.

Every access takes the cycle ``t`` at which it happens so timer and PPU state are caught up
to that exact M-cycle first (see timer.py, ppu_timing.py).
"""

from __future__ import annotations

from gbx_gameboy.kstate import GB, load_gb, load_mem, load_st
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
    NR52,
    OAM_OFF,
    P1,
    S_BANK0,
    S_BANKX,
    S_BUTTONS,
    S_MBC_MODE,
    S_MBC_R1,
    S_MBC_R2,
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
from gbx_gameboy.ppu_timing import (
    lcdc_write,
    ppu_sync,
    stat_read,
    stat_update,
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
    r1 = g.st[S_MBC_R1, env]
    r2 = g.st[S_MBC_R2, env]
    mode = g.st[S_MBC_MODE, env]
    ramg = g.st[S_RAMG, env]
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
    g.st[S_BANK0, env] = bank0
    g.st[S_BANKX, env] = bankx
    g.st[S_RAMOFF, env] = ramoff


@wp.func(inline=False)
def rtc_latch(ref: wp.uint64, env: int, t: int):
    """MBC3 RTC: latch the time derived from emulated cycles (deterministic, no wall clock)."""
    g = load_gb(ref)
    now = g.tm[TM_CLOCK, env] + wp.int64(t)
    secs = (now + g.tm[TM_RTC_OFF, env]) // wp.int64(4194304)
    s = int(secs % wp.int64(60))
    m = int((secs // wp.int64(60)) % wp.int64(60))
    h = int((secs // wp.int64(3600)) % wp.int64(24))
    days = int((secs // wp.int64(86400)) % wp.int64(512))
    g.st[S_RTC_S, env] = s
    g.st[S_RTC_M, env] = m
    g.st[S_RTC_H, env] = h
    g.st[S_RTC_DL, env] = days & 0xFF
    g.st[S_RTC_DH, env] = (days >> 8) & 1


@wp.func(inline=False)
def rom_write(ref: wp.uint64, env: int, a: int, v: int, t: int):
    """Writes to 0000-7FFF program the memory bank controller."""
    g = load_gb(ref)
    if g.mbc == MBC_1:
        if a < 0x2000:
            g.st[S_RAMG, env] = v
        elif a < 0x4000:
            r1 = v & 0x1F
            if r1 == 0:
                r1 = int(1)
            g.st[S_MBC_R1, env] = r1
        elif a < 0x6000:
            g.st[S_MBC_R2, env] = v & 3
        else:
            g.st[S_MBC_MODE, env] = v & 1
    elif g.mbc == MBC_2:
        if a < 0x4000:
            if (a & 0x100) != 0:
                r1 = v & 0x0F
                if r1 == 0:
                    r1 = int(1)
                g.st[S_MBC_R1, env] = r1
            else:
                g.st[S_RAMG, env] = v
    elif g.mbc == MBC_3:
        if a < 0x2000:
            g.st[S_RAMG, env] = v
        elif a < 0x4000:
            r1 = v & 0x7F
            if r1 == 0:
                r1 = int(1)
            g.st[S_MBC_R1, env] = r1
        elif a < 0x6000:
            g.st[S_MBC_R2, env] = v & 0x0F
            if v >= 0x08 and v <= 0x0C:
                g.st[S_RTC_SEL, env] = v
            else:
                g.st[S_RTC_SEL, env] = 0
        else:
            if g.st[S_RTC_LATCH, env] == 0 and v == 1:
                rtc_latch(g.ref, env, t)
            g.st[S_RTC_LATCH, env] = v
    elif g.mbc == MBC_5:
        if a < 0x2000:
            g.st[S_RAMG, env] = v
        elif a < 0x3000:
            g.st[S_MBC_R1, env] = (g.st[S_MBC_R1, env] & 0x100) | v
        elif a < 0x4000:
            g.st[S_MBC_R1, env] = (g.st[S_MBC_R1, env] & 0xFF) | ((v & 1) << 8)
        elif a < 0x6000:
            g.st[S_MBC_R2, env] = v & 0x0F
    mbc_update_banks(g, env)


@wp.func(inline=False)
def rtc_read(ref: wp.uint64, env: int, sel: int) -> int:
    g = load_gb(ref)
    v = int(0xFF)
    if sel == 0x08:
        v = g.st[S_RTC_S, env]
    elif sel == 0x09:
        v = g.st[S_RTC_M, env]
    elif sel == 0x0A:
        v = g.st[S_RTC_H, env]
    elif sel == 0x0B:
        v = g.st[S_RTC_DL, env]
    elif sel == 0x0C:
        v = g.st[S_RTC_DH, env]
    return v


@wp.func(inline=False)
def rtc_write(ref: wp.uint64, env: int, sel: int, v: int, t: int):
    """Set one RTC field: shift the cycle-driven clock so the running time has that value."""
    g = load_gb(ref)
    now = g.tm[TM_CLOCK, env] + wp.int64(t)
    secs = (now + g.tm[TM_RTC_OFF, env]) // wp.int64(4194304)
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
    g.tm[TM_RTC_OFF, env] = total * wp.int64(4194304) - now
    rtc_latch(g.ref, env, t)


@wp.func(inline=False)
def cart_ram_read(ref: wp.uint64, env: int, a: int) -> int:
    g = load_gb(ref)
    v = int(0xFF)
    off = g.st[S_RAMOFF, env]
    if g.mbc == MBC_3 and g.st[S_RTC_SEL, env] != 0:
        if (g.st[S_RAMG, env] & 0x0F) == 0x0A:
            v = rtc_read(g.ref, env, g.st[S_RTC_SEL, env])
    elif off >= 0:
        if g.mbc == MBC_2:
            v = 0xF0 | int(g.cram[a & 0x1FF, env])
        else:
            v = int(g.cram[(off + (a - 0xA000)) & g.cram_mask, env])
    return v


@wp.func(inline=False)
def cart_ram_write(ref: wp.uint64, env: int, a: int, v: int, t: int):
    g = load_gb(ref)
    off = g.st[S_RAMOFF, env]
    if g.mbc == MBC_3 and g.st[S_RTC_SEL, env] != 0:
        if (g.st[S_RAMG, env] & 0x0F) == 0x0A:
            rtc_write(g.ref, env, g.st[S_RTC_SEL, env], v, t)
    elif off >= 0:
        if g.mbc == MBC_2:
            g.cram[a & 0x1FF, env] = wp.uint8(v & 0x0F)
        else:
            g.cram[(off + (a - 0xA000)) & g.cram_mask, env] = wp.uint8(v)


# ----------------------------------------------------------------------------- IO
@wp.func
def joypad_value(g: GB, env: int) -> int:
    sel = int(g.mem[IO_OFF + P1, env]) & 0x30
    btn = g.st[S_BUTTONS, env]
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
    g.st[S_BUTTONS, env] = buttons & 0xFF
    after = joypad_value(g, env) & 0x0F
    if (before & ~after) != 0:
        raise_if(g, env, 0x10)


@wp.func(inline=False)
def serial_sync(ref: wp.uint64, env: int, t: int):
    g = load_gb(ref)
    if g.st[T_SERIAL_END, env] <= t:
        g.mem[IO_OFF + SB, env] = wp.uint8(0xFF)  # nothing connected: all ones shifted in
        g.mem[IO_OFF + SC, env] = wp.uint8(int(g.mem[IO_OFF + SC, env]) & 0x7F)
        raise_if(g, env, 8)
        g.st[T_SERIAL_END, env] = NEVER


@wp.func(inline=False)
def serial_start(ref: wp.uint64, env: int, t: int):
    """SC written with bit 7 and bit 0: capture SB and schedule the end of the transfer."""
    g = load_gb(ref)
    n = g.st[S_SER_LEN, env]
    g.ser[n % g.ser_cap, env] = g.mem[IO_OFF + SB, env]
    g.st[S_SER_LEN, env] = n + 1
    # 8 bits clocked at 8192 Hz by the divider; the serial clock edge sits 4 cycles after
    # divider bit 8 falls (matches the DMG boot alignment).
    d = div_at(g, env, t) + SERIAL_PHASE
    g.st[T_SERIAL_END, env] = t + (SERIAL_BIT_CYCLES - d % SERIAL_BIT_CYCLES) + 7 * 512


@wp.func(inline=False)
def oam_dma(ref: wp.uint64, env: int, v: int, t: int):
    """Copy 160 bytes to OAM; OAM stays unreadable by the CPU for the 160 M-cycles."""
    g = load_gb(ref)
    src = (v & 0xFF) << 8
    if src >= 0xE000:
        src = src - 0x2000  # E000-FFFF sources see the WRAM echo
    for i in range(160):
        g.mem[OAM_OFF + i, env] = wp.uint8(bus_peek(g, env, src + i))
    # One set-up M-cycle, then one byte per M-cycle; a restart keeps OAM blocked.
    if not (t >= g.st[T_DMA_START, env] and t < g.st[T_DMA_END, env]):
        g.st[T_DMA_START, env] = t + 8
    g.st[T_DMA_END, env] = t + 8 + 640


@wp.func
def bus_peek(g: GB, env: int, a: int) -> int:
    """Side-effect-free read used by OAM DMA (ROM, VRAM, cart RAM, WRAM)."""
    v = int(0xFF)
    if a < 0x4000:
        v = int(g.rom[(g.st[S_BANK0, env] * 0x4000 + a) & g.rom_mask])
    elif a < 0x8000:
        v = int(g.rom[(g.st[S_BANKX, env] * 0x4000 + (a - 0x4000)) & g.rom_mask])
    elif a < 0xA000:
        v = int(g.mem[VRAM_OFF + (a - 0x8000), env])
    elif a < 0xC000:
        v = cart_ram_read(g.ref, env, a)
    else:
        v = int(g.mem[WRAM_OFF + (a & 0x1FFF), env])
    return v


@wp.func
def sync_to(g: GB, env: int, t: int):
    """Bring the timer, PPU and serial port up to cycle t (only those with an event due)."""
    if t >= g.st[T_TIMER_NEXT, env]:
        timer_sync(g.ref, env, t)
    if t >= g.st[T_PPU_NEXT, env]:
        ppu_sync(g.ref, env, t)
    if t >= g.st[T_SERIAL_END, env]:
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
        v = int(g.mem[IO_OFF + TIMA, env])
    elif i == IF:
        sync_to(g, env, t)
        v = int(g.mem[IO_OFF + IF, env]) | 0xE0
    elif i == STAT:
        v = stat_read(g.ref, env, t - g.ppu_lag)
    elif i == LY:
        if t - g.ppu_lag >= g.st[T_PPU_NEXT, env]:
            ppu_sync(g.ref, env, t - g.ppu_lag)
        v = int(g.mem[IO_OFF + LY, env])
    elif i == SC:
        serial_sync(g.ref, env, t)
        v = int(g.mem[IO_OFF + SC, env]) | 0x7E
    else:
        v = int(g.mem[IO_OFF + i, env]) | int(g.io_mask[i])
    return v


@wp.func
def io_write(g: GB, env: int, i: int, v: int, t: int):
    """IO register write; inlined once, into wr_call."""
    if i == P1:
        # Selecting a row with a held button pulls a line low: joypad interrupt.
        before = joypad_value(g, env) & 0x0F
        g.mem[IO_OFF + P1, env] = wp.uint8(v & 0x30)
        if (before & ~joypad_value(g, env)) != 0:
            raise_if(g, env, 0x10)
    elif i == SC:
        serial_sync(g.ref, env, t)
        g.mem[IO_OFF + SC, env] = wp.uint8(v)
        if (v & 0x81) == 0x81:
            serial_start(g.ref, env, t)
    elif i == DIV or i == TIMA or i == TMA or i == TAC:
        timer_write(g.ref, env, i, v, t)
    elif i == IF:
        sync_to(g, env, t)
        g.mem[IO_OFF + IF, env] = wp.uint8(v & 0x1F)
    elif i == LCDC:
        lcdc_write(g.ref, env, v, t)
    elif i == STAT or i == LYC:
        ppu_sync(g.ref, env, t)
        if i == STAT:
            g.mem[IO_OFF + STAT, env] = wp.uint8(v & 0x78)
        else:
            g.mem[IO_OFF + LYC, env] = wp.uint8(v)
        stat_update(g.ref, env)
    elif i == LY:
        pass  # LY is read-only
    elif i == DMA:
        ppu_sync(g.ref, env, t)
        g.mem[IO_OFF + DMA, env] = wp.uint8(v)
        oam_dma(g.ref, env, v, t)
    elif i == NR52:
        g.mem[IO_OFF + NR52, env] = wp.uint8((v & 0x80) | (int(g.mem[IO_OFF + NR52, env]) & 0x0F))
    elif i == BOOT_OFF_REG:
        if int(g.mem[IO_OFF + BOOT_OFF_REG, env]) == 0:
            g.mem[IO_OFF + BOOT_OFF_REG, env] = wp.uint8(v & 1)
    else:
        if i >= 0x40:
            ppu_sync(g.ref, env, t)  # SCX/SCY/palettes/window: land on the right line
        g.mem[IO_OFF + i, env] = wp.uint8(v)


# ----------------------------------------------------------------------------- CPU bus
@wp.func
def oam_blocked(g: GB, env: int, t: int) -> bool:
    blocked = t >= g.st[T_DMA_START, env] and t < g.st[T_DMA_END, env]
    if not blocked:
        blocked = vram_oam_blocked(g, env, t, True)
    return blocked


@wp.func(inline=False)
def rd_call(ref: wp.uint64, env: int, a: int, t: int) -> int:
    """The one out-of-line copy of the complete CPU read (everything but the opcode fetch's
    ROM/WRAM/HRAM fast path comes here). HRAM/WRAM reads load only the two arrays they
    need; the whole struct is loaded on the other branches."""
    st = load_st(ref)
    mem = load_mem(ref)
    v = int(0xFF)
    if t >= st[T_DMA_END, env] or t < st[T_DMA_START, env]:
        if a >= 0xFF80:
            v = int(mem[HRAM_OFF + (a - 0xFF80), env])
        elif a >= 0xC000 and a < 0xFE00:
            v = int(mem[WRAM_OFF + (a & 0x1FFF), env])
        else:
            v = rd_mapped(load_gb(ref), env, a, t)
    else:
        v = rd_slow(load_gb(ref), env, a, t)
    return v


@wp.func
def rd_cpu(g: GB, env: int, a: int, t: int, bank0: int, bankx: int, dma_s: int, dma_e: int) -> int:
    """CPU read of address a at cycle t, inlined into the run loop's three read sites.

    ROM, WRAM and HRAM outside OAM DMA are read directly, with the ROM banks and the DMA
    window taken from the loop's registers (they change only on MBC and IO writes, after
    which the loop reloads them); everything else goes through ``rd_call``."""
    v = int(0xFF)
    if t < dma_e and t >= dma_s:
        v = rd_call(g.ref, env, a, t)
    elif a < 0x4000 and (a >= 0x100 or g.has_boot == 0):
        v = int(g.rom[(bank0 * 0x4000 + a) & g.rom_mask])
    elif a >= 0x4000 and a < 0x8000:
        v = int(g.rom[(bankx * 0x4000 + (a - 0x4000)) & g.rom_mask])
    elif a >= 0xC000 and a < 0xFE00:
        v = int(g.mem[WRAM_OFF + (a & 0x1FFF), env])
    elif a >= 0xFF80:
        v = int(g.mem[HRAM_OFF + (a - 0xFF80), env])
    else:
        v = rd_call(g.ref, env, a, t)
    return v


@wp.func
def wr_cpu(g: GB, env: int, a: int, v: int, t: int) -> int:
    """CPU write of byte v to a at cycle t, inlined into the run loop's one write site:
    WRAM and HRAM directly, the rest through ``wr_call``. Returns 1 when the write may have
    changed what the loop keeps in registers (MBC banks, IO registers incl. the OAM DMA
    start and event times, IE), 0 otherwise."""
    dirty = int(0)
    if a >= 0xC000 and a < 0xFE00:
        g.mem[WRAM_OFF + (a & 0x1FFF), env] = wp.uint8(v)
    elif a >= 0xFF80 and a < 0xFFFF:
        g.mem[HRAM_OFF + (a - 0xFF80), env] = wp.uint8(v)
    else:
        wr_call(g.ref, env, a, v, t)
        if a < 0x8000 or a >= 0xFF00:
            dirty = int(1)
    return dirty


@wp.func
def rd_slow(g: GB, env: int, a: int, t: int) -> int:
    """Read during OAM DMA (bus conflicts), else the plain memory map."""
    v = int(0xFF)
    if t < g.st[T_DMA_END, env] and t >= g.st[T_DMA_START, env] and a < 0xFE00:
        if dma_bus(a) == dma_bus(int(g.mem[IO_OFF + DMA, env]) << 8):
            # The DMA owns this bus: the CPU sees the byte being transferred.
            i = wp.min((t - g.st[T_DMA_START, env]) // 4, 159)
            v = int(g.mem[OAM_OFF + i, env])
        else:
            v = rd_mapped(g, env, a, t)
    else:
        v = rd_mapped(g, env, a, t)
    return v


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
        if a < 0x100 and g.has_boot != 0 and int(g.mem[IO_OFF + BOOT_OFF_REG, env]) == 0:
            v = int(g.boot[a])
        else:
            v = int(g.rom[(g.st[S_BANK0, env] * 0x4000 + a) & g.rom_mask])
    elif a < 0x8000:
        v = int(g.rom[(g.st[S_BANKX, env] * 0x4000 + (a - 0x4000)) & g.rom_mask])
    elif a < 0xA000:
        if not vram_oam_blocked(g, env, t, False):
            v = int(g.mem[VRAM_OFF + (a - 0x8000), env])
    elif a < 0xC000:
        v = cart_ram_read(g.ref, env, a)
    elif a < 0xFE00:
        v = int(g.mem[WRAM_OFF + (a & 0x1FFF), env])
    elif a < 0xFEA0:
        if not oam_blocked(g, env, t):
            v = int(g.mem[OAM_OFF + (a - 0xFE00), env])
    elif a < 0xFF00:
        v = int(0xFF)
    elif a < 0xFF80:
        v = io_read(g, env, a - 0xFF00, t)
    else:
        v = int(g.mem[HRAM_OFF + (a - 0xFF80), env])
    return v


@wp.func
def wr(g: GB, env: int, a: int, v: int, t: int):
    """CPU write of byte v to address a at cycle t: one out-of-line call."""
    wr_call(g.ref, env, a, v, t)


@wp.func(inline=False)
def wr_call(ref: wp.uint64, env: int, a: int, v: int, t: int):
    """The one out-of-line copy of the complete CPU write (WRAM/HRAM first, which load
    only ``mem``; the whole struct is loaded for the rest)."""
    if a >= 0xC000 and a < 0xFE00:
        mem = load_mem(ref)
        mem[WRAM_OFF + (a & 0x1FFF), env] = wp.uint8(v & 0xFF)
    elif a >= 0xFF80:
        mem = load_mem(ref)
        mem[HRAM_OFF + (a - 0xFF80), env] = wp.uint8(v & 0xFF)
    else:
        wr_slow(load_gb(ref), env, a, v & 0xFF, t)


@wp.func
def wr_slow(g: GB, env: int, a: int, v: int, t: int):
    if a < 0x8000:
        rom_write(g.ref, env, a, v, t)
    elif a < 0xA000:
        if not vram_oam_blocked(g, env, t, False):
            g.mem[VRAM_OFF + (a - 0x8000), env] = wp.uint8(v)
    elif a < 0xC000:
        cart_ram_write(g.ref, env, a, v, t)
    elif a < 0xFE00:
        g.mem[WRAM_OFF + (a & 0x1FFF), env] = wp.uint8(v)
    elif a < 0xFEA0:
        if not oam_blocked(g, env, t):
            g.mem[OAM_OFF + (a - 0xFE00), env] = wp.uint8(v)
    elif a < 0xFF00:
        pass  # the unusable area ignores writes
    elif a < 0xFF80:
        io_write(g, env, a - 0xFF00, v, t)
    else:
        g.mem[HRAM_OFF + (a - 0xFF80), env] = wp.uint8(v)
