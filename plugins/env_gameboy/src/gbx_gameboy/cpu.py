"""The SM83 CPU and the run kernel: one thread steps one Game Boy for a whole window.

Opcodes are decoded by table: each has a descriptor (decode.py) that says which operands,
ALU operation, addresses and cycles it uses, and every instruction runs the same sequence
of selects, one ALU and one 16-bit adder. The Game Boys of a GPU warp run different opcodes
at once; with one code path for all of them the warp runs it once. Registers live in a
local vector for the whole launch. ``t`` is the cycle counter of the launch (T-cycles,
relative to the launch start); every memory access happens at the cycle of its M-cycle, so
timer and PPU reads are M-cycle exact.
"""

from __future__ import annotations

import os
import types
from typing import Any

from gbx_gameboy.countdown import hram_loop_word, loop_run
from gbx_gameboy.decode import (
    A_BC,
    A_DE,
    A_HIGH_C,
    A_HIGH_IMM,
    A_HL,
    A_IMM,
    A_SP,
    A_SP_DOWN,
    CB_BASE,
    CC_SHIFT,
    D16_NONE,
    DESC_TABLE_BYTES,
    DST8_SHIFT,
    DST16_SHIFT,
    EXTRA_SHIFT,
    F16_SHIFT,
    FCALC_SHIFT,
    FKEEP_SHIFT,
    FSET_SHIFT,
    FUSE_ADD_SHIFT,
    FUSE_IMM8,
    FUSE_KIND_SHIFT,
    FUSE_LENGTHS,
    FUSE_LOAD,
    FUSE_MAX_CYCLES,
    FUSE_MCYCLES,
    FUSE_NONE,
    FUSE_PAIR_SHIFT,
    FUSE_PAIR_SP,
    FUSE_REG8,
    FUSE_SP_OFFSET,
    LANE_GENERIC,
    LANE_JUMP,
    LANE_LOAD8,
    LANE_REG8,
    LANE_REG16,
    LANE_RMW8,
    LANE_STACK,
    LANE_STORE8,
    LOOP_REG_SHIFT,
    NRD_SHIFT,
    NWR_SHIFT,
    OP8_SHIFT,
    OP16_ADD_HL,
    OP16_ADD_SP,
    OP16_DEC,
    OP16_INC,
    OP16_PASS,
    OP16_SHIFT,
    OP_ADC,
    OP_ADD,
    OP_AND,
    OP_BIT,
    OP_CCF,
    OP_CP,
    OP_CPL,
    OP_DAA,
    OP_DEC,
    OP_INC,
    OP_LD,
    OP_OR,
    OP_RES,
    OP_RLC,
    OP_SBC,
    OP_SET,
    OP_SRL,
    OP_SUB,
    OP_XOR,
    PC_HL,
    PC_IMM,
    PC_KEEP,
    PC_MEM,
    PC_REL,
    PC_RST,
    PC_SHIFT,
    PRE_CB,
    PRE_ENTRY_BYTES,
    PRE_SPECIAL_SHIFT,
    QUICK_RUN,
    QUICK_SHIFT,
    R16_AF,
    R16_BC,
    R16_DE,
    R16_HL,
    R16_IMM,
    R16_MEM,
    R16_PC,
    R16_SP,
    RADDR_SHIFT,
    RUN_JR,
    RUN_LOOP,
    RUN_MAX,
    RWAIT_SHIFT,
    S8_IMM,
    S8_MEM,
    SP_DI,
    SP_EI,
    SP_HALT,
    SP_NONE,
    SP_RETI,
    SP_STOP,
    SPD_POP,
    SPD_PUSH,
    SPD_SHIFT,
    SPECIAL_SHIFT,
    SRC8_SHIFT,
    SRC16_SHIFT,
    W_PUSH,
    W_RES8,
    W_RES16,
    WADDR_SHIFT,
    WDOWN_SHIFT,
    WORDS,
    WVAL_SHIFT,
    WWAIT_SHIFT,
)
from gbx_gameboy.kstate import (
    GB,
    ld_i32,
    ld_u8,
    mem_base,
    mget,
    mset,
    on_gpu,
    sget,
    sset,
    tget,
    tset,
)
from gbx_gameboy.layout import (
    CYCLES_PER_FRAME,
    FAULT_BUDGET,
    FAULT_ILLEGAL_OPCODE,
    HRAM_OFF,
    IE_HRAM_INDEX,
    IF,
    IO_OFF,
    LY,
    NEVER,
    PPU_VBLANK_PENDING,
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
    S_PPU_FLAGS,
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
    WRAM_OFF,
)
from gbx_gameboy.memory import rd_cpu, rom_code_byte, serial_sync, set_buttons, wr, wr_cpu
from gbx_gameboy.oam_bug import (
    OAM_BUG_WRITE,
    oam_bug_idu,
    oam_bug_read_idu,
    oam_bug_unit,
    oam_corrupt,
)
from gbx_gameboy.phase_clock import (
    CLOCK_ROWS,
    PHASE_CLOCKS,
    ROW_CATCH_UPS,
    ROW_FETCHES,
    ROW_LANES,
    cycle_clock,
    live_lanes,
)
from gbx_gameboy.ppu_timing import (
    SEEN_MARGIN,
    draw_line,
    ppu_advance,
    ppu_cpu_event,
    window_after,
)
from gbx_gameboy.timer import timer_sync
from gbx_gameboy.warp_setup import wp

# Threads per block of this module's launches by default: one warp (the CPU device's, the
# helper kernels' and the digest's). Each thread is a whole Game Boy that runs for a whole
# launch and the kernel's register use allows only a few warps per SM, so a launch must
# spread over many small blocks to reach every SM: with Warp's default of 256, 16,384 envs
# made 64 blocks and left half of a 132-SM GPU idle. A GPU batch launches the run kernel
# with blocks of its own size (machine.launch_shape: as many warps as the batch gives each
# SM); Warp builds the module once per block size.
RUN_BLOCK_DIM = 32
wp.set_module_options({"enable_backward": False, "block_dim": RUN_BLOCK_DIM})
# The run kernel is generated from one source for each device: ``run_kernel`` for CUDA
# (HOST = False) and ``run_kernel_host`` for the CPU device (HOST = True, built at the end
# of this module). Every CPU-only path is an ``if wp.static(HOST):`` block, which Warp
# resolves at code generation, so the CUDA variant's code does not contain it. The CPU
# variant lives in a Warp module of its own, so neither device compiles the other's kernel.
HOST = False
HOST_MODULE = "gbx_gameboy.cpu_host"
wp.set_module_options({"enable_backward": False, "block_dim": RUN_BLOCK_DIM},
                      module=wp.get_module(HOST_MODULE))

vec8i = wp.types.vector(length=8, dtype=wp.int32)
vec9l = wp.types.vector(length=9, dtype=wp.int64)

FZ = 0x80
FN = 0x40
FH = 0x20
FC = 0x10
RUN_CYCLES = 0
PAST_LIMIT = 1 << 29
LAUNCH_TIME_LIMIT = 0x30000000  # below NEVER, above the cycle budget of the longest launch
RUN_FRAMES = 1
# Cycle budget of a frames launch: an env gets this many cycles per requested frame (plus
# one frame's worth). A DMG frame is 70224 cycles, LCD on or off; only a game that keeps
# restarting the LCD before VBlank, or a crafted state, takes longer. An env that uses up
# its budget without completing its frames is locked with FAULT_BUDGET: it stops, its
# frame stays as it was, and the other envs of the launch are not held up by it.
BUDGET_CYCLES_PER_FRAME = 4 * CYCLES_PER_FRAME
MAX_FRAMES_PER_LAUNCH = 2500  # (MAX + 1) * budget per frame stays below LAUNCH_TIME_LIMIT
STALE = -(1 << 30)  # a next-event time that is always due: reload the cached state
DESC_BYTES = 4 * WORDS  # one opcode descriptor (decode.py)


# The CPU variant runs on a CPU core and, for small batches, alone (or nearly) in a GPU
# warp. A CPU core predicts branches, so there the variant's helpers below compute only
# what the instruction uses; a lone GPU thread predicts none and waits for each branch
# to resolve, so there the same helpers compute their candidates branch-free and select
# (docs/benchmarks.md, "Selects for a lone GPU thread"). ``on_gpu`` (kstate.py) is a
# constant of each device's build of the module, so the compiler keeps one of the two forms.


@wp.func
def daa(a: int, f: int) -> int:
    """DAA on A after an addition or a subtraction (N, H and C of ``f`` say which):
    (result << 8) | carry out."""
    c = (f >> 4) & 1
    fn = (f >> 6) & 1
    fh = (f >> 5) & 1
    hi_fix = c != 0 or (fn == 0 and a > 0x99)
    lo_fix = fh != 0 or (fn == 0 and (a & 0xF) > 9)
    corr = wp.where(hi_fix, 0x60, 0) + wp.where(lo_fix, 6, 0)
    return ((wp.where(fn != 0, a - corr, a + corr) & 0xFF) << 8) | wp.where(hi_fix, 1, 0)


