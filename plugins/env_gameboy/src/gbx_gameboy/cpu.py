"""The SM83 CPU and the run kernel: one thread steps one Game Boy for a whole window.

Opcodes are decoded by their bit fields (x = op>>6, y = op>>3 & 7, z = op & 7) so that the
eight register operands, the eight ALU operations and the eight rotate/shift operations
share one code path each instead of one body per opcode; that keeps the kernel small and
its compile time short. Registers live in a local vector for the whole launch. ``t`` is
the cycle counter of the launch (T-cycles, relative to the launch start); every memory
access happens at the cycle of its M-cycle, so timer and PPU reads are M-cycle exact.
"""

from __future__ import annotations

import os

from gbx_gameboy.kstate import GB, mget, mset, sget, sset, tget, tset
from gbx_gameboy.layout import (
    HRAM_OFF,
    IE_HRAM_INDEX,
    IF,
    IO_OFF,
    LY,
    NEVER,
    R_A,
    R_C,
    R_F,
    R_PC,
    R_SP,
    S_BANK0,
    S_BANKX,
    S_DIV_OFF,
    S_EI_DELAY,
    S_HALT_BUG,
    S_HALTED,
    S_IME,
    S_LFRAMES,
    S_LOCKED,
    T_DMA_END,
    T_DMA_START,
    T_LINE_AT,
    T_PPU_NEXT,
    T_RELOAD,
    T_SERIAL_END,
    T_TIMER_NEXT,
    T_TSYNC,
    TM_CLOCK,
    TM_INSTRS,
)
from gbx_gameboy.memory import rd_cpu, serial_sync, set_buttons, wr, wr_cpu
from gbx_gameboy.phase_clock import (
    CLOCK_ROWS,
    PHASE_CLOCKS,
    ROW_CATCH_UPS,
    ROW_FETCHES,
    ROW_LANES,
    cycle_clock,
    live_lanes,
)
from gbx_gameboy.ppu_timing import SEEN_MARGIN, ppu_advance, ppu_cpu_event
from gbx_gameboy.timer import timer_sync
from gbx_gameboy.warp_setup import wp

# Threads per block of this module's launches: one warp. Each thread is a whole Game Boy
# that runs for a whole launch and the kernel's register use allows only a few warps per
# SM, so the launch must spread over many small blocks to reach every SM: with Warp's
# default of 256, 16,384 envs made 64 blocks and left half of a 132-SM GPU idle (1,024
# envs used 4 SMs). One-warp blocks also let the SMs balance warps that finish their
# frames at different times. A module option, so every launch and load uses one variant.
RUN_BLOCK_DIM = 32
wp.set_module_options({"enable_backward": False, "block_dim": RUN_BLOCK_DIM})

vec8i = wp.types.vector(length=8, dtype=wp.int32)
vec9l = wp.types.vector(length=9, dtype=wp.int64)

FZ = 0x80
FN = 0x40
FH = 0x20
FC = 0x10
RUN_CYCLES = 0
PAST_LIMIT = 1 << 29
LAUNCH_TIME_LIMIT = 0x30000000  # below NEVER, above MAX_FRAMES_PER_LAUNCH frames
RUN_FRAMES = 1
STALE = -(1 << 30)  # a next-event time that is always due: reload the cached state


@wp.func
def alu8(op: int, a: int, v: int, f: int) -> int:
    """ADD ADC SUB SBC AND XOR OR CP of A and v; returns (result << 8) | flags."""
    c = (f >> 4) & 1
    res = int(0)
    nf = int(0)
    if op < 2:
        ci = int(0)
        if op == 1:
            ci = c
        s = a + v + ci
        res = s & 0xFF
        if (a & 0xF) + (v & 0xF) + ci > 0xF:
            nf = nf | FH
        if s > 0xFF:
            nf = nf | FC
    elif op == 2 or op == 3 or op == 7:
        ci = int(0)
        if op == 3:
            ci = c
        s = a - v - ci
        res = s & 0xFF
        nf = int(FN)
        if (a & 0xF) - (v & 0xF) - ci < 0:
            nf = nf | FH
        if s < 0:
            nf = nf | FC
    elif op == 4:
        res = a & v
        nf = int(FH)
    elif op == 5:
        res = a ^ v
    else:
        res = a | v
    if res == 0:
        nf = nf | FZ
    if op == 7:
        res = a
    return (res << 8) | nf


@wp.func
def rot8(op: int, v: int, f: int) -> int:
    """RLC RRC RL RR SLA SRA SWAP SRL of v; returns (result << 8) | flags."""
    c = (f >> 4) & 1
    res = int(0)
    co = int(0)
    if op == 0:
        co = v >> 7
        res = ((v << 1) | co) & 0xFF
    elif op == 1:
        co = v & 1
        res = (v >> 1) | (co << 7)
    elif op == 2:
        co = v >> 7
        res = ((v << 1) | c) & 0xFF
    elif op == 3:
        co = v & 1
        res = (v >> 1) | (c << 7)
    elif op == 4:
        co = v >> 7
        res = (v << 1) & 0xFF
    elif op == 5:
        co = v & 1
        res = (v >> 1) | (v & 0x80)
    elif op == 6:
        res = ((v & 0xF) << 4) | (v >> 4)
    else:
        co = v & 1
        res = v >> 1
    nf = co << 4
    if res == 0:
        nf = nf | FZ
    return (res << 8) | nf


@wp.func
def cb_op(x: int, y: int, v: int, f: int) -> int:
    """CB-prefixed operation x (rot/BIT/RES/SET) with field y on v."""
    out = int(0)
    if x == 0:
        out = rot8(y, v, f)
    elif x == 1:
        nf = (f & FC) | FH
        if ((v >> y) & 1) == 0:
            nf = nf | FZ
        out = (v << 8) | nf
    elif x == 2:
        out = ((v & ~(1 << y)) << 8) | f
    else:
        out = ((v | (1 << y)) << 8) | f
    return out


@wp.func
def daa(a: int, f: int) -> int:
    c = f & FC
    if (f & FN) == 0:
        if c != 0 or a > 0x99:
            a = a + 0x60
            c = int(FC)
        if (f & FH) != 0 or (a & 0x0F) > 0x09:
            a = a + 0x06
    else:
        if c != 0:
            a = a - 0x60
        if (f & FH) != 0:
            a = a - 0x06
    a = a & 0xFF
    nf = (f & FN) | c
    if a == 0:
        nf = nf | FZ
    return (a << 8) | nf


@wp.func
def cond(y: int, f: int) -> bool:
    """Condition cc of JR/JP/CALL/RET: NZ, Z, NC, C."""
    k = y & 3
    r = False
    if k == 0:
        r = (f & FZ) == 0
    elif k == 1:
        r = (f & FZ) != 0
    elif k == 2:
        r = (f & FC) == 0
    else:
        r = (f & FC) != 0
    return r


@wp.func
def rget(r: vec8i, i: int) -> int:
    """r[i] by selects: a vector indexed by a run-time value lives in local memory (slow on
    a GPU), one indexed by constants stays in registers."""
    v = r[7]
    v = wp.where(i == 0, r[0], v)
    v = wp.where(i == 1, r[1], v)
    v = wp.where(i == 2, r[2], v)
    v = wp.where(i == 3, r[3], v)
    v = wp.where(i == 4, r[4], v)
    v = wp.where(i == 5, r[5], v)
    v = wp.where(i == 6, r[6], v)
    return v


@wp.func
def rset(r: vec8i, i: int, v: int) -> vec8i:
    """r with r[i] = v, by selects (see rget)."""
    return vec8i(
        wp.where(i == 0, v, r[0]),
        wp.where(i == 1, v, r[1]),
        wp.where(i == 2, v, r[2]),
        wp.where(i == 3, v, r[3]),
        wp.where(i == 4, v, r[4]),
        wp.where(i == 5, v, r[5]),
        wp.where(i == 6, v, r[6]),
        wp.where(i == 7, v, r[7]),
    )


@wp.func
def pair(r: vec8i, i: int) -> int:
    return (rget(r, i) << 8) | rget(r, i + 1)