@wp.func
def alu(op: int, a: int, v: int, f: int, bit: int) -> int:
    """The 8-bit ALU: operation ``op`` (decode.OP_*) of A and v, or of v alone for the
    unary ones; ``bit`` is BIT/RES/SET's bit. Returns (result << 8) | flags (F's bit
    positions: Z N H C computed for whatever the instruction keeps of them).

    The common operations (LD, the adder's ADD ADC SUB SBC CP INC DEC, AND XOR OR) are
    computed together and the wanted one selected, without branches: the threads of a
    warp run different operations at once, and a select costs them one instruction where
    a branch would run each operation's code in turn. The rest (rotates and shifts, BIT
    RES SET, DAA, CPL, SCF, CCF: the CB-prefixed instructions and a few rare ones) are
    computed only when a thread of the warp runs one of them."""
    c = (f >> 4) & 1
    # ADD ADC SUB SBC CP INC DEC: one adder. H and C are bits 4 and 8 of the nibble and
    # byte sums, for the subtractions too (a negative result has those bits set).
    unary = op == OP_INC or op == OP_DEC
    x = wp.where(unary, v, a)
    y = wp.where(unary, 1, v)
    cin = wp.where(op == OP_ADC or op == OP_SBC, c, 0)
    sub = op == OP_SUB or op == OP_SBC or op == OP_CP or op == OP_DEC
    s = wp.where(sub, x - y - cin, x + y + cin)
    hs = wp.where(sub, (x & 0xF) - (y & 0xF) - cin, (x & 0xF) + (y & 0xF) + cin)
    res = v  # LD, SCF, CCF
    res = wp.where(op >= OP_ADD and op <= OP_DEC, s & 0xFF, res)
    res = wp.where(op == OP_AND, a & v, res)
    res = wp.where(op == OP_XOR, a ^ v, res)
    res = wp.where(op == OP_OR, a | v, res)
    cy = (s >> 8) & 1
    if op >= OP_RLC:
        # Rotates and shifts RLC RRC RL RR SLA SRA SWAP SRL (k = 0..7).
        k = op - OP_RLC
        in_l = wp.where(k == 0, v >> 7, wp.where(k == 2, c, 0))
        in_r = wp.where(k == 1, v & 1, wp.where(k == 3, c, 0))
        rl = ((v << 1) | in_l) & 0xFF
        rr = (v >> 1) | (in_r << 7) | wp.where(k == 5, v & 0x80, 0)
        rot = wp.where(k == 6, ((v & 0xF) << 4) | (v >> 4), wp.where((k & 1) != 0, rr, rl))
        rot_c = wp.where(k == 6, 0, wp.where((k & 1) != 0, v & 1, v >> 7))
        adjusted = daa(a, f)
        mask = 1 << bit
        res = wp.where(op <= OP_SRL, rot, res)
        res = wp.where(op == OP_BIT, v & mask, res)
        res = wp.where(op == OP_RES, v & ~mask, res)
        res = wp.where(op == OP_SET, v | mask, res)
        res = wp.where(op == OP_DAA, adjusted >> 8, res)
        res = wp.where(op == OP_CPL, a ^ 0xFF, res)
        cy = wp.where(op <= OP_SRL, rot_c, cy)
        cy = wp.where(op == OP_DAA, adjusted & 1, cy)
        cy = wp.where(op == OP_CCF, c ^ 1, cy)
    nf = (cy << 4) | (((hs >> 4) & 1) << 5) | wp.where(sub, FN, 0) | wp.where(res == 0, FZ, 0)
    return (res << 8) | nf


@wp.func
def alu_host(op: int, a: int, v: int, f: int, bit: int) -> int:
    """``alu`` for one CPU thread: the same result and flags, but only the family of
    ``op`` is computed (a branch costs a CPU thread less than computing every family,
    which a GPU warp shares among its Game Boys). H, N and the carry of the adder are
    computed as in ``alu`` for every op, since the descriptor decides which flags count."""
    c = (f >> 4) & 1
    unary = op == OP_INC or op == OP_DEC
    x = a
    y = v
    if unary:
        x = v
        y = 1
    cin = int(0)
    if op == OP_ADC or op == OP_SBC:
        cin = c
    sub = op == OP_SUB or op == OP_SBC or op == OP_CP or op == OP_DEC
    s = int(0)
    hs = int(0)
    if sub:
        s = x - y - cin
        hs = (x & 0xF) - (y & 0xF) - cin
    else:
        s = x + y + cin
        hs = (x & 0xF) + (y & 0xF) + cin
    res = v  # LD, SCF, CCF
    cy = (s >> 8) & 1
    if op == OP_AND:
        res = a & v
    elif op == OP_XOR:
        res = a ^ v
    elif op == OP_OR:
        res = a | v
    elif op >= OP_ADD and op <= OP_DEC:  # ADD ADC SUB SBC CP INC DEC
        res = s & 0xFF
    elif op >= OP_RLC and op <= OP_SRL:
        k = op - OP_RLC
        if k == 6:
            res = ((v & 0xF) << 4) | (v >> 4)
            cy = int(0)
        elif (k & 1) != 0:
            in_r = wp.where(k == 1, v & 1, wp.where(k == 3, c, 0))
            res = (v >> 1) | (in_r << 7) | wp.where(k == 5, v & 0x80, 0)
            cy = v & 1
        else:
            in_l = wp.where(k == 0, v >> 7, wp.where(k == 2, c, 0))
            res = ((v << 1) | in_l) & 0xFF
            cy = v >> 7
    elif op == OP_BIT:
        res = v & (1 << bit)
    elif op == OP_RES:
        res = v & ~(1 << bit)
    elif op == OP_SET:
        res = v | (1 << bit)
    elif op == OP_DAA:
        adjusted = daa(a, f)
        res = adjusted >> 8
        cy = adjusted & 1
    elif op == OP_CPL:
        res = a ^ 0xFF
    elif op == OP_CCF:
        cy = c ^ 1
    nf = (cy << 4) | (((hs >> 4) & 1) << 5) | wp.where(sub, FN, 0) | wp.where(res == 0, FZ, 0)
    return (res << 8) | nf


@wp.func
def add16(op: int, v: int, hl: int, e: int) -> int:
    """The 16-bit adder (decode.OP16_*) on v: pass, +1, -1, HL + v (H and C from bits 11
    and 15), v + signed e (H and C from the low byte, as ADD SP,e). Returns
    (result << 8) | flags (H and C in F's bit positions)."""
    d = wp.where(op == OP16_INC, 1, wp.where(op == OP16_DEC, -1, 0))
    d = wp.where(op == OP16_ADD_HL, hl, d)
    d = wp.where(op == OP16_ADD_SP, sext8(e), d)
    h_hl = ((v & 0xFFF) + (hl & 0xFFF)) >> 12
    c_hl = (v + hl) >> 16
    h_sp = ((v & 0xF) + (e & 0xF)) >> 4
    c_sp = ((v & 0xFF) + (e & 0xFF)) >> 8
    h = wp.where(op == OP16_ADD_HL, h_hl, h_sp) & 1
    cy = wp.where(op == OP16_ADD_HL, c_hl, c_sp) & 1
    return (((v + d) & 0xFFFF) << 8) | (h << 5) | (cy << 4)


@wp.func
def cond(cc: int, f: int) -> bool:
    """Condition cc of a descriptor: always, NZ, Z, NC, C."""
    flag = wp.where(cc <= 2, (f >> 7) & 1, (f >> 4) & 1)
    return cc == 0 or flag == ((cc + 1) & 1)


@wp.func
def field(w: int, shift: int, bits: int) -> int:
    return (w >> shift) & ((1 << bits) - 1)


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
def bus_address(sel: int, r: vec8i, sp: int, imm: int) -> int:
    """The address a descriptor's read or write selector (decode.A_*) names."""
    a = pair(r, 4)  # A_HL
    a = wp.where(sel == A_BC, pair(r, 0), a)
    a = wp.where(sel == A_DE, pair(r, 2), a)
    a = wp.where(sel == A_SP, sp, a)
    a = wp.where(sel == A_SP_DOWN, (sp - 1) & 0xFFFF, a)
    a = wp.where(sel == A_HIGH_IMM, 0xFF00 + (imm & 0xFF), a)
    a = wp.where(sel == A_IMM, imm, a)
    return wp.where(sel == A_HIGH_C, 0xFF00 + r[R_C], a)


@wp.func
def bus_address_host(sel: int, r: vec8i, sp: int, imm: int) -> int:
    """``bus_address`` for the CPU variant: by branches on a CPU, by selects on a GPU
    (see ``on_gpu``; ``bus_address``'s constant-indexed register reads become direct
    reads of the CPU variant's register vector)."""
    if on_gpu():
        return bus_address(sel, r, sp, imm)
    return bus_address_branches(sel, r, sp, imm)


@wp.func
def bus_address_branches(sel: int, r: vec8i, sp: int, imm: int) -> int:
    """``bus_address`` by branches, for a CPU core."""
    a = int(0)
    if sel == A_HL:
        a = (r[4] << 8) | r[5]
    elif sel == A_BC:
        a = (r[0] << 8) | r[1]
    elif sel == A_DE:
        a = (r[2] << 8) | r[3]
    elif sel == A_SP:
        a = sp
    elif sel == A_SP_DOWN:
        a = (sp - 1) & 0xFFFF
    elif sel == A_HIGH_IMM:
        a = 0xFF00 + (imm & 0xFF)
    elif sel == A_IMM:
        a = imm
    else:
        a = 0xFF00 + r[R_C]
    return a


@wp.func
def value16_host(sel: int, r: vec8i, sp: int, imm: int, hl: int) -> int:
    """The 16-bit source a descriptor names (decode.R16_*, but for R16_MEM and R16_PC,
    which the caller supplies) for the CPU variant: by branches on a CPU, by selects on a
    GPU (see ``on_gpu``)."""
    if on_gpu():
        return value16_selects(sel, r, sp, imm, hl)
    return value16_branches(sel, r, sp, imm, hl)


@wp.func
def value16_selects(sel: int, r: vec8i, sp: int, imm: int, hl: int) -> int:
    """``value16_host`` by selects, for a lone GPU thread."""
    v = wp.where(sel == R16_SP, sp, hl)
    v = wp.where(sel == R16_BC, (r[0] << 8) | r[1], v)
    v = wp.where(sel == R16_DE, (r[2] << 8) | r[3], v)
    v = wp.where(sel == R16_AF, (r[R_A] << 8) | r[R_F], v)
    return wp.where(sel == R16_IMM, imm, v)


@wp.func
def value16_branches(sel: int, r: vec8i, sp: int, imm: int, hl: int) -> int:
    """``value16_host`` by branches, for a CPU core."""
    v = hl
    if sel == R16_SP:
        v = sp
    elif sel == R16_BC:
        v = (r[0] << 8) | r[1]
    elif sel == R16_DE:
        v = (r[2] << 8) | r[3]
    elif sel == R16_AF:
        v = (r[R_A] << 8) | r[R_F]
    elif sel == R16_IMM:
        v = imm
    return v


@wp.func
def jump_lane(w0: int, f0: int, pc: int, imm: int, hl: int) -> wp.vec2i:
    """LANE_JUMP (NOP, JP, JR, JP HL) for the CPU variant: (new PC, cycles the jump adds);
    by branches on a CPU, by selects on a GPU (see ``on_gpu``)."""
    if on_gpu():
        return jump_lane_selects(w0, f0, pc, imm, hl)
    return jump_lane_branches(w0, f0, pc, imm, hl)


@wp.func
def jump_lane_selects(w0: int, f0: int, pc: int, imm: int, hl: int) -> wp.vec2i:
    """``jump_lane`` by selects, for a lone GPU thread."""
    taken = cond(field(w0, CC_SHIFT, 3), f0)
    psel = field(w0, PC_SHIFT, 3)
    npc = wp.where(psel == PC_HL, hl, pc)
    npc = wp.where(psel == PC_REL, (pc + sext8(imm & 0xFF)) & 0xFFFF, npc)
    npc = wp.where(psel == PC_IMM, imm, npc)
    return wp.vec2i(wp.where(taken, npc, pc),
                    wp.where(taken, 4 * field(w0, EXTRA_SHIFT, 2), 0))


@wp.func
def jump_lane_branches(w0: int, f0: int, pc: int, imm: int, hl: int) -> wp.vec2i:
    """``jump_lane`` by branches, for a CPU core."""
    npc = pc
    dt = int(0)
    if cond(field(w0, CC_SHIFT, 3), f0):
        psel = field(w0, PC_SHIFT, 3)
        if psel == PC_IMM:
            npc = imm
        elif psel == PC_REL:
            npc = (pc + sext8(imm & 0xFF)) & 0xFFFF
        elif psel == PC_HL:
            npc = hl
        dt = 4 * field(w0, EXTRA_SHIFT, 2)
    return wp.vec2i(npc, dt)


@wp.func
def alu8_host(w1: int, a: int, v: int, f0: int, code: int) -> int:
    """The 8-bit work of a short lane (LANE_REG8, LANE_LOAD8, LANE_RMW8) for the CPU
    variant (``alu_host`` on a CPU, on a GPU ``alu``, which selects: see ``on_gpu``):
    the descriptor's operation on v (a register, the immediate or the byte read)
    and A, as (result << 8) | F, F from ``f0`` (before the instruction) with the
    descriptor's kept, forced and computed flags."""
    op = field(w1, OP8_SHIFT, 5)
    if op == OP_LD:
        return (v << 8) | (f0 & 0xF0)  # every LD keeps the flags (test_decode checks it)
    o = int(0)
    if on_gpu():  # the ALU that selects (see on_gpu)
        o = alu(op, a, v, f0, (code >> 3) & 7)
    else:
        o = alu_host(op, a, v, f0, (code >> 3) & 7)
    return (o & ~0xFF) | (
        (f0 & (field(w1, FKEEP_SHIFT, 4) << 4))
        | (field(w1, FSET_SHIFT, 4) << 4)
        | (o & 0xF0 & (field(w1, FCALC_SHIFT, 4) << 4))
    )


@wp.func
def reg16_host(w1: int, w2: int, v16: int, hl: int, imm: int, f0: int) -> wp.vec2i:
    """The work of LANE_REG16 for the CPU variant on its 16-bit source v16: (the 16-bit
    result, F from ``f0`` with the descriptor's kept, forced and computed flags)."""
    op = field(w2, OP16_SHIFT, 3)
    if op < OP16_ADD_HL:
        # LD rr,nn, LD SP,HL, INC rr, DEC rr: no adder flags, and every one keeps F
        # (test_decode checks it)
        d = wp.where(op == OP16_INC, 1, wp.where(op == OP16_DEC, -1, 0))
        return wp.vec2i((v16 + d) & 0xFFFF, f0 & 0xF0)
    o = add16(op, v16, hl, imm & 0xFF)
    calc = wp.where(field(w1, F16_SHIFT, 1) != 0, o & 0xF0, 0)
    f = (
        (f0 & (field(w1, FKEEP_SHIFT, 4) << 4))
        | (field(w1, FSET_SHIFT, 4) << 4)
        | (calc & (field(w1, FCALC_SHIFT, 4) << 4))
    )
    return wp.vec2i(o >> 8, f)


@wp.func
def push_value_host(w2: int, r: vec8i, sp: int, imm: int, pc: int, f0: int) -> int:
    """The 16-bit value PUSH, CALL or RST puts on the stack (F as ``f0``, before the
    instruction) for the CPU variant: by branches on a CPU, by selects on a GPU (see
    ``on_gpu``)."""
    if on_gpu():
        return push_value_selects(w2, r, sp, imm, pc, f0)
    return push_value_branches(w2, r, sp, imm, pc, f0)


@wp.func
def push_value_selects(w2: int, r: vec8i, sp: int, imm: int, pc: int, f0: int) -> int:
    """``push_value_host`` by selects, for a lone GPU thread."""
    src16 = field(w2, SRC16_SHIFT, 3)
    v16 = wp.where(src16 == R16_AF, (r[R_A] << 8) | f0,
                   value16_selects(src16, r, sp, imm, (r[4] << 8) | r[5]))
    return wp.where(src16 == R16_PC, pc, v16)


@wp.func
def push_value_branches(w2: int, r: vec8i, sp: int, imm: int, pc: int, f0: int) -> int:
    """``push_value_host`` by branches, for a CPU core."""
    v16 = pc
    src16 = field(w2, SRC16_SHIFT, 3)
    if src16 != R16_PC:
        v16 = value16_branches(src16, r, sp, imm, (r[4] << 8) | r[5])
        if src16 == R16_AF:
            v16 = (r[R_A] << 8) | f0
    return v16


@wp.func
def push_target_host(w0: int, pc: int, imm: int, code: int) -> int:
    """PC after PUSH (unchanged), CALL (the immediate) or RST (its vector), for the CPU
    variant: by branches on a CPU, by selects on a GPU (see ``on_gpu``)."""
    if on_gpu():
        return push_target_selects(w0, pc, imm, code)
    return push_target_branches(w0, pc, imm, code)


@wp.func
def push_target_selects(w0: int, pc: int, imm: int, code: int) -> int:
    """``push_target_host`` by selects, for a lone GPU thread."""
    psel = field(w0, PC_SHIFT, 3)
    return wp.where(psel == PC_IMM, imm, wp.where(psel == PC_RST, code & 0x38, pc))


@wp.func
def push_target_branches(w0: int, pc: int, imm: int, code: int) -> int:
    """``push_target_host`` by branches, for a CPU core."""
    psel = field(w0, PC_SHIFT, 3)
    npc = pc
    if psel == PC_IMM:
        npc = imm
    elif psel == PC_RST:
        npc = code & 0x38
    return npc


@wp.func
def plain_ram(a: int) -> bool:
    """WRAM (with its echo) or HRAM without IE: memory a CPU access only reads or
    stores, at any cycle outside OAM DMA."""
    return (a >= 0xC000 and a < 0xFE00) or (a >= 0xFF80 and a < 0xFFFF)


@wp.func
def plain_get(g: GB, env: int, a: int) -> int:
    """Byte at ``a``, which ``plain_ram`` accepts."""
    v = int(0)
    if a < 0xFE00:
        v = mget(g, env, WRAM_OFF + (a & 0x1FFF))
    else:
        v = mget(g, env, HRAM_OFF + (a - 0xFF80))
    return v


@wp.func
def plain_set(g: GB, env: int, a: int, v: int):
    """Store byte v at ``a``, which ``plain_ram`` accepts."""
    if a < 0xFE00:
        mset(g, env, WRAM_OFF + (a & 0x1FFF), v)
    else:
        mset(g, env, HRAM_OFF + (a - 0xFF80), v)


@wp.func
def hl_step(w2: int) -> int:
    """HL's step after the access of (HL+) (+1) or (HL-) (-1)."""
    return wp.where(field(w2, OP16_SHIFT, 3) == OP16_INC, 1, -1)


@wp.func_native("return (uint64_t)a.data;")
def array_u8_ptr(a: wp.array(dtype=wp.uint8)) -> wp.uint64: ...  # type: ignore[empty-body]


# Four bytes at any offset. A CPU loads them at once whatever the alignment; a GPU faults
# on an unaligned word load, so there (the CPU variant run on a GPU) they are four.
@wp.func_native(
    "#ifdef __CUDA_ARCH__\n"
    "const uint8_t* p = ((const uint8_t*)base) + off;\n"
    "return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)"
    " | ((uint32_t)p[3] << 24));\n"
    "#else\n"
    "uint32_t w; __builtin_memcpy(&w, ((const uint8_t*)base) + off, 4); return (int32_t)w;\n"
    "#endif\n"
)
def ld_u32(base: wp.uint64, off: int) -> int: ...  # type: ignore[empty-body]


# Sixteen bytes at a 16-byte aligned offset (an entry of the predecoded ROM): one load on
# a GPU, through its read-only data cache (the entries never change in a launch).
@wp.func_native(
    "#ifdef __CUDA_ARCH__\n"
    "const int4 v = __ldg((const int4*)(((const uint8_t*)base) + off));\n"
    "return wp::vec_t<4, wp::int32>(v.x, v.y, v.z, v.w);\n"
    "#else\n"
    "int32_t v[4]; __builtin_memcpy(v, ((const uint8_t*)base) + off, 16);\n"
    "return wp::vec_t<4, wp::int32>(v[0], v[1], v[2], v[3]);\n"
    "#endif\n"
)
def ld_v4i(base: wp.uint64, off: int) -> wp.vec4i: ...  # type: ignore[empty-body]


@wp.func
def sext8(v: int) -> int:
    return v - ((v & 0x80) << 1)


@wp.func
def jump_target(psel: int, pc: int, imm: int, hl: int, rv: int, code: int) -> int:
    """The PC after an instruction whose descriptor's PC selector (decode.PC_*) is
    ``psel``, from the PC after its bytes, its immediates, HL, the bytes it read and its
    opcode: ``pc`` itself for PC_KEEP."""
    new_pc = wp.where(psel == PC_IMM, imm, pc)
    new_pc = wp.where(psel == PC_REL, (pc + sext8(imm & 0xFF)) & 0xFFFF, new_pc)
    new_pc = wp.where(psel == PC_HL, hl, new_pc)
    new_pc = wp.where(psel == PC_MEM, rv, new_pc)
    return wp.where(psel == PC_RST, code & 0x38, new_pc)


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