@wp.func
def set_pair(r: vec8i, i: int, v: int) -> vec8i:
    return rset(rset(r, i, (v >> 8) & 0xFF), i + 1, v & 0xFF)


@wp.func
def sext8(v: int) -> int:
    return v - ((v & 0x80) << 1)


@wp.func
def add_sp_flags(sp: int, e: int) -> int:
    """Flags of ADD SP,e / LD HL,SP+e: H and C from the low byte, Z=N=0."""
    nf = int(0)
    if (sp & 0xF) + (e & 0xF) > 0xF:
        nf = nf | FH
    if (sp & 0xFF) + (e & 0xFF) > 0xFF:
        nf = nf | FC
    return nf


@wp.func
def imm_len(x: int, y: int, z: int) -> int:
    """Immediate operand bytes (n, e or nn) of the opcode with fields x, y, z.

    Every SM83 instruction reads its immediates in the M-cycles right after the opcode
    fetch, so the run loop reads them in one place (one inlined memory access instead of
    one per instruction kind). STOP's padding byte is skipped, not read."""
    n = int(0)
    if x == 0:
        if z == 0:
            if y == 1:
                n = int(2)  # LD (nn),SP
            elif y >= 3:
                n = int(1)  # JR
        elif z == 1:
            if (y & 1) == 0:
                n = int(2)  # LD rp,nn
        elif z == 6:
            n = int(1)  # LD r,n
    elif x == 3:
        if z == 0:
            if y >= 4:
                n = int(1)  # LDH (n),A / ADD SP,e / LDH A,(n) / LD HL,SP+e
        elif z == 2:
            if y < 4 or y == 5 or y == 7:
                n = int(2)  # JP cc,nn / LD (nn),A / LD A,(nn)
        elif z == 3:
            if y == 0:
                n = int(2)  # JP nn
            elif y == 1:
                n = int(1)  # CB prefix
        elif z == 4:
            if y < 4:
                n = int(2)  # CALL cc,nn
        elif z == 5:
            if y == 1:
                n = int(2)  # CALL nn
        elif z == 6:
            n = int(1)  # ALU A,n
    return n


@wp.func
def pending_irq(g: GB, env: int) -> int:
    return (
        mget(g, env, IO_OFF + IF) & mget(g, env, HRAM_OFF + IE_HRAM_INDEX) & 0x1F
    )


@wp.func
def catch_up(g: GB, env: int, t: int, halted: int, limit: int):
    """Bring scheduled events (timer, serial, PPU) up to cycle t.

    A halted CPU with nothing pending stays asleep (and blind to the PPU) until the next
    timer or serial event or the end of the launch (``limit``); the PPU may use that.
    """
    if t >= sget(g, env, T_TIMER_NEXT):
        timer_sync(g.ref, env, t)
    if t >= sget(g, env, T_SERIAL_END):
        serial_sync(g.ref, env, t)
    if t >= sget(g, env, T_PPU_NEXT):
        # The CPU has not looked at the PPU since the last sync (every look syncs).
        unobserved = t - SEEN_MARGIN
        if halted != 0 and pending_irq(g, env) == 0:
            nxt = wp.min(sget(g, env, T_TIMER_NEXT), sget(g, env, T_SERIAL_END))
            unobserved = wp.min(nxt, limit)
        ppu_advance(g.ref, env, t, unobserved)


@wp.func
def rebase(g: GB, env: int, k: int, t: int):
    """Shift a launch-relative time by the launch length; past times saturate at -PAST_LIMIT
    so that long-unused ones (e.g. the last DMA) can never wrap around."""
    v = sget(g, env, k)
    if v < NEVER:
        sset(g, env, k, wp.max(v - t, -PAST_LIMIT))


@wp.kernel
def store_gb(dst: wp.array(dtype=GB), g: GB):
    """Refresh the device copy of the batch struct that ``g.ref`` points at (one thread).

    Launched before every run_kernel launch (it is in the same module, so no extra
    compile); stream order makes the copy current for the launch that follows."""
    dst[0] = g