@wp.kernel
def draw_pending_kernel(g: GB):
    """After a launch that defers drawing (ppu_timing.flush_draw): draw the lines of the
    drawn frame left pending, one thread per (env, line), each with the LCD registers
    recorded for it and the VRAM and OAM the launch left, which are those it was due with
    (any change to them drew the pending lines first). A line that shows the window takes
    its window line counter from the first pending line's and the registers of the lines
    before it."""
    env, ly = wp.tid()
    count = g.pend[env, 0]
    first = g.pend[env, 1]
    if ly < first or ly >= first + count:
        return
    mb = mem_base(g, env)
    regs = g.lines[env, ly]
    win = g.pend[env, 2]
    if window_after(ly, 0, regs) != 0:  # only the window's lines need the counter
        for k in range(first, ly):
            win = window_after(k, win, g.lines[env, k])
    draw_line(mb, env, ly, win, g.fb, regs)


@wp.kernel(name="store_gb_host", module=HOST_MODULE)
def store_gb_host(dst: wp.array(dtype=GB), g: GB):
    """store_gb in the CPU device's module (see HOST)."""
    dst[0] = g


# Countdown and fill loops in one step (countdown.py) in the CUDA variant as in the CPU
# variant; GBX_GAMEBOY_CUDA_LOOPS=0 builds the CUDA variant without them, to measure what
# they give (docs/benchmarks.md, "Loops at the jump back on a GPU").
CUDA_LOOPS = os.environ.get("GBX_GAMEBOY_CUDA_LOOPS", "") != "0"

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
    warp_bits: int,
    env_end: int,
    env_base: int,
):
    """Run each env for ``amount`` cycles (mode 0) or frames (mode 1).

    Lane ``l`` of warp ``w`` (thread ``32 w + l``) runs env ``env_base + (w << warp_bits)
    + l`` when ``l < 2 ** warp_bits`` and that env is below ``env_end``; the other threads
    return at once. A GPU launch covers the whole batch from env 0 with ``2 ** warp_bits``
    Game Boys per warp (machine.launch_shape); the CPU device runs a batch as contiguous
    chunks of envs, one launch per worker thread (cpu_threads.ChunkedLaunch), with
    ``warp_bits`` 5 (thread ``i``, env ``env_base + i``).

    One iteration of the loop is one instruction in four phases: fetch (opcode and
    immediates), reads, register work, writes. Memory is touched only in the fetch, read
    and write phases, each a single inlined site: the 32 Game Boys of a warp run different
    instructions, and an access written once per instruction kind would be executed once
    per kind present in the warp; here every thread that reads does so in the same pass.

    What the loop needs at every instruction and that changes rarely stays in registers:
    the next event time (timer, serial, PPU, launch end), the pending interrupts and, in
    the CPU variant, the ROM banks and the OAM DMA window (the CUDA variant loads those
    two at every instruction). They are reloaded after the event catch-up and after any
    write that may change them (MBC, IO, IE, interrupt dispatch); reads cannot make an
    event earlier, and any catch-up they trigger happens only once an event is due, which
    the next iteration's catch-up sees too.
    """
    tid = wp.tid()
    lane = tid & 31
    if (lane >> warp_bits) != 0:  # a lane past its warp's Game Boys
        return
    env = ((tid >> 5) << warp_bits) + lane + env_base
    if env >= env_end:
        return
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

    g.pend[env, 0] = 0  # the previous launch's lines were drawn after it
    # The launch's cycle limit: the requested cycles, or the frames' cycle budget.
    limit = wp.min(amount, LAUNCH_TIME_LIMIT)
    if mode != RUN_CYCLES:
        frames = wp.min(amount, MAX_FRAMES_PER_LAUNCH)
        limit = (frames + 1) * BUDGET_CYCLES_PER_FRAME
    if wp.static(PHASE_CLOCKS):
        clk = vec9l()  # cycles per phase, then live lanes, fetches, catch-ups
        c0 = cycle_clock()
        c1 = c0
    if wp.static(HOST):
        rom_ptr = array_u8_ptr(g.rom)
        # Where CPU addresses 0000-3FFF and 4000-7FFF of the mapped banks start in ROM:
        # a code byte is one load from there (the ROM is a power of two >= 32 KiB, so
        # masking the bank's offset masks the whole index).
        # (offsets from rom_ptr: 32-bit values, where pointers would take two registers
        # each in the inner loop)
        off_lo = int(0)
        off_hi = int(0)
        # The predecoded ROM (decode.rom_predecode_entries, PRE_ENTRY_BYTES per ROM
        # byte), which the batch keeps after the descriptors in ``dec``: the entry of ROM
        # byte ``k`` lies PRE_ENTRY_BYTES * k bytes from pre_ptr.
        pre_ptr = g.dec_ptr + wp.uint64(DESC_TABLE_BYTES)
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
                if lframes >= amount:
                    break
                if t >= limit:
                    locked = int(FAULT_BUDGET)  # frames not completed within the budget
                    break
            elif t >= limit:
                break
            next_ev = wp.min(
                wp.min(ppu_cpu_event(g, env), sget(g, env, T_TIMER_NEXT)),
                wp.min(sget(g, env, T_SERIAL_END), limit),
            )
            irq = pending_irq(g, env)
            if wp.static(HOST):
                bank0 = sget(g, env, S_BANK0)
                bankx = sget(g, env, S_BANKX)
                dma_s = sget(g, env, T_DMA_START)
                dma_e = sget(g, env, T_DMA_END)
                off_lo = (bank0 * 0x4000) & g.rom_mask
                off_hi = ((bankx * 0x4000) & g.rom_mask) - 0x4000
        if wp.static(not HOST):
            # The CUDA variant loads the ROM banks and the OAM DMA window at every
            # instruction instead: kept from one catch-up to the next, ptxas spilled them
            # and reloaded them where the catch-up joins the path every pass takes,
            # beside the values it keeps; four loads from the state cost less
            # (1.02 - 1.04x at 65,536 envs, a 16-byte smaller stack frame).
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
                # A request still pending from an earlier frame was sampled: no delay.
                if (sget(g, env, S_PPU_FLAGS) & PPU_VBLANK_PENDING) == 0:
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
            if (sp & 0xFF00) == 0xFE00:
                oam_corrupt(g, env, t, OAM_BUG_WRITE)  # SP on the bus (oam_bug.py)
            sp = (sp - 1) & 0xFFFF
            t += 4
            wr_cpu(g, env, sp, pc >> 8, t)  # the loop reloads its state below (STALE)
            irq_now = pending_irq(g, env)
            sp = (sp - 1) & 0xFFFF
            t += 4
            wr_cpu(g, env, sp, pc & 0xFF, t)
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

        if wp.static(HOST and not PHASE_CLOCKS):
            # One CPU thread: a straight run of jumps, 8- and 16-bit register operations,
            # one-byte loads and stores on WRAM, HRAM or ROM and stack operations on WRAM
            # or HRAM (the inner-loop lanes of
            # decode.rom_predecode) fetched from cartridge ROM goes round this inner
            # loop, which does only what they need. They change nothing the checks above
            # read (interrupts cannot be taken in it: IME or the pending requests are 0;
            # those memory accesses move no event), so the checks need not be repeated
            # until an event is due. The first other instruction (or an access elsewhere)
            # leaves it, before any of its effects, for the full path.
            if halt_bug == 0 and ei_delay == 0 and (ime == 0 or irq == 0):
                ran = int(0)
                # An opcode fetched in OAM DMA (or two M-cycles before it) takes the full
                # path: the loop ends at the first instruction that starts at or after
                # q_end. (When an instruction jumps over the whole DMA, it ends there
                # too: the full path is right for every instruction.)
                q_end = next_ev
                if t + 4 < dma_e:
                    q_end = wp.min(next_ev, dma_s - 12)
                # On a CPU, the entry of the instruction after the last one (at pf_pc),
                # loaded before that one's work. (A CPU core runs the work while the load
                # is under way. On a GPU the entry held from one pass to the next costs
                # more in spilled registers than it saves: 0.77x at 1,024 envs.)
                pf_pc = int(-1)
                pf = wp.vec4i()
                while t < q_end:
                    tq = t + 4  # the opcode's M-cycle, as in the fetch below
                    # Outside the cartridge ROM or in the boot ROM: the full path. (Bank
                    # offsets above 0x3FFC, whose three code bytes span two banks, have
                    # LANE_GENERIC in the predecoded ROM.)
                    if pc > 0x7FFF or (pc < 0x100 and g.has_boot != 0):
                        break
                    # The instruction's descriptor and lane, its immediates and opcode
                    # (decode.rom_predecode_entries): one load that waits only for PC
                    # (on a CPU, made by the pass before unless that one jumped).
                    qentry = pf
                    if on_gpu() or pc != pf_pc:
                        qentry = ld_v4i(pre_ptr, PRE_ENTRY_BYTES * (
                            wp.where(pc < 0x4000, off_lo, off_hi) + pc))
                    qw0 = qentry[0]
                    qword = qentry[3]
                    qlane = qw0 >> QUICK_SHIFT
                    if qlane == LANE_GENERIC:
                        break
                    if qlane == QUICK_RUN:
                        if (qw0 & RUN_LOOP) != 0:
                            # A countdown or fill loop (decode.RUN_LOOP), as in the CUDA
                            # variant.
                            lreg = field(qw0, LOOP_REG_SHIFT, 3)
                            lpass = loop_run(g, env, qw0, r[lreg], r[R_F], (r[4] << 8) | r[5],
                                          r[R_A], pc, t, next_ev, dma_s, dma_e)
                            if lpass[0] >= 1:
                                r[4] = lpass[3] >> 8
                                r[5] = lpass[3] & 0xFF
                                r[lreg] = lpass[1]
                                r[R_F] = lpass[2]
                                t += lpass[4]
                                icount += lpass[5]
                                pc = lpass[6]
                                ran = int(1)
                                continue
                            if (qw0 & RUN_MAX) < 2:
                                break  # it starts with its store or DEC: the full path
                        # A run of NOPs or JR +0s (decode.QUICK_RUN): each one that starts
                        # before the next event runs, as one by one, outside OAM DMA.
                        qcyc = wp.where((qw0 & RUN_JR) != 0, 12, 4)
                        qn = wp.min(qw0 & 0xFF, (next_ev - t + qcyc - 1) // qcyc)
                        if t + qcyc * qn + 8 >= dma_s and tq < dma_e:
                            qn = 1  # the first one's fetch is checked above
                        r[R_F] = r[R_F] & 0xF0
                        t += qcyc * qn
                        pc = (pc + wp.where((qw0 & RUN_JR) != 0, 2, 1) * qn) & 0xFFFF
                        icount += qn
                        ran = int(1)
                        continue
                    n_q = qw0 & 3
                    qimm = qword & 0xFFFF
                    tn = tq + 4 * n_q  # the cycle after the immediates
                    pc_next = (pc + 1 + n_q) & 0xFFFF
                    if not on_gpu():
                        # (past the cartridge ROM, the entry of offset 0: the next pass
                        # leaves)
                        pf_pc = pc_next
                        pf = ld_v4i(pre_ptr, PRE_ENTRY_BYTES * wp.where(
                            pc_next <= 0x7FFF,
                            wp.where(pc_next < 0x4000, off_lo, off_hi) + pc_next, 0))
                    f0 = r[R_F]
                    # One branch per lane: its checks (a failed one leaves the loop before
                    # any effect), then its work. (A lone GPU thread runs one lane's
                    # branch, with one merge at the loop's end: checks and work in two
                    # separate dispatches on the lane made two.)
                    if qlane == LANE_JUMP:
                        t = tn
                        r[R_F] = f0 & 0xF0
                        jump = jump_lane(qw0, f0, pc_next, qimm, (r[4] << 8) | r[5])
                        pc = jump[0]
                        t += jump[1]
                    elif qlane == LANE_REG16:
                        w2q = qentry[2]
                        q16 = value16_host(field(w2q, SRC16_SHIFT, 3), r, sp, qimm,
                                           (r[4] << 8) | r[5])
                        if (q16 & 0xFF00) == 0xFE00:
                            break  # the OAM bug's page: the full path
                        t = tn
                        pc = pc_next
                        o16 = reg16_host(qentry[1], w2q, q16, (r[4] << 8) | r[5], qimm, f0)
                        r[R_F] = o16[1]
                        d16 = field(w2q, DST16_SHIFT, 3)
                        if d16 == R16_SP:
                            sp = o16[0]
                        else:
                            r[2 * d16] = o16[0] >> 8
                            r[2 * d16 + 1] = o16[0] & 0xFF
                        t += 4 * field(qw0, EXTRA_SHIFT, 2)
                    elif qlane == LANE_STACK:
                        w2q = qentry[2]
                        taken = cond(field(qw0, CC_SHIFT, 3), f0)
                        pops = field(qw0, NRD_SHIFT, 2) != 0  # POP, RET
                        if taken:
                            if pops:
                                tr = tn + 4 * field(qw0, RWAIT_SHIFT, 1)
                                if not (plain_ram(sp) and plain_ram((sp + 1) & 0xFFFF)):
                                    break
                                if tr + 8 >= dma_s and tr + 4 < dma_e:
                                    break  # a read's M-cycle falls in OAM DMA
                            elif (sp & 0xFF00) == 0xFE00 or not (
                                plain_ram((sp - 1) & 0xFFFF) and plain_ram((sp - 2) & 0xFFFF)
                            ):
                                break  # PUSH, CALL, RST elsewhere, or the OAM bug's page
                        t = tn
                        pc = pc_next
                        r[R_F] = f0 & 0xF0
                        t += 4 * field(qw0, RWAIT_SHIFT, 1)
                        if taken:
                            if pops:
                                lo = plain_get(g, env, sp)
                                hi = plain_get(g, env, (sp + 1) & 0xFFFF)
                                t += 8
                                sp = (sp + 2) & 0xFFFF
                                d16 = field(w2q, DST16_SHIFT, 3)
                                if d16 == D16_NONE:
                                    pc = (hi << 8) | lo
                                elif d16 == R16_AF:
                                    r[R_A] = hi
                                    r[R_F] = lo & 0xF0
                                else:
                                    r[2 * d16] = hi
                                    r[2 * d16 + 1] = lo
                            else:  # PUSH, CALL, RST
                                v16 = push_value_host(w2q, r, sp, qimm, pc, f0)
                                pc = push_target_host(qw0, pc, qimm, (qword >> 16) & 0xFF)
                                plain_set(g, env, (sp - 1) & 0xFFFF, v16 >> 8)
                                plain_set(g, env, (sp - 2) & 0xFFFF, v16 & 0xFF)
                                t += 12
                                sp = (sp - 2) & 0xFFFF
                            t += 4 * field(qw0, EXTRA_SHIFT, 2)
                    else:  # LANE_REG8, LANE_LOAD8, LANE_STORE8
                        w1q = qentry[1]
                        w2q = qentry[2]
                        qa = int(0)  # the byte's address (loads and stores)
                        if qlane != LANE_REG8:
                            # (for BIT b,(HL) the prefix's word 2, equal to its own:
                            # decode.rom_predecode checks it)
                            qa = bus_address_host(
                                field(qw0, wp.where(qlane == LANE_LOAD8, RADDR_SHIFT,
                                                    WADDR_SHIFT), 3),
                                r, sp, qimm)
                            # WRAM and HRAM (not IE); loads also ROM, outside the boot ROM.
                            ram = plain_ram(qa)
                            if qlane == LANE_LOAD8:
                                if not (ram or (qa < 0x8000 and (qa >= 0x100 or g.has_boot == 0))):
                                    break
                                if tn + 4 < dma_e and tn + 4 >= dma_s:
                                    break  # the read's M-cycle falls in OAM DMA
                            elif not ram:
                                break
                        t = tn
                        pc = pc_next
                        if qlane == LANE_STORE8:
                            src = field(w1q, SRC8_SHIFT, 4)
                            vq = qimm & 0xFF
                            if src != S8_IMM:
                                vq = r[src]
                            r[R_F] = f0 & 0xF0
                            t += 4
                            plain_set(g, env, qa, vq)
                            if field(w2q, DST16_SHIFT, 3) == R16_HL:  # (HL+) / (HL-)
                                hl1 = ((r[4] << 8) | r[5]) + hl_step(w2q)
                                r[4] = (hl1 >> 8) & 0xFF
                                r[5] = hl1 & 0xFF
                        else:  # LANE_REG8, LANE_LOAD8
                            vq = qimm & 0xFF
                            if qlane == LANE_LOAD8:
                                t += 4
                                if qa >= 0xC000:
                                    vq = plain_get(g, env, qa)
                                else:
                                    vq = ld_u8(rom_ptr, wp.where(qa < 0x4000, off_lo, off_hi) + qa)
                            else:
                                src = field(w1q, SRC8_SHIFT, 4)
                                if src != S8_IMM:
                                    vq = r[src]
                            # (a CB-prefixed instruction's opcode is its second byte)
                            oq = alu8_host(w1q, r[R_A], vq, f0, (qword >> 16) & 0xFF)
                            r[R_F] = oq & 0xFF
                            dq = field(w1q, DST8_SHIFT, 4)
                            if dq < 8:
                                r[dq] = oq >> 8
                            if qlane == LANE_LOAD8 and field(w2q, DST16_SHIFT, 3) == R16_HL:
                                hl1 = ((r[4] << 8) | r[5]) + hl_step(w2q)
                                r[4] = (hl1 >> 8) & 0xFF
                                r[5] = hl1 & 0xFF
                    icount += 1
                    ran = int(1)
                if ran != 0:
                    continue

        if wp.static(PHASE_CLOCKS):
            c0 = cycle_clock()
            clk[1] += c0 - c1
            clk[ROW_LANES] += wp.int64(live_lanes())
            clk[ROW_FETCHES] += wp.int64(1)
        # ---- fetch: opcode, then its immediate bytes (little-endian in imm)
        t += 4
        # Code in cartridge ROM (nearly all of it) is read three bytes at once, the opcode
        # and the two that may be its immediates: ROM reads have no side effects and their
        # cycle does not matter outside OAM DMA, so the loads need not wait for each other
        # or for the descriptor. Elsewhere (RAM, boot ROM, during DMA) every byte is read
        # at its own M-cycle.
        fast = pc <= 0x7FFD and (pc >= 0x100 or g.has_boot == 0) and (
            t + 8 < dma_s or t >= dma_e
        )
        op = int(0)
        b1 = int(0)
        b2 = int(0)
        desc = int(0)
        w0 = int(0)
        w1 = int(0)
        w2 = int(0)
        imm = int(0)
        code = int(0)
        if wp.static(HOST):
            # One CPU thread: the three bytes in one load when they lie in one bank.
            if fast and (pc & 0x3FFF) <= 0x3FFC:
                word = ld_u32(rom_ptr, wp.where(pc < 0x4000, off_lo, off_hi) + pc)
                op = word & 0xFF
                b1 = (word >> 8) & 0xFF
                b2 = (word >> 16) & 0xFF
            elif fast:
                op = rom_code_byte(g, pc, bank0, bankx)
                b1 = rom_code_byte(g, pc + 1, bank0, bankx)
                b2 = rom_code_byte(g, pc + 2, bank0, bankx)
            else:
                op = rd_cpu(g, env, pc, t, bank0, bankx, dma_s, dma_e)
            desc = op * DESC_BYTES
            w0 = ld_i32(g.dec_ptr, desc)
            w1 = ld_i32(g.dec_ptr, desc + 4)
            w2 = ld_i32(g.dec_ptr, desc + 8)
            if halt_bug != 0:
                # PC was not advanced past the opcode: its byte is read again as the next one.
                halt_bug = int(0)
                b2 = b1
                b1 = op
            else:
                pc = (pc + 1) & 0xFFFF
            icount += 1
            n_imm = w0 & 3
            if not fast:
                # The immediates one by one, each at its own M-cycle (after the opcode's); PC
                # and the cycle move on below, as for code read from ROM.
                k = int(0)
                while k < n_imm:
                    v = rd_cpu(g, env, (pc + k) & 0xFFFF, t + 4 * (k + 1), bank0, bankx, dma_s,
                               dma_e)
                    b1 = wp.where(k == 0, v, b1)
                    b2 = wp.where(k == 1, v, b2)
                    k += 1
            imm = wp.where(n_imm >= 1, b1, 0) | wp.where(n_imm == 2, b2 << 8, 0)
            t += 4 * n_imm
            pc = (pc + n_imm) & 0xFFFF
            # CB-prefixed: the immediate is the second opcode byte, with its own descriptor.
            code = wp.where(op == 0xCB, imm & 0xFF, op)
            if op == 0xCB:
                desc = (CB_BASE + code) * DESC_BYTES
                w0 = ld_i32(g.dec_ptr, desc)
                w1 = ld_i32(g.dec_ptr, desc + 4)
                w2 = ld_i32(g.dec_ptr, desc + 8)
        if wp.static(not HOST):
            # The instruction as a predecoded entry (decode.rom_predecode_entries): for code
            # in one ROM bank, the byte's entry, one load that waits only for PC where the
            # code bytes and then the descriptor at the opcode are two loads, the second
            # waiting for the first; elsewhere (RAM, boot ROM, OAM DMA, a bank's last
            # bytes, the HALT bug) the same fields from the bytes one by one, so that the
            # paths join in four values.
            ent = wp.vec4i()
            if fast and (pc & 0x3FFF) <= 0x3FFC and halt_bug == 0:
                # A register load and the instruction after it in one pass
                # (decode.rom_fused_entries, which follow the other entries) where nothing
                # can come between them: no event due before the load ends, no interrupt
                # to take, no EI delay, the second opcode fetched before OAM DMA.
                # (An INC/DEC rr on FE00-FEFF has the OAM bug: no register pair there.)
                fuse = (t + FUSE_MAX_CYCLES - 4 < next_ev and ei_delay == 0
                        and (ime == 0 or irq == 0)
                        and (t + FUSE_MAX_CYCLES + 8 < dma_s or t >= dma_e)
                        and r[0] != 0xFE and r[2] != 0xFE and r[4] != 0xFE
                        and (sp >> 8) != 0xFE)
                ent = ld_v4i(g.dec_ptr + wp.uint64(DESC_TABLE_BYTES), PRE_ENTRY_BYTES * (
                    ((wp.where(pc < 0x4000, bank0, bankx) * 0x4000) & g.rom_mask)
                    + (pc & 0x3FFF) + wp.where(fuse, g.rom_mask + 2, 0)))
            else:
                if fast:
                    op = rom_code_byte(g, pc, bank0, bankx)
                    b1 = rom_code_byte(g, pc + 1, bank0, bankx)
                    b2 = rom_code_byte(g, pc + 2, bank0, bankx)
                else:
                    op = rd_cpu(g, env, pc, t, bank0, bankx, dma_s, dma_e)
                n_op = ld_i32(g.dec_ptr, op * DESC_BYTES) & 3
                if halt_bug != 0:
                    # PC was not advanced past the opcode: its byte is read again as the
                    # next one.
                    halt_bug = int(0)
                    b2 = b1
                    b1 = op
                    pc = (pc - 1) & 0xFFFF
                if not fast:
                    # The immediates one by one, each at its own M-cycle (after the
                    # opcode's).
                    k = int(0)
                    while k < n_op:
                        v = rd_cpu(g, env, (pc + 1 + k) & 0xFFFF, t + 4 * (k + 1), bank0,
                                   bankx, dma_s, dma_e)
                        b1 = wp.where(k == 0, v, b1)
                        b2 = wp.where(k == 1, v, b2)
                        k += 1
                imm = wp.where(n_op >= 1, b1, 0) | wp.where(n_op == 2, b2 << 8, 0)
                # CB-prefixed: the immediate is the second opcode byte, with its own
                # descriptor.
                code = wp.where(op == 0xCB, imm & 0xFF, op)
                desc = wp.where(op == 0xCB, CB_BASE + code, op) * DESC_BYTES
                wd = ld_i32(g.dec_ptr, desc)
                ent = wp.vec4i(
                    (wd & ((1 << QUICK_SHIFT) - 4)) | n_op,
                    ld_i32(g.dec_ptr, desc + 4),
                    ld_i32(g.dec_ptr, desc + 8),
                    imm | (code << 16) | (((wd >> QUICK_SHIFT) & 7) << PRE_SPECIAL_SHIFT)
                    | wp.where(op == 0xCB, PRE_CB, 0))
            w1 = ent[1]
            w2 = ent[2]
            code = (ent[3] >> 16) & 0xFF
            op = wp.where((ent[3] & PRE_CB) != 0, 0xCB, code)
            w0 = (ent[0] & ((1 << QUICK_SHIFT) - 1)) | (
                ((ent[3] >> PRE_SPECIAL_SHIFT) & 7) << QUICK_SHIFT)
            if (ent[0] >> QUICK_SHIFT) == QUICK_RUN:
                w0 = ld_i32(g.dec_ptr, op * DESC_BYTES)  # where a run or loop starts
            n_imm = w0 & 3
            imm = ent[3] & 0xFFFF
            icount += 1
            t += 4 * n_imm
            # The entry's register load (decode.FUSE_KIND_SHIFT; none: fk 0), as that
            # instruction alone would run, before this one's work (which sees its result)
            # and memory accesses (which come its cycles later). Selects only: a branch
            # here would cost each pass more than the passes it saves. First a 16-bit
            # one's register pair (fp 4: none, for the other kinds) ...
            fk = (w2 >> FUSE_KIND_SHIFT) & 7
            fp = ((w2 >> FUSE_PAIR_SHIFT) & 3) | wp.where(
                fk == FUSE_NONE or fk >= FUSE_REG8, 4, 0)
            fv = wp.where((fp & 1) != 0, (r[2] << 8) | r[3], (r[0] << 8) | r[1])
            fv = wp.where((fp & 2) != 0, wp.where((fp & 1) != 0, sp, (r[4] << 8) | r[5]), fv)
            fv = wp.where(fk == FUSE_SP_OFFSET, sp, wp.where(fk == FUSE_LOAD, 0, fv))
            fadd = (w2 >> FUSE_ADD_SHIFT) & 0xFFFF
            # LD HL,SP+e: Z and N cleared, H and C from the low byte's sum
            r[R_F] = wp.where(fk == FUSE_SP_OFFSET, wp.where(
                (fv & 0xF) + (fadd & 0xF) > 0xF, 0x20, 0) | wp.where(
                (fv & 0xFF) + (fadd & 0xFF) > 0xFF, 0x10, 0), r[R_F])
            fv = (fv + fadd) & 0xFFFF
            r[0] = wp.where(fp == 0, fv >> 8, r[0])
            r[1] = wp.where(fp == 0, fv & 0xFF, r[1])
            r[2] = wp.where(fp == 1, fv >> 8, r[2])
            r[3] = wp.where(fp == 1, fv & 0xFF, r[3])
            r[4] = wp.where(fp == 2, fv >> 8, r[4])
            r[5] = wp.where(fp == 2, fv & 0xFF, r[5])
            sp = wp.where(fp == FUSE_PAIR_SP, fv, sp)
            # ... then an 8-bit one's register (8: none, for the other kinds)
            r = rset(r, wp.where(fk >= FUSE_REG8, fadd & 7, 8), wp.where(
                fk == FUSE_IMM8, (fadd >> 3) & 0xFF, rget(r, (fadd >> 3) & 7)))
            # its cycles, its count and its length (two bits per kind in constants)
            t += 4 * ((FUSE_MCYCLES >> (2 * fk)) & 3)
            icount += wp.min(fk, 1)
            pc = (pc + 1 + n_imm + ((FUSE_LENGTHS >> (2 * fk)) & 3)) & 0xFFFF
        if wp.static(PHASE_CLOCKS):
            c1 = cycle_clock()
            clk[2] += c1 - c0
        if wp.static(HOST):
            # One CPU thread: the commonest simple instructions take a short lane
            # (decode.LANE_*), with the generic path's results.
            lane = ld_i32(g.dec_ptr, desc + 12)
            if lane != LANE_GENERIC:
                f0 = r[R_F]
                if lane == LANE_JUMP:
                    r[R_F] = f0 & 0xF0
                    jump = jump_lane(w0, f0, pc, imm, (r[4] << 8) | r[5])
                    pc = jump[0]
                    t += jump[1]
                    if (code == 0x20 and (imm & 0xFF) == 0xFD and jump[1] != 0
                            and pc >= 0xFF80 and pc <= 0xFFFC and ei_delay == 0
                            and (ime == 0 or irq == 0)):
                        # `DEC r; JR NZ, -3` in HRAM (countdown.hram_loop_word), taken
                        # back: its passes at once, as in the CUDA variant. Loops in
                        # ROM are the inner loop's.
                        lw = hram_loop_word(mget(g, env, HRAM_OFF + (pc - 0xFF80)),
                                            ld_i32(pre_ptr, PRE_ENTRY_BYTES * (g.rom_mask + 1)))
                        if lw != 0:
                            lreg = field(lw, LOOP_REG_SHIFT, 3)
                            lpass = loop_run(g, env, lw, r[lreg], r[R_F], (r[4] << 8) | r[5],
                                          r[R_A], pc, t, next_ev, dma_s, dma_e)
                            if lpass[0] >= 1:
                                r[lreg] = lpass[1]
                                r[R_F] = lpass[2]
                                t += lpass[4]
                                icount += lpass[5]
                                pc = lpass[6]
                elif lane == LANE_STORE8:
                    wa = bus_address_host(field(w0, WADDR_SHIFT, 3), r, sp, imm)
                    src0 = field(w1, SRC8_SHIFT, 4)
                    v0 = imm & 0xFF
                    if src0 != S8_IMM:
                        v0 = r[src0]
                    r[R_F] = f0 & 0xF0
                    t += 4
                    if wr_cpu(g, env, wa & 0xFFFF, v0 & 0xFF, t) != 0:
                        next_ev = int(STALE)
                elif lane == LANE_REG16:
                    hl0 = (r[4] << 8) | r[5]
                    v16 = value16_host(field(w2, SRC16_SHIFT, 3), r, sp, imm, hl0)
                    if (v16 & 0xFF00) == 0xFE00:  # OAM bug: inc/dec rr, ld sp,hl
                        oam_bug_idu(g.ref, env, w0, w2, t)
                    o16 = reg16_host(w1, w2, v16, hl0, imm, f0)
                    r[R_F] = o16[1]
                    d16 = field(w2, DST16_SHIFT, 3)
                    if d16 == R16_SP:
                        sp = o16[0]
                    else:
                        r[2 * d16] = o16[0] >> 8  # BC DE HL: registers 0-1, 2-3, 4-5
                        r[2 * d16 + 1] = o16[0] & 0xFF
                    t += 4 * field(w0, EXTRA_SHIFT, 2)
                elif lane == LANE_STACK:
                    r[R_F] = f0 & 0xF0
                    t += 4 * field(w0, RWAIT_SHIFT, 1)
                    if cond(field(w0, CC_SHIFT, 3), f0):
                        if field(w0, NRD_SHIFT, 2) != 0:  # POP, RET: two bytes from SP
                            if (sp & 0xFF00) == 0xFE00:  # OAM bug: SP steps as it reads
                                oam_bug_read_idu(g.ref, env, w0, w2, t + 4)
                            t += 4
                            lo = rd_cpu(g, env, sp, t, bank0, bankx, dma_s, dma_e)
                            t += 4
                            hi = rd_cpu(g, env, (sp + 1) & 0xFFFF, t, bank0, bankx,
                                        dma_s, dma_e)
                            sp = (sp + 2) & 0xFFFF
                            d16 = field(w2, DST16_SHIFT, 3)
                            if d16 == D16_NONE:
                                pc = (hi << 8) | lo
                            elif d16 == R16_AF:
                                r[R_A] = hi
                                r[R_F] = lo & 0xF0
                            else:
                                r[2 * d16] = hi  # BC DE HL: registers 0-1, 2-3, 4-5
                                r[2 * d16 + 1] = lo
                        else:  # PUSH, CALL, RST: high byte at SP-1, low at SP-2
                            v16 = push_value_host(w2, r, sp, imm, pc, f0)
                            pc = push_target_host(w0, pc, imm, code)
                            if (sp & 0xFF00) == 0xFE00:  # OAM bug: SP on the bus
                                oam_bug_idu(g.ref, env, w0, w2, t)
                            t += 8
                            if wr_cpu(g, env, (sp - 1) & 0xFFFF, v16 >> 8, t) != 0:
                                next_ev = int(STALE)
                            t += 4
                            if wr_cpu(g, env, (sp - 2) & 0xFFFF, v16 & 0xFF, t) != 0:
                                next_ev = int(STALE)
                            sp = (sp - 2) & 0xFFFF
                        t += 4 * field(w0, EXTRA_SHIFT, 2)
                else:  # LANE_REG8, LANE_LOAD8, LANE_RMW8
                    src0 = field(w1, SRC8_SHIFT, 4)
                    v0 = imm & 0xFF
                    ra = int(0)
                    if lane != LANE_REG8:
                        ra = bus_address_host(field(w0, RADDR_SHIFT, 3), r, sp, imm) & 0xFFFF
                        if (ra & 0xFF00) == 0xFE00:  # OAM bug: (HL+) / (HL-) step
                            oam_bug_read_idu(g.ref, env, w0, w2, t + 4)
                        t += 4
                        v0 = rd_cpu(g, env, ra, t, bank0, bankx, dma_s, dma_e) & 0xFF
                    elif src0 != S8_IMM:
                        v0 = r[src0]
                    o0 = alu8_host(w1, r[R_A], v0, f0, code)
                    r[R_F] = o0 & 0xFF
                    d0 = field(w1, DST8_SHIFT, 4)
                    if d0 < 8:
                        r[d0] = o0 >> 8
                    if lane == LANE_RMW8:
                        t += 4
                        if wr_cpu(g, env, ra, (o0 >> 8) & 0xFF, t) != 0:
                            next_ev = int(STALE)
                if (lane == LANE_LOAD8 or lane == LANE_STORE8) and field(
                    w2, DST16_SHIFT, 3
                ) == R16_HL:  # (HL+) / (HL-): HL steps after the access
                    hl1 = ((r[4] << 8) | r[5]) + hl_step(w2)
                    r[4] = (hl1 >> 8) & 0xFF
                    r[5] = hl1 & 0xFF
                if ei_delay > 0:
                    ei_delay -= 1
                    if ei_delay == 0:
                        ime = int(1)
                continue
        f = r[R_F]
        a = r[R_A]
        hl = pair(r, 4)
        taken = cond(field(w0, CC_SHIFT, 3), f)
        e = imm & 0xFF

        # ---- reads: n_rd bytes from raddr (little-endian in rv), after r_wait cycles
        # Both addresses come from the registers before this instruction.
        if wp.static(HOST):
            # One CPU thread: an address only for an instruction that uses it.
            n_rd = wp.where(taken, field(w0, NRD_SHIFT, 2), 0)
            raddr = int(0)
            waddr = int(0)
            if n_rd != 0:
                raddr = bus_address_host(field(w0, RADDR_SHIFT, 3), r, sp, imm)
            if taken and field(w0, NWR_SHIFT, 2) != 0:
                waddr = bus_address_host(field(w0, WADDR_SHIFT, 3), r, sp, imm)
            t += 4 * field(w0, RWAIT_SHIFT, 1)
            if (raddr & 0xFF00) == 0xFE00 and n_rd != 0:
                # DMG OAM corruption bug: an increment/decrement in the first read's M-cycle.
                oam_bug_read_idu(g.ref, env, w0, w2, t + 4)
            rv = int(0)
            k = int(0)
            while k < n_rd:
                t += 4
                ra = (raddr + k) & 0xFFFF
                rv = rv | (rd_cpu(g, env, ra, t, bank0, bankx, dma_s, dma_e) << (8 * k))
                k += 1
        else:
            raddr = bus_address(field(w0, RADDR_SHIFT, 3), r, sp, imm)
            waddr = bus_address(field(w0, WADDR_SHIFT, 3), r, sp, imm)
            t += 4 * field(w0, RWAIT_SHIFT, 1)
            n_rd = wp.where(taken, field(w0, NRD_SHIFT, 2), 0)
            # DMG OAM corruption bug: the 16-bit increment/decrement unit puts a value on the
            # address bus in the next M-cycle: the first read's address (pop, ret, ld a,
            # [hl+/-]) or, without reads, the 16-bit source (inc/dec rr, ld sp,hl) or SP
            # (push, call, rst). One compare at one site; the rest out of line (oam_bug.py)
            # when the value lies in FE00-FEFF. The source's register pairs are selected
            # here, and the register work below adds the other sources.
            src16 = field(w2, SRC16_SHIFT, 3)
            spd = field(w0, SPD_SHIFT, 2)
            v16 = wp.where(src16 == R16_SP, sp, hl)
            v16 = wp.where(src16 == R16_BC, pair(r, 0), v16)
            v16 = wp.where(src16 == R16_DE, pair(r, 2), v16)
            bus16 = wp.where(n_rd != 0, raddr, wp.where(spd == SPD_PUSH, sp, v16))
            if (bus16 & 0xFF00) == 0xFE00 and taken:
                oam_bug_unit(g.ref, env, w0, w2, t + 4)
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
        # ---- register work: the same operations for every opcode, driven by its
        # descriptor (decode.py); a write is planned as n_wr bytes of wval (low byte first)
        # to waddr, waddr + wstep, after w_wait cycles
        if wp.static(HOST):
            # One CPU thread: the register work branches on the descriptor and computes
            # only what the instruction uses; the results are those of the branch-free
            # code below, which a GPU warp runs once for all its Game Boys.
            src8 = field(w1, SRC8_SHIFT, 4)
            v8 = e
            if src8 == S8_MEM:
                v8 = rv & 0xFF
            elif src8 != S8_IMM:
                v8 = r[src8]
            op8 = field(w1, OP8_SHIFT, 5)
            out8 = v8 << 8
            if op8 != OP_LD:
                out8 = alu_host(op8, a, v8, f, (code >> 3) & 7)
            res8 = out8 >> 8
            vsel = field(w0, WVAL_SHIFT, 2)
            f16 = field(w1, F16_SHIFT, 1)
            dst16 = field(w2, DST16_SHIFT, 3)
            out16 = int(0)
            v16 = int(0)  # computed when the instruction uses it (it then may use the IDU)
            if dst16 != D16_NONE or vsel != W_RES8 or f16 != 0:
                src16 = field(w2, SRC16_SHIFT, 3)
                v16 = value16_host(src16, r, sp, imm, hl)
                if src16 == R16_MEM:
                    v16 = rv
                elif src16 == R16_PC:
                    v16 = pc
                op16 = field(w2, OP16_SHIFT, 3)
                out16 = v16 << 8
                if op16 != OP16_PASS:
                    out16 = add16(op16, v16, hl, e)
            res16 = out16 >> 8
            # DMG OAM corruption bug (see below): every instruction that uses the 16-bit
            # increment/decrement unit computes v16 above.
            spd = field(w0, SPD_SHIFT, 2)
            if (wp.where(spd == SPD_PUSH, sp, v16) & 0xFF00) == 0xFE00 and taken:
                oam_bug_idu(g.ref, env, w0, w2, t)
            calc = wp.where(f16 != 0, out16 & 0xF0, out8 & 0xF0)
            r[R_F] = (
                (f & (field(w1, FKEEP_SHIFT, 4) << 4))
                | (field(w1, FSET_SHIFT, 4) << 4)
                | (calc & (field(w1, FCALC_SHIFT, 4) << 4))
            )
            dst8 = field(w1, DST8_SHIFT, 4)
            if dst8 < 8:
                r[dst8] = res8
            if dst16 != D16_NONE:
                hi = res16 >> 8
                lo = res16 & 0xFF
                if dst16 == R16_BC:
                    r[0] = hi
                    r[1] = lo
                elif dst16 == R16_DE:
                    r[2] = hi
                    r[3] = lo
                elif dst16 == R16_HL:
                    r[4] = hi
                    r[5] = lo
                elif dst16 == R16_AF:
                    r[R_A] = hi
                    r[R_F] = lo & 0xF0
                elif dst16 == R16_SP:
                    sp = res16
            wstep = 1 - 2 * field(w0, WDOWN_SHIFT, 1)
            wval = res8
            if vsel == W_RES16:
                wval = res16
            elif vsel == W_PUSH:
                wval = ((res16 & 0xFF) << 8) | (res16 >> 8)
        else:
            src8 = field(w1, SRC8_SHIFT, 4)
            v8 = wp.where(src8 == S8_MEM, rv & 0xFF, wp.where(src8 == S8_IMM, e, rget(r, src8)))
            # The ALU, the adder, the 16-bit destination and (below) the jump target run
            # for every instruction, without guards: a warp's threads nearly always include
            # one that needs each (the ALU was entered in 87% of passes), so a guard only
            # added its branch and its join to every pass (1.03x at 65,536 envs).
            op8 = field(w1, OP8_SHIFT, 5)
            out8 = alu(op8, a, v8, f, (code >> 3) & 7)
            res8 = out8 >> 8
            v16 = wp.where(src16 == R16_AF, (a << 8) | f, v16)
            v16 = wp.where(src16 == R16_IMM, imm, v16)
            v16 = wp.where(src16 == R16_MEM, rv, v16)
            v16 = wp.where(src16 == R16_PC, pc, v16)
            out16 = add16(field(w2, OP16_SHIFT, 3), v16, hl, e)
            res16 = out16 >> 8
            # flags: kept | forced | computed (by the 8-bit ALU or the 16-bit adder)
            calc = wp.where(field(w1, F16_SHIFT, 1) != 0, out16 & 0xF0, out8 & 0xF0)
            r[R_F] = (
                (f & (field(w1, FKEEP_SHIFT, 4) << 4))
                | (field(w1, FSET_SHIFT, 4) << 4)
                | (calc & (field(w1, FCALC_SHIFT, 4) << 4))
            )
            r = rset(r, field(w1, DST8_SHIFT, 4), res8)
            dst16 = field(w2, DST16_SHIFT, 3)
            hi = res16 >> 8
            lo = res16 & 0xFF
            r[0] = wp.where(dst16 == R16_BC, hi, r[0])
            r[1] = wp.where(dst16 == R16_BC, lo, r[1])
            r[2] = wp.where(dst16 == R16_DE, hi, r[2])
            r[3] = wp.where(dst16 == R16_DE, lo, r[3])
            r[4] = wp.where(dst16 == R16_HL, hi, r[4])
            r[5] = wp.where(dst16 == R16_HL, lo, r[5])
            r[R_A] = wp.where(dst16 == R16_AF, hi, r[R_A])
            r[R_F] = wp.where(dst16 == R16_AF, lo & 0xF0, r[R_F])
            sp = wp.where(dst16 == R16_SP, res16, sp)
            # writes (to waddr, chosen with the read address above)
            wstep = 1 - 2 * field(w0, WDOWN_SHIFT, 1)
            vsel = field(w0, WVAL_SHIFT, 2)
            wval = wp.where(vsel == W_RES16, res16, res8)
            wval = wp.where(vsel == W_PUSH, ((res16 & 0xFF) << 8) | (res16 >> 8), wval)
        n_wr = wp.where(taken, field(w0, NWR_SHIFT, 2), 0)
        w_wait = wp.where(taken, 4 * field(w0, WWAIT_SHIFT, 1), 0)
        # stack pointer, program counter, internal cycles (only when the condition holds)
        sp = wp.where(taken and spd == SPD_POP, (sp + 2) & 0xFFFF, sp)
        sp = wp.where(taken and spd == SPD_PUSH, (sp - 2) & 0xFFFF, sp)
        psel = wp.where(taken, field(w0, PC_SHIFT, 3), PC_KEEP)
        if wp.static(not HOST and CUDA_LOOPS and not PHASE_CLOCKS):
            pc_next = pc  # the next instruction's address: a jump back goes below it
        if wp.static(HOST):
            if psel != PC_KEEP:
                pc = jump_target(psel, pc, imm, hl, rv, code)
        else:
            pc = jump_target(psel, pc, imm, hl, rv, code)  # PC_KEEP: pc (see the ALU above)
        t += wp.where(taken, 4 * field(w0, EXTRA_SHIFT, 2), 0)
        if wp.static(not HOST and CUDA_LOOPS and not PHASE_CLOCKS):
            # A JR NZ / JP NZ taken back to the start of a countdown or fill loop
            # (decode.RUN_LOOP, or countdown.hram_loop_word in HRAM) where no interrupt
            # can be taken (IME or the pending requests 0, no EI delay): the passes that
            # end with the jump back and whose jump starts before the next event run at
            # once. Checked only here, after a pass ran one by one, so the path of every
            # other instruction loads nothing more; a thread in a loop spends one
            # iteration on its passes while the warp's other threads run one instruction
            # each. Below 0x100 a boot ROM may be mapped: no loop is taken there.
            # The same where the instruction fell through into a loop's start
            # (decode.INTO_LOOP: its entry's word 2 is negative), so that the loop's
            # first pass does not run one by one either.
            if ((w2 < 0 or (taken and (op == 0x20 or op == 0xC2) and pc < pc_next))
                    and ei_delay == 0 and (ime == 0 or irq == 0)):
                lw = int(0)
                if pc >= 0x100 and pc <= 0x7FFD and (pc & 0x3FFF) <= 0x3FFC:
                    lw = ld_i32(g.dec_ptr + wp.uint64(DESC_TABLE_BYTES), PRE_ENTRY_BYTES * (
                        ((wp.where(pc < 0x4000, bank0, bankx) * 0x4000) & g.rom_mask)
                        + (pc & 0x3FFF)))
                    if (lw >> QUICK_SHIFT) != QUICK_RUN or (lw & RUN_LOOP) == 0:
                        lw = int(0)
                elif pc >= 0xFF80 and pc <= 0xFFFC and op == 0x20 and e == 0xFD:
                    lw = hram_loop_word(mget(g, env, HRAM_OFF + (pc - 0xFF80)), ld_i32(
                        g.dec_ptr + wp.uint64(DESC_TABLE_BYTES),
                        PRE_ENTRY_BYTES * (g.rom_mask + 1)))
                if lw != 0:
                    lreg = field(lw, LOOP_REG_SHIFT, 3)
                    lpass = loop_run(g, env, lw, rget(r, lreg), r[R_F], pair(r, 4), r[R_A], pc,
                                  t, next_ev, dma_s, dma_e)
                    if lpass[0] >= 1:
                        r[4] = lpass[3] >> 8
                        r[5] = lpass[3] & 0xFF
                        r = rset(r, lreg, lpass[1])
                        r[R_F] = lpass[2]
                        t += lpass[4]
                        icount += lpass[5]
                        pc = lpass[6]
        special = field(w0, SPECIAL_SHIFT, 3)
        if special != SP_NONE:
            if special == SP_HALT:
                if ime == 0 and irq != 0:
                    halt_bug = int(1)
                else:
                    halted = int(1)
            elif special == SP_STOP:  # skips a byte, resets DIV, sleeps until a button press
                pc = (pc + 1) & 0xFFFF
                wr(g, env, 0xFF04, 0, t)
                halted = int(2)
                next_ev = int(STALE)
            elif special == SP_DI:
                ime = int(0)
                ei_delay = int(0)
            elif special == SP_EI:  # takes effect after the next instruction
                if ime == 0 and ei_delay == 0:
                    ei_delay = int(2)
            elif special == SP_RETI:
                ime = int(1)
                ei_delay = int(0)
            # No writes (no special instruction has any): the end of the instruction here,
            # so the common path does not join this block's values.
            if wp.static(PHASE_CLOCKS):
                clk[4] += cycle_clock() - c0
            if special > SP_RETI:
                # Illegal opcode: the env freezes with PC at the opcode; others continue.
                locked = int(FAULT_ILLEGAL_OPCODE)
                pc = (pc - 1) & 0xFFFF
                break
            if ei_delay > 0:
                ei_delay -= 1
                if ei_delay == 0:
                    ime = int(1)
            continue

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



# The CPU variant: the same function, generated with HOST = True (see HOST above) into a
# Warp module of its own. Every Warp function that reads HOST itself (ppu_timing's
# ppu_advance) or calls one that does is copied into the CPU module, its copy seeing
# HOST = True and calling the copies, so the CUDA variant's functions stay as they are.
def _host_function(func: Any, replace: dict[str, Any]) -> Any:
    """A copy of the Python function ``func`` that sees HOST = True and ``replace``."""
    copy = types.FunctionType(func.__code__, {**func.__globals__, "HOST": True, **replace},
                              func.__name__, func.__defaults__, func.__closure__)
    copy.__annotations__ = dict(func.__annotations__)
    copy.__qualname__ = func.__qualname__
    copy.__module__ = func.__module__
    return copy


def _global_names(func: Any) -> set[str]:
    """The global names the Python function ``func`` uses (nested code included)."""
    names = set(func.__code__.co_names)
    for const in func.__code__.co_consts:
        if isinstance(const, types.CodeType):
            names |= set(const.co_names)
    return names


def _referenced_functions(func: Any) -> dict[str, Any]:
    """The Warp functions the Python function ``func`` names as globals."""
    return {n: v for n in _global_names(func)
            if isinstance(v := func.__globals__.get(n), type(ppu_advance))}


def _host_replacements(func: Any, done: dict[int, Any]) -> dict[str, Any]:
    """Global names in ``func`` to rebind in its CPU copy: every Warp function it calls
    that reads HOST, or reaches one that does, to that function's CPU copy (made once, in
    ``done``, keyed by the original's id; None for functions that need none)."""
    replace: dict[str, Any] = {}
    for name, fn in _referenced_functions(func).items():
        if id(fn) not in done:
            done[id(fn)] = None  # a cycle through fn does not make it read HOST
            sub = _host_replacements(fn.func, done)
            if sub or "HOST" in _global_names(fn.func):
                hint = {"forceinline": True, "noinline": False}.get(fn.inline_hint or "")
                done[id(fn)] = wp.func(_host_function(fn.func, sub), name=f"{fn.key}_host",
                                       module=HOST_MODULE, inline=hint)
        if done[id(fn)] is not None:
            replace[name] = done[id(fn)]
    return replace


run_kernel_host = wp.kernel(
    _host_function(run_kernel.func, _host_replacements(run_kernel.func, {})),
    name="run_kernel_host", module=HOST_MODULE,
)