# Optional register cap for the run kernel (CUDA ``__maxnreg__``), a tuning knob for very
# large batches where registers, not the env count, limit the warps per SM; unset leaves
# the choice to the compiler.
_MAX_REGS = os.environ.get("GBX_GAMEBOY_CUDA_MAX_REGISTERS", "")


@wp.kernel(cuda_max_registers=int(_MAX_REGS) if _MAX_REGS else None)
def run_kernel(
    g: GB,
    mode: int,
    amount: int,
    buttons: wp.array(dtype=wp.int32),
    use_buttons: int,
    release_after: int,
):
    """Run each env for ``amount`` cycles (mode 0) or frames (mode 1).

    One iteration of the loop is one instruction in four phases: fetch (opcode and
    immediates), reads, register work, writes. Memory is touched only in the fetch, read
    and write phases, each a single inlined site: the 32 Game Boys of a warp run different
    instructions, and an access written once per instruction kind would be executed once
    per kind present in the warp; here every thread that reads does so in the same pass.

    What the loop needs at every instruction and that changes rarely stays in registers:
    the next event time (timer, serial, PPU, launch end), the pending interrupts, the ROM
    banks and the OAM DMA window. They are reloaded after the event catch-up and after any
    write that may change them (MBC, IO, IE, interrupt dispatch); reads cannot make an
    event earlier, and any catch-up they trigger happens only once an event is due, which
    the next iteration's catch-up sees too.
    """
    env = wp.tid()
    if sget(g, env, S_LOCKED) != 0:
        return
    r = vec8i()
    for i in range(8):
        r[i] = sget(g, env, i)
    sp = sget(g, env, R_SP)
    pc = sget(g, env, R_PC)
    ime = sget(g, env, S_IME)
    halted = sget(g, env, S_HALTED)
    ei_delay = sget(g, env, S_EI_DELAY)
    halt_bug = sget(g, env, S_HALT_BUG)
    locked = int(0)
    icount = int(0)
    t = int(0)
    sset(g, env, S_LFRAMES, 0)
    # step_frames: the buttons are held for min(release_after, frames) frames and always
    # released by the end of the launch, so every step starts from a released joypad.
    held = int(0)
    if use_buttons != 0:
        if release_after > 0:
            set_buttons(g.ref, env, buttons[env])
            held = int(1)
        else:
            set_buttons(g.ref, env, 0)

    limit = int(LAUNCH_TIME_LIMIT)
    if wp.static(PHASE_CLOCKS):
        clk = vec9l()  # cycles per phase, then live lanes, fetches, catch-ups
        c0 = cycle_clock()
        c1 = c0
    if mode == RUN_CYCLES:
        limit = amount
    # Cached state (see above); next_ev = STALE forces a reload at the next instruction.
    next_ev = int(STALE)
    irq = int(0)
    bank0 = int(0)
    bankx = int(0)
    dma_s = int(0)
    dma_e = int(0)
    while True:
        if wp.static(PHASE_CLOCKS):
            c0 = cycle_clock()
        if t >= next_ev:
            if wp.static(PHASE_CLOCKS):
                clk[ROW_CATCH_UPS] += wp.int64(1)
            catch_up(g, env, t, halted, limit)
            lframes = sget(g, env, S_LFRAMES)
            if held != 0 and lframes >= release_after:
                set_buttons(g.ref, env, 0)
                held = int(0)
            if mode == RUN_FRAMES:
                # The time bound only matters for a game that keeps restarting the LCD so
                # that no frame ever completes: the launch clock must stay below NEVER.
                if lframes >= amount or t >= LAUNCH_TIME_LIMIT:
                    break
            elif t >= amount:
                break
            next_ev = wp.min(
                wp.min(ppu_cpu_event(g, env), sget(g, env, T_TIMER_NEXT)),
                wp.min(sget(g, env, T_SERIAL_END), limit),
            )
            irq = pending_irq(g, env)
            bank0 = sget(g, env, S_BANK0)
            bankx = sget(g, env, S_BANKX)
            dma_s = sget(g, env, T_DMA_START)
            dma_e = sget(g, env, T_DMA_END)
        if wp.static(PHASE_CLOCKS):
            c1 = cycle_clock()
            clk[0] += c1 - c0
        irq_now = irq
        if halted != 0:
            wake = irq != 0
            if halted == 2:
                wake = (mget(g, env, IO_OFF + IF) & 0x10) != 0
            if wake:
                halted = int(0)
                t += 4
            else:
                # Jump straight to the next event instead of ticking 4 cycles at a time.
                dt = next_ev - t
                if dt < 4:
                    dt = int(4)
                t += (dt + 3) & ~3
                if wp.static(PHASE_CLOCKS):
                    clk[1] += cycle_clock() - c1
                continue
        elif (irq & 1) != 0 and ime != 0 and t - sget(g, env, T_LINE_AT) < 4:
            if mget(g, env, IO_OFF + LY) == 144:
                # The PPU requests VBlank late in the M-cycle that enters line 144, after a
                # running CPU has sampled its interrupts for this boundary: the request
                # is taken one instruction later (a halted CPU wakes on it at once, above).
                irq_now = irq & ~1
        if ime != 0 and irq_now != 0:
            # Interrupt dispatch: 2 wait M-cycles, push PC (the high byte push may change
            # IE, which is re-read before the vector is chosen), jump: 5 M-cycles.
            ime = int(0)
            ei_delay = int(0)
            if halt_bug != 0:
                # "ei; halt" with an interrupt pending: HALT took the HALT-bug path (IME
                # was still 0), so PC was not to be advanced past the next fetch. The
                # dispatch replaces that fetch: the pushed return address is the HALT
                # itself, which runs again after RETI; the handler is fetched normally.
                halt_bug = int(0)
                pc = (pc - 1) & 0xFFFF
            t += 8
            sp = (sp - 1) & 0xFFFF
            t += 4
            wr(g, env, sp, pc >> 8, t)
            irq_now = pending_irq(g, env)
            sp = (sp - 1) & 0xFFFF
            t += 4
            wr(g, env, sp, pc & 0xFF, t)
            pc = int(0)
            if irq_now != 0:
                bit = int(0)
                while ((irq_now >> bit) & 1) == 0:
                    bit += 1
                mset(g, env, IO_OFF + IF, mget(g, env, IO_OFF + IF) & ~(1 << bit))
                pc = 0x40 + 8 * bit
            t += 4
            next_ev = int(STALE)
            if wp.static(PHASE_CLOCKS):
                clk[1] += cycle_clock() - c1
            continue

        if wp.static(PHASE_CLOCKS):
            c0 = cycle_clock()
            clk[1] += c0 - c1
            clk[ROW_LANES] += wp.int64(live_lanes())
            clk[ROW_FETCHES] += wp.int64(1)
        # ---- fetch: opcode, then its immediate bytes (little-endian in imm)
        t += 4
        op = rd_cpu(g, env, pc, t, bank0, bankx, dma_s, dma_e)
        if halt_bug != 0:
            halt_bug = int(0)
        else:
            pc = (pc + 1) & 0xFFFF
        icount += 1
        x = op >> 6
        y = (op >> 3) & 7
        z = op & 7
        p = y >> 1
        q = y & 1
        n_imm = imm_len(x, y, z)
        imm = int(0)
        k = int(0)
        while k < n_imm:
            t += 4
            imm = imm | (rd_cpu(g, env, pc, t, bank0, bankx, dma_s, dma_e) << (8 * k))
            pc = (pc + 1) & 0xFFFF
            k += 1
        if wp.static(PHASE_CLOCKS):
            c1 = cycle_clock()
            clk[2] += c1 - c0
        f = r[R_F]
        a = r[R_A]
        hl = pair(r, 4)

        # ---- reads: n_rd bytes from raddr (little-endian in rv), after r_wait cycles
        raddr = hl
        n_rd = int(0)
        r_wait = int(0)
        taken = False
        if x == 1:
            if z == 6 and y != 6:  # LD r,(HL)
                n_rd = int(1)
        elif x == 2:
            if z == 6:  # ALU A,(HL)
                n_rd = int(1)
        elif x == 0:
            if z == 2 and q == 1:  # LD A,(BC) / (DE) / (HL+) / (HL-)
                n_rd = int(1)
                if p == 0:
                    raddr = pair(r, 0)
                elif p == 1:
                    raddr = pair(r, 2)
            elif (z == 4 or z == 5) and y == 6:  # INC (HL) / DEC (HL)
                n_rd = int(1)
        else:
            if z == 0:
                if y < 4:  # RET cc: one internal M-cycle, then the pop if taken
                    r_wait = int(4)
                    taken = cond(y, f)
                    if taken:
                        n_rd = int(2)
                        raddr = sp
                elif y == 6:  # LDH A,(n)
                    n_rd = int(1)
                    raddr = 0xFF00 + imm
            elif z == 1:
                if q == 0 or p < 2:  # POP rp2 / RET / RETI
                    n_rd = int(2)
                    raddr = sp
            elif z == 2:
                if y == 7:  # LD A,(nn)
                    n_rd = int(1)
                    raddr = imm
                elif y == 6:  # LD A,(C)
                    n_rd = int(1)
                    raddr = 0xFF00 + r[R_C]
            elif z == 3 and y == 1:
                if (imm & 7) == 6:  # CB op on (HL)
                    n_rd = int(1)
        t += r_wait
        rv = int(0)
        k = int(0)
        while k < n_rd:
            t += 4
            ra = (raddr + k) & 0xFFFF
            rv = rv | (rd_cpu(g, env, ra, t, bank0, bankx, dma_s, dma_e) << (8 * k))
            k += 1

        if wp.static(PHASE_CLOCKS):
            c0 = cycle_clock()
            clk[3] += c0 - c1
        # ---- register work; a write is planned as n_wr bytes of wval (low byte first) to
        # waddr, waddr + wstep, after w_wait cycles
        waddr = hl
        n_wr = int(0)
        w_wait = int(0)
        wstep = int(1)
        wval = int(0)
        if x == 1:
            if op == 0x76:  # HALT
                if ime == 0 and irq != 0:
                    halt_bug = int(1)
                else:
                    halted = int(1)
            else:  # LD r,r'
                v = rv
                if z != 6:
                    v = rget(r, z)
                if y == 6:
                    n_wr = int(1)
                    wval = v
                else:
                    r = rset(r, y, v)
        elif x == 2:  # ALU A,r
            v = rv
            if z != 6:
                v = rget(r, z)
            res = alu8(y, a, v, f)
            r[R_A] = res >> 8
            r[R_F] = res & 0xF0
        elif x == 0:
            if z == 0:
                if y == 0:
                    pass  # NOP
                elif y == 1:  # LD (nn),SP
                    waddr = imm
                    n_wr = int(2)
                    wval = sp
                elif y == 2:  # STOP: skips a byte, resets DIV, sleeps until a button press
                    pc = (pc + 1) & 0xFFFF
                    wr(g, env, 0xFF04, 0, t)
                    halted = int(2)
                    next_ev = int(STALE)
                else:  # JR e / JR cc,e
                    e = sext8(imm)
                    if y == 3 or cond(y, f):
                        t += 4
                        pc = (pc + e) & 0xFFFF
            elif z == 1:
                if q == 0:  # LD rp,nn
                    if p == 3:
                        sp = imm
                    else:
                        r = set_pair(r, 2 * p, imm)
                else:  # ADD HL,rp
                    v = sp
                    if p != 3:
                        v = pair(r, 2 * p)
                    s = hl + v
                    nf = f & FZ
                    if (hl & 0xFFF) + (v & 0xFFF) > 0xFFF:
                        nf = nf | FH
                    if s > 0xFFFF:
                        nf = nf | FC
                    t += 4
                    r = set_pair(r, 4, s & 0xFFFF)
                    r[R_F] = nf
            elif z == 2:
                if p == 0:
                    waddr = pair(r, 0)
                elif p == 1:
                    waddr = pair(r, 2)
                elif p == 2:
                    r = set_pair(r, 4, (hl + 1) & 0xFFFF)
                else:
                    r = set_pair(r, 4, (hl - 1) & 0xFFFF)
                if q == 0:  # LD (rr),A
                    n_wr = int(1)
                    wval = a
                else:  # LD A,(rr): read above
                    r[R_A] = rv
            elif z == 3:  # INC rp / DEC rp
                v = sp
                if p != 3:
                    v = pair(r, 2 * p)
                if q == 0:
                    v = (v + 1) & 0xFFFF
                else:
                    v = (v - 1) & 0xFFFF
                t += 4
                if p == 3:
                    sp = v
                else:
                    r = set_pair(r, 2 * p, v)
            elif z == 4 or z == 5:  # INC r / DEC r
                v = rv
                if y != 6:
                    v = rget(r, y)
                nf = f & FC
                if z == 4:
                    if (v & 0xF) == 0xF:
                        nf = nf | FH
                    v = (v + 1) & 0xFF
                else:
                    if (v & 0xF) == 0:
                        nf = nf | FH
                    v = (v - 1) & 0xFF
                    nf = nf | FN
                if v == 0:
                    nf = nf | FZ
                r[R_F] = nf
                if y == 6:
                    n_wr = int(1)
                    wval = v
                else:
                    r = rset(r, y, v)
            elif z == 6:  # LD r,n
                if y == 6:
                    n_wr = int(1)
                    wval = imm
                else:
                    r = rset(r, y, imm)
            else:
                if y < 4:  # RLCA RRCA RLA RRA
                    res = rot8(y, a, f)
                    r[R_A] = res >> 8
                    r[R_F] = res & FC
                elif y == 4:
                    res = daa(a, f)
                    r[R_A] = res >> 8
                    r[R_F] = res & 0xF0
                elif y == 5:  # CPL
                    r[R_A] = a ^ 0xFF
                    r[R_F] = f | FN | FH
                elif y == 6:  # SCF
                    r[R_F] = (f & FZ) | FC
                else:  # CCF
                    r[R_F] = (f & FZ) | ((f & FC) ^ FC)
        else:  # x == 3
            push = int(-1)  # 16-bit value that PUSH, CALL or RST pushes
            if z == 0:
                if y < 4:  # RET cc (popped above when taken)
                    if taken:
                        sp = (sp + 2) & 0xFFFF
                        t += 4
                        pc = rv
                elif y == 4:  # LDH (n),A
                    waddr = 0xFF00 + imm
                    n_wr = int(1)
                    wval = a
                elif y == 6:  # LDH A,(n)
                    r[R_A] = rv
                else:  # ADD SP,e / LD HL,SP+e
                    e = imm
                    r[R_F] = add_sp_flags(sp, e)
                    v = (sp + sext8(e)) & 0xFFFF
                    t += 4
                    if y == 5:
                        t += 4
                        sp = v
                    else:
                        r = set_pair(r, 4, v)
            elif z == 1:
                if q == 0 or p < 2:  # POP rp2 / RET / RETI (popped above)
                    sp = (sp + 2) & 0xFFFF
                    lo = rv & 0xFF
                    hi = rv >> 8
                    if q == 0:
                        if p == 3:
                            r[R_A] = hi
                            r[R_F] = lo & 0xF0
                        else:
                            r = set_pair(r, 2 * p, rv)
                    else:
                        t += 4
                        pc = rv
                        if p == 1:
                            ime = int(1)
                            ei_delay = int(0)
                elif p == 2:  # JP HL
                    pc = hl
                else:  # LD SP,HL
                    t += 4
                    sp = hl
            elif z == 2:
                if y < 4:  # JP cc,nn
                    if cond(y, f):
                        t += 4
                        pc = imm
                elif y == 5:  # LD (nn),A
                    waddr = imm
                    n_wr = int(1)
                    wval = a
                elif y == 4:  # LD (C),A
                    waddr = 0xFF00 + r[R_C]
                    n_wr = int(1)
                    wval = a
                else:  # LD A,(nn) / LD A,(C): read above
                    r[R_A] = rv
            elif z == 3:
                if y == 0:  # JP nn
                    t += 4
                    pc = imm
                elif y == 1:  # CB prefix
                    cx = imm >> 6
                    cy = (imm >> 3) & 7
                    cz = imm & 7
                    v = rv
                    if cz != 6:
                        v = rget(r, cz)
                    res = cb_op(cx, cy, v, f)
                    r[R_F] = res & 0xF0
                    if cx != 1:
                        if cz == 6:
                            n_wr = int(1)
                            wval = res >> 8
                        else:
                            r = rset(r, cz, res >> 8)
                elif y == 6:  # DI
                    ime = int(0)
                    ei_delay = int(0)
                elif y == 7:  # EI (takes effect after the next instruction)
                    if ime == 0 and ei_delay == 0:
                        ei_delay = int(2)
                else:
                    locked = int(1)
            elif z == 4 or (z == 5 and q == 1):  # CALL cc,nn / CALL nn
                if z == 4 and y >= 4:
                    locked = int(1)
                elif z == 5 and p != 0:
                    locked = int(1)
                elif z == 5 or cond(y, f):
                    push = pc
                    pc = imm
            elif z == 5:  # PUSH rp2
                if p == 3:
                    push = (a << 8) | f
                else:
                    push = pair(r, 2 * p)
            elif z == 6:  # ALU A,n
                res = alu8(y, a, imm, f)
                r[R_A] = res >> 8
                r[R_F] = res & 0xF0
            else:  # RST
                push = pc
                pc = y * 8
            if push >= 0:
                # PUSH, CALL and RST: one internal M-cycle, then the high byte at SP-1 and
                # the low byte at SP-2 (wval holds them in that order).
                n_wr = int(2)
                w_wait = int(4)
                waddr = (sp - 1) & 0xFFFF
                wstep = int(-1)
                wval = ((push & 0xFF) << 8) | (push >> 8)
                sp = (sp - 2) & 0xFFFF

        if wp.static(PHASE_CLOCKS):
            c1 = cycle_clock()
            clk[4] += c1 - c0
        # ---- writes
        t += w_wait
        k = int(0)
        while k < n_wr:
            t += 4
            if wr_cpu(g, env, (waddr + k * wstep) & 0xFFFF, (wval >> (8 * k)) & 0xFF, t) != 0:
                next_ev = int(STALE)
            k += 1

        if wp.static(PHASE_CLOCKS):
            clk[5] += cycle_clock() - c1
        if locked != 0:
            # Illegal opcode: the env freezes with PC at the opcode; others continue.
            pc = (pc - 1) & 0xFFFF
            break
        if ei_delay > 0:
            ei_delay -= 1
            if ei_delay == 0:
                ime = int(1)

    if held != 0:
        set_buttons(g.ref, env, 0)  # release_after >= frames: released as the step ends

    # ---- write back registers and rebase launch-relative times
    for i in range(8):
        sset(g, env, i, r[i])
    sset(g, env, R_SP, sp)
    sset(g, env, R_PC, pc)
    sset(g, env, S_IME, ime)
    sset(g, env, S_HALTED, halted)
    sset(g, env, S_EI_DELAY, ei_delay)
    sset(g, env, S_HALT_BUG, halt_bug)
    sset(g, env, S_LOCKED, locked)
    sset(g, env, S_DIV_OFF, (sget(g, env, S_DIV_OFF) + t) & 0xFFFF)
    rebase(g, env, T_TSYNC, t)
    rebase(g, env, T_RELOAD, t)
    rebase(g, env, T_TIMER_NEXT, t)
    rebase(g, env, T_PPU_NEXT, t)
    rebase(g, env, T_SERIAL_END, t)
    rebase(g, env, T_DMA_END, t)
    rebase(g, env, T_DMA_START, t)
    rebase(g, env, T_LINE_AT, t)
    tset(g, env, TM_CLOCK, tget(g, env, TM_CLOCK) + wp.int64(t))
    tset(g, env, TM_INSTRS, tget(g, env, TM_INSTRS) + wp.int64(icount))
    if wp.static(PHASE_CLOCKS):
        for i in range(CLOCK_ROWS):
            g.clocks[i, env] = g.clocks[i, env] + clk[i]
