"""The SM83 instruction set as data: one descriptor per opcode, read by the run kernel.

The run kernel executes every instruction with the same sequence of operations: fetch,
immediates, reads, one 8-bit ALU, one 16-bit adder, register write-back, writes. What
differs between opcodes (which register is the source, which ALU operation, where the
write goes, how many cycles an internal step takes) is looked up here instead of being
branched on. The 32 Game Boys of a GPU warp run different opcodes at the same time; with
a tree of branches the warp ran every distinct path in turn, with a table all of them run
one path together.

``decode_table()`` builds the table once on the host: 512 descriptors (the 256 opcodes,
then the 256 CB-prefixed ones at ``CB_BASE + byte``), each ``WORDS`` int32 words.
Field positions are the ``*_SHIFT`` / width constants below; the kernel reads them with
the same constants (``cpu.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

WORDS = 4  # int32 words per descriptor (16-byte aligned entries; the fourth: LANE_*)
CB_BASE = 256

# 8-bit operand selectors (src8 / dst8). Registers use their vector index (layout.R_*:
# B C D E H L F A = 0..7); 6 is never F as an operand, it is the memory byte at (HL).
S8_MEM = 6  # src8: the byte read in the read phase
S8_IMM = 8  # src8: the immediate byte
D8_MEM = 8  # dst8: written to memory (the write phase's value is the ALU result)
D8_NONE = 9

# 8-bit ALU operations.
(OP_LD, OP_ADD, OP_ADC, OP_SUB, OP_SBC, OP_AND, OP_XOR, OP_OR, OP_CP, OP_INC, OP_DEC,
 OP_RLC, OP_RRC, OP_RL, OP_RR, OP_SLA, OP_SRA, OP_SWAP, OP_SRL,
 OP_BIT, OP_RES, OP_SET, OP_DAA, OP_CPL, OP_SCF, OP_CCF) = range(26)

# 16-bit operand selectors and operations.
R16_BC, R16_DE, R16_HL, R16_SP, R16_AF, R16_IMM, R16_MEM, R16_PC = range(8)
D16_NONE = 7
OP16_PASS, OP16_INC, OP16_DEC, OP16_ADD_HL, OP16_ADD_SP = range(5)

# Address selectors of the read and write phases.
A_HL, A_BC, A_DE, A_SP, A_HIGH_IMM, A_IMM, A_HIGH_C, A_SP_DOWN = range(8)
# Value of the write phase: the ALU result, a 16-bit value low byte first, or a push
# (high byte at SP-1, then low byte at SP-2).
W_RES8, W_RES16, W_PUSH = range(3)
# New PC.
PC_KEEP, PC_IMM, PC_REL, PC_HL, PC_MEM, PC_RST = range(6)
# Stack pointer change (when taken): none, pop (+2), push (-2).
SPD_NONE, SPD_POP, SPD_PUSH = range(3)
# Instructions with effects outside the register file.
SP_NONE, SP_HALT, SP_STOP, SP_DI, SP_EI, SP_RETI, SP_ILLEGAL = range(7)
# Condition codes: always, NZ, Z, NC, C.
CC_ALWAYS = 0

# Word 3, read only by the run kernel's CPU variant: the commonest simple instructions
# take a short lane there, with the generic path's results. LANE_JUMP: NOP, JP, JR
# (conditional or not), JP HL: flags and registers unchanged, a new PC when taken.
# LANE_REG8: 8-bit register and immediate operations (LD r,r' and r,n, ALU, INC/DEC r,
# rotates, CB ops on registers, DAA, CPL, SCF, CCF). LANE_REG16: 16-bit register work
# without memory (LD rr,nn, INC/DEC rr, ADD HL,rr, ADD SP,e, LD HL,SP+e, LD SP,HL).
# LANE_LOAD8: one byte read into the 8-bit path (LD r,(HL), LD A,(BC/DE/nn/C), LDH A,(n),
# ALU A,(HL), CB ops reading (HL) without writing). LANE_STORE8: one register or immediate
# byte written (LD (HL),r/n, LD (BC/DE/nn/C),A, LDH (n),A); both with (HL+) and (HL-).
# LANE_RMW8: read, change and write back one byte (INC/DEC (HL), CB ops writing (HL)).
# LANE_STACK: PUSH, POP, CALL, RET (with conditions) and RST. Every other instruction
# (HALT, STOP, DI, EI, RETI, LD (nn),SP, the illegal opcodes): LANE_GENERIC.
(LANE_GENERIC, LANE_JUMP, LANE_REG8, LANE_REG16, LANE_LOAD8, LANE_STORE8, LANE_RMW8,
 LANE_STACK) = range(8)

# Flags as a nibble Z N H C (bits 3..0, i.e. F >> 4).
FL_Z, FL_N, FL_H, FL_C = 8, 4, 2, 1
FL_ALL = 15

# ---- word 0: sequencing
NIMM_SHIFT = 0  # 2 bits: immediate bytes
CC_SHIFT = 2  # 3 bits
NRD_SHIFT = 5  # 2 bits: bytes read (when taken)
RADDR_SHIFT = 7  # 3 bits
RWAIT_SHIFT = 10  # 1 bit: one internal M-cycle before the reads
NWR_SHIFT = 11  # 2 bits: bytes written (when taken)
WADDR_SHIFT = 13  # 3 bits
WDOWN_SHIFT = 16  # 1 bit: the second byte goes to the address below
WWAIT_SHIFT = 17  # 1 bit: one internal M-cycle before the writes (when taken)
WVAL_SHIFT = 18  # 2 bits
PC_SHIFT = 20  # 3 bits (when taken)
SPD_SHIFT = 23  # 2 bits (when taken)
EXTRA_SHIFT = 25  # 2 bits: internal M-cycles at the end (when taken)
SPECIAL_SHIFT = 27  # 3 bits
# ---- word 1: data path
SRC8_SHIFT = 0  # 4 bits
DST8_SHIFT = 4  # 4 bits
OP8_SHIFT = 8  # 5 bits
FKEEP_SHIFT = 13  # 4 bits: flags kept
FSET_SHIFT = 17  # 4 bits: flags forced to 1
FCALC_SHIFT = 21  # 4 bits: flags computed (the rest are cleared)
F16_SHIFT = 25  # 1 bit: computed flags come from the 16-bit adder
# ---- word 2: 16-bit path
SRC16_SHIFT = 0  # 3 bits
OP16_SHIFT = 3  # 3 bits
DST16_SHIFT = 6  # 3 bits

_R_A = 7
_ALU = (OP_ADD, OP_ADC, OP_SUB, OP_SBC, OP_AND, OP_XOR, OP_OR, OP_CP)
_ROT = (OP_RLC, OP_RRC, OP_RL, OP_RR, OP_SLA, OP_SRA, OP_SWAP, OP_SRL)
_RP = (R16_BC, R16_DE, R16_HL, R16_SP)  # table rp of the opcode maps
_RP2 = (R16_BC, R16_DE, R16_HL, R16_AF)  # table rp2 (PUSH/POP)


@dataclass
class Op:
    """One instruction's descriptor before packing (defaults: a 1-byte, 1-cycle NOP)."""

    n_imm: int = 0
    cc: int = CC_ALWAYS
    n_rd: int = 0
    raddr: int = A_HL
    r_wait: int = 0
    n_wr: int = 0
    waddr: int = A_HL
    w_down: int = 0
    w_wait: int = 0
    wval: int = W_RES8
    pc: int = PC_KEEP
    spd: int = SPD_NONE
    extra: int = 0
    special: int = SP_NONE
    src8: int = _R_A
    dst8: int = D8_NONE
    op8: int = OP_LD
    fkeep: int = FL_ALL
    fset: int = 0
    fcalc: int = 0
    f16: int = 0
    src16: int = R16_HL
    op16: int = OP16_PASS
    dst16: int = D16_NONE

    def words(self) -> tuple[int, int, int, int]:
        w0 = (
            self.n_imm << NIMM_SHIFT | self.cc << CC_SHIFT | self.n_rd << NRD_SHIFT
            | self.raddr << RADDR_SHIFT | self.r_wait << RWAIT_SHIFT | self.n_wr << NWR_SHIFT
            | self.waddr << WADDR_SHIFT | self.w_down << WDOWN_SHIFT
            | self.w_wait << WWAIT_SHIFT | self.wval << WVAL_SHIFT | self.pc << PC_SHIFT
            | self.spd << SPD_SHIFT | self.extra << EXTRA_SHIFT
            | self.special << SPECIAL_SHIFT
        )
        w1 = (
            self.src8 << SRC8_SHIFT | self.dst8 << DST8_SHIFT | self.op8 << OP8_SHIFT
            | self.fkeep << FKEEP_SHIFT | self.fset << FSET_SHIFT | self.fcalc << FCALC_SHIFT
            | self.f16 << F16_SHIFT
        )
        w2 = self.src16 << SRC16_SHIFT | self.op16 << OP16_SHIFT | self.dst16 << DST16_SHIFT
        return w0, w1, w2, self.lane()

    def lane(self) -> int:
        """Word 3: the short lane the CPU variant of the run kernel may take (LANE_*)."""
        simple = (
            self.r_wait == 0 and self.w_wait == 0 and self.spd == SPD_NONE
            and self.special == SP_NONE and self.wval == W_RES8
        )
        plain = (
            simple and self.n_rd == 0 and self.n_wr == 0 and self.dst16 == D16_NONE
            and self.f16 == 0 and self.op16 == OP16_PASS
        )
        straight = self.pc == PC_KEEP and self.cc == CC_ALWAYS
        if (plain and self.op8 == OP_LD and self.dst8 == D8_NONE and self.fkeep == FL_ALL
                and self.fset == 0 and self.pc in (PC_KEEP, PC_IMM, PC_REL, PC_HL)):
            return LANE_JUMP
        if (plain and straight and self.extra == 0 and self.src8 != S8_MEM
                and self.dst8 != D8_MEM):
            return LANE_REG8
        if (simple and straight and self.n_rd == 0 and self.n_wr == 0
                and self.dst16 != D16_NONE and self.src16 not in (R16_MEM, R16_PC)
                and self.op8 == OP_LD and self.dst8 == D8_NONE):
            return LANE_REG16
        no16 = self.dst16 == D16_NONE and self.f16 == 0 and self.op16 == OP16_PASS
        hl_step = (self.dst16 == R16_HL and self.src16 == R16_HL and self.f16 == 0
                   and self.op16 in (OP16_INC, OP16_DEC))  # (HL+) and (HL-)
        one_byte = simple and straight and self.extra == 0
        if (one_byte and (no16 or hl_step) and self.n_rd == 1 and self.n_wr == 0
                and self.src8 == S8_MEM and self.dst8 != D8_MEM):
            return LANE_LOAD8
        if (one_byte and (no16 or hl_step) and self.n_rd == 0 and self.n_wr == 1
                and self.dst8 == D8_MEM and self.op8 == OP_LD and self.src8 != S8_MEM
                and self.fkeep == FL_ALL and self.fset == 0):
            return LANE_STORE8
        if (one_byte and no16 and self.n_rd == 1 and self.n_wr == 1 and self.src8 == S8_MEM
                and self.dst8 == D8_MEM and self.raddr == self.waddr):
            return LANE_RMW8
        if self._stack_lane():
            return LANE_STACK
        return LANE_GENERIC

    def _stack_lane(self) -> bool:
        """PUSH, POP, CALL (cc), RET (cc), RST: two bytes at SP, no ALU, flags kept."""
        moves = (self.special == SP_NONE and self.op8 == OP_LD and self.dst8 == D8_NONE
                 and self.op16 == OP16_PASS and self.f16 == 0 and self.fkeep == FL_ALL
                 and self.fset == 0)
        pop = (self.n_rd == 2 and self.raddr == A_SP and self.n_wr == 0
               and self.spd == SPD_POP and self.w_wait == 0
               and ((self.pc == PC_MEM and self.dst16 == D16_NONE)
                    or (self.pc == PC_KEEP and self.src16 == R16_MEM
                        and self.dst16 != D16_NONE)))
        push = (self.n_wr == 2 and self.waddr == A_SP_DOWN and self.w_down == 1
                and self.wval == W_PUSH and self.w_wait == 1 and self.spd == SPD_PUSH
                and self.n_rd == 0 and self.r_wait == 0 and self.extra == 0
                and self.dst16 == D16_NONE and self.pc in (PC_KEEP, PC_IMM, PC_RST))
        return moves and (pop or push)


def _operand8(d: Op, r: int, *, read: bool, write: bool) -> None:
    """Register r (0-7) of the opcode as source and/or destination; 6 is the byte at (HL)."""
    if read:
        d.src8 = r
        if r == 6:
            d.src8, d.n_rd, d.raddr = S8_MEM, 1, A_HL
    if write:
        d.dst8 = r
        if r == 6:
            d.dst8, d.n_wr, d.waddr = D8_MEM, 1, A_HL


def _alu_flags(d: Op, op: int) -> None:
    if op == OP_AND:
        d.fkeep, d.fset, d.fcalc = 0, FL_H, FL_Z
    elif op in (OP_XOR, OP_OR):
        d.fkeep, d.fcalc = 0, FL_Z
    else:
        d.fkeep, d.fcalc = 0, FL_ALL


def _push(d: Op, src16: int) -> None:
    """PUSH, CALL and RST: one internal M-cycle, then the high byte at SP-1, the low at SP-2."""
    d.src16, d.n_wr, d.w_wait, d.waddr, d.w_down, d.wval = src16, 2, 1, A_SP_DOWN, 1, W_PUSH
    d.spd = SPD_PUSH


def _pop(d: Op) -> None:
    d.n_rd, d.raddr, d.spd = 2, A_SP, SPD_POP


def _base(op: int) -> Op:
    x, y, z = op >> 6, (op >> 3) & 7, op & 7
    p, q = y >> 1, y & 1
    d = Op()
    if x == 0:
        if z == 0:
            if y == 1:  # LD (nn),SP
                d.n_imm, d.src16, d.n_wr, d.waddr, d.wval = 2, R16_SP, 2, A_IMM, W_RES16
            elif y == 2:  # STOP
                d.special = SP_STOP
            elif y >= 3:  # JR e / JR cc,e
                d.n_imm, d.pc, d.extra = 1, PC_REL, 1
                d.cc = 0 if y == 3 else y - 3
        elif z == 1:
            if q == 0:  # LD rp,nn
                d.n_imm, d.src16, d.dst16 = 2, R16_IMM, _RP[p]
            else:  # ADD HL,rp
                d.src16, d.op16, d.dst16, d.extra = _RP[p], OP16_ADD_HL, R16_HL, 1
                d.fkeep, d.fcalc, d.f16 = FL_Z, FL_N | FL_H | FL_C, 1
        elif z == 2:
            addr = (A_BC, A_DE, A_HL, A_HL)[p]
            if q == 0:  # LD (rr),A
                d.n_wr, d.waddr = 1, addr
                d.dst8 = D8_MEM
            else:  # LD A,(rr)
                d.n_rd, d.raddr, d.src8, d.dst8 = 1, addr, S8_MEM, _R_A
            if p >= 2:  # (HL+) / (HL-)
                d.src16, d.dst16 = R16_HL, R16_HL
                d.op16 = OP16_INC if p == 2 else OP16_DEC
        elif z == 3:  # INC rp / DEC rp
            d.src16, d.dst16, d.extra = _RP[p], _RP[p], 1
            d.op16 = OP16_INC if q == 0 else OP16_DEC
        elif z in (4, 5):  # INC r / DEC r
            _operand8(d, y, read=True, write=True)
            d.op8 = OP_INC if z == 4 else OP_DEC
            d.fkeep, d.fcalc = FL_C, FL_Z | FL_N | FL_H
        elif z == 6:  # LD r,n
            d.n_imm, d.src8 = 1, S8_IMM
            _operand8(d, y, read=False, write=True)
        elif y < 4:  # RLCA RRCA RLA RRA
            d.op8, d.dst8, d.fkeep, d.fcalc = _ROT[y], _R_A, 0, FL_C
        elif y == 4:  # DAA
            d.op8, d.dst8, d.fkeep, d.fcalc = OP_DAA, _R_A, FL_N, FL_Z | FL_C
        elif y == 5:  # CPL
            d.op8, d.dst8, d.fkeep, d.fset = OP_CPL, _R_A, FL_Z | FL_C, FL_N | FL_H
        elif y == 6:  # SCF
            d.op8, d.fkeep, d.fset = OP_SCF, FL_Z, FL_C
        else:  # CCF
            d.op8, d.fkeep, d.fcalc = OP_CCF, FL_Z, FL_C
    elif x == 1:
        if op == 0x76:
            d.special = SP_HALT
        else:  # LD r,r'
            _operand8(d, z, read=True, write=False)
            _operand8(d, y, read=False, write=True)
    elif x == 2:  # ALU A,r
        _operand8(d, z, read=True, write=False)
        d.op8 = _ALU[y]
        d.dst8 = D8_NONE if d.op8 == OP_CP else _R_A
        _alu_flags(d, d.op8)
    elif z == 0:
        if y < 4:  # RET cc: the condition takes an internal M-cycle, then a RET
            d.cc, d.r_wait, d.pc, d.extra = y + 1, 1, PC_MEM, 1
            _pop(d)
        elif y == 4:  # LDH (n),A
            d.n_imm, d.n_wr, d.waddr, d.dst8 = 1, 1, A_HIGH_IMM, D8_MEM
        elif y == 6:  # LDH A,(n)
            d.n_imm, d.n_rd, d.raddr, d.src8, d.dst8 = 1, 1, A_HIGH_IMM, S8_MEM, _R_A
        else:  # ADD SP,e (two internal M-cycles) / LD HL,SP+e (one)
            d.n_imm, d.src16, d.op16 = 1, R16_SP, OP16_ADD_SP
            d.dst16, d.extra = (R16_SP, 2) if y == 5 else (R16_HL, 1)
            d.fkeep, d.fcalc, d.f16 = 0, FL_H | FL_C, 1
    elif z == 1:
        if q == 0:  # POP rp2
            _pop(d)
            d.src16, d.dst16 = R16_MEM, _RP2[p]
        elif p < 2:  # RET / RETI
            _pop(d)
            d.pc, d.extra = PC_MEM, 1
            if p == 1:
                d.special = SP_RETI
        elif p == 2:  # JP HL
            d.pc = PC_HL
        else:  # LD SP,HL
            d.src16, d.dst16, d.extra = R16_HL, R16_SP, 1
    elif z == 2:
        if y < 4:  # JP cc,nn
            d.n_imm, d.cc, d.pc, d.extra = 2, y + 1, PC_IMM, 1
        elif y == 4:  # LD (C),A
            d.n_wr, d.waddr, d.dst8 = 1, A_HIGH_C, D8_MEM
        elif y == 5:  # LD (nn),A
            d.n_imm, d.n_wr, d.waddr, d.dst8 = 2, 1, A_IMM, D8_MEM
        elif y == 6:  # LD A,(C)
            d.n_rd, d.raddr, d.src8, d.dst8 = 1, A_HIGH_C, S8_MEM, _R_A
        else:  # LD A,(nn)
            d.n_imm, d.n_rd, d.raddr, d.src8, d.dst8 = 2, 1, A_IMM, S8_MEM, _R_A
    elif z == 3:
        if y == 0:  # JP nn
            d.n_imm, d.pc, d.extra = 2, PC_IMM, 1
        elif y == 1:  # CB prefix: the CB byte is the immediate; its own entry follows
            d.n_imm = 1
        elif y == 6:
            d.special = SP_DI
        elif y == 7:
            d.special = SP_EI
        else:
            d.special = SP_ILLEGAL
    elif z == 4:
        if y < 4:  # CALL cc,nn
            d.n_imm, d.cc, d.pc = 2, y + 1, PC_IMM
            _push(d, R16_PC)
        else:
            d.special = SP_ILLEGAL
    elif z == 5:
        if q == 0:  # PUSH rp2
            _push(d, _RP2[p])
        elif p == 0:  # CALL nn
            d.n_imm, d.pc = 2, PC_IMM
            _push(d, R16_PC)
        else:
            d.special = SP_ILLEGAL
    elif z == 6:  # ALU A,n
        d.n_imm, d.src8, d.op8 = 1, S8_IMM, _ALU[y]
        d.dst8 = D8_NONE if d.op8 == OP_CP else _R_A
        _alu_flags(d, d.op8)
    else:  # RST
        d.pc = PC_RST
        _push(d, R16_PC)
    return d


def _cb(op: int) -> Op:
    x, y, z = op >> 6, (op >> 3) & 7, op & 7
    d = Op()
    if x == 0:  # rotates and shifts
        _operand8(d, z, read=True, write=True)
        d.op8, d.fkeep, d.fcalc = _ROT[y], 0, FL_Z | FL_C
    elif x == 1:  # BIT y,r
        _operand8(d, z, read=True, write=False)
        d.op8, d.fkeep, d.fset, d.fcalc = OP_BIT, FL_C, FL_H, FL_Z
    else:  # RES / SET y,r
        _operand8(d, z, read=True, write=True)
        d.op8 = OP_RES if x == 2 else OP_SET
    return d


def describe(index: int) -> Op:
    """The descriptor of opcode ``index`` (``CB_BASE + byte`` for CB-prefixed ones)."""
    if not 0 <= index < 2 * CB_BASE:
        raise ValueError(f"descriptor index must be in 0..511, got {index}")
    return _base(index) if index < CB_BASE else _cb(index - CB_BASE)


def decode_table() -> np.ndarray:
    """All 512 descriptors as an int32 array of shape (512 * WORDS,)."""
    return np.array([describe(i).words() for i in range(2 * CB_BASE)], dtype=np.int32).ravel()


# The CPU variant's predecoded word (``rom_predecode``, column 0 of the predecoded ROM's
# entries): one int32 per ROM byte, word 0 of the descriptor of the opcode that byte
# would be, with the lane of the run loop's inner loop in bits 27-29 (QUICK_SHIFT, the
# "special" field, which is SP_NONE for every instruction with a short lane): one of
# INNER_LANES, or LANE_GENERIC for an instruction the inner loop leaves to the full path.
QUICK_SHIFT = SPECIAL_SHIFT
INNER_LANES = (LANE_JUMP, LANE_REG8, LANE_REG16, LANE_LOAD8, LANE_STORE8, LANE_STACK)
# A run of identical do-nothing instructions, NOP or JR +0 (a delay loop's padding): the
# byte where the run starts holds QUICK_RUN in bits 27-29 (the number LANE_RMW8 has,
# which the predecoded ROM never holds: read-modify-writes are not an inner lane), the
# number of instructions in the run (2 - RUN_MAX) in bits 0-7 and RUN_JR (JR +0, else
# NOP) in bit 8. The inner loop steps over as many of them as start before its next event
# at once: they touch nothing but PC, the time and F's always-zero low nibble.
QUICK_RUN = LANE_RMW8
RUN_MAX = 255
RUN_JR = 1 << 8
# A countdown loop starts at this byte (QUICK_RUN in bits 27-29 as well; bits 0-8 still
# describe the run that starts here, 0 when the loop starts with its DEC): do-nothing
# instructions (NOP, JR +0), then DEC r, then JR NZ or JP NZ back to this byte. Every pass
# but the last only counts r down and spends the same cycles, so the run loop runs as
# many passes as end with the jump back and whose instructions start before its next event
# at once. LOOP_REG (bits 10-12): r's index in the register vector (B C D E H L _ A);
# LOOP_JP (bit 13): the jump is JP NZ, and LOOP_HIGH (bit 14) says its target is in
# 0x4000-0x7FFF (the loop runs from its own bank's CPU addresses only there);
# LOOP_NOPS (bits 15-19) and LOOP_JRS (bits 20-24): the NOPs and JR +0s before the DEC.
# A fill loop (a memset) is the same with `LD (HL+),A` or `LD (HL-),A` first: LOOP_FILL
# (bit 25), and LOOP_FILL_DOWN (bit 26) for (HL-); the register counted down is not H, L
# or A. Its passes store A at HL, HL +- 1, ..., as one by one they would.
RUN_LOOP = 1 << 9
LOOP_REG_SHIFT = 10
LOOP_JP = 1 << 13
LOOP_HIGH = 1 << 14
LOOP_NOPS_SHIFT = 15
LOOP_JRS_SHIFT = 20
LOOP_PAD_MAX = 31
LOOP_FILL = 1 << 25
LOOP_FILL_DOWN = 1 << 26
DESC_TABLE_BYTES = 2 * CB_BASE * WORDS * 4  # decode_table() in bytes


def _predecoded_words(table: np.ndarray) -> np.ndarray:
    """Word 0 of each descriptor of ``table`` (rows of WORDS int32) with its inner-loop
    lane in bits 27-29: its own lane where that is one of INNER_LANES, else LANE_GENERIC."""
    words = table[:, 0].astype(np.int64)
    lane = table[:, 3].astype(np.int64)
    inner = np.isin(lane, INNER_LANES)
    assert not (words[inner] >> QUICK_SHIFT).any(), "an inner-loop opcode has a special"
    kept = words & ((1 << QUICK_SHIFT) - 1)
    return np.where(inner, kept | (lane << QUICK_SHIFT), kept)


def _started_descriptors(data: np.ndarray) -> np.ndarray:
    """The descriptor index (0 - 511) of the instruction that starts at each byte of
    ``data``, read as code: the byte itself, or at a CB prefix CB_BASE plus the next byte
    (a prefix at the last byte stays 0xCB)."""
    desc = data.astype(np.int64)
    cb = np.flatnonzero(data[:-1] == 0xCB)
    desc[cb] = CB_BASE + desc[cb + 1]
    return desc


def rom_predecode(rom: bytes) -> np.ndarray:
    """int32 per byte of ``rom``: word 0 of the descriptor of the opcode equal to that
    byte, with its inner-loop lane in bits 27-29 (LANE_GENERIC for the lanes not in
    INNER_LANES); at a CB prefix, the word of the CB-prefixed instruction it starts, with
    one immediate byte (the second opcode byte, which the prefix's own entry reads as
    one), so that the CB operations on registers and BIT on (HL) take the inner loop
    (the entry's other words are the rest of their descriptor); where
    a run of two or more NOPs or JR +0s starts, QUICK_RUN and the run instead (see
    QUICK_RUN); where a countdown or fill loop starts, RUN_LOOP and its fields too. One
    word follows those of the ROM: RUN_LOOP there lets the run kernel run a countdown
    loop in HRAM at once too (countdown.hram_loop_word; HRAM is written at run time, so
    no word marks such a loop). These words are column 0 of ``rom_predecode_entries``,
    which the run kernel keeps after the descriptors."""
    table = decode_table().reshape(2 * CB_BASE, WORDS)
    out = _predecoded_words(table[:CB_BASE])
    out[0xCB] &= (1 << QUICK_SHIFT) - 1  # a prefix alone (the ROM's last byte): full path
    prefixed = _predecoded_words(table[CB_BASE:])
    assert not (prefixed & 3).any(), "a CB-prefixed descriptor has immediates"
    # The inner loop's load-lane check reads word 2 (the (HL+)/(HL-) step) at the opcode
    # byte, the prefix for BIT b,(HL): it must be the CB entries' word 2.
    loads = table[CB_BASE:][table[CB_BASE:, 3] == LANE_LOAD8]
    assert (loads[:, 2] == table[0xCB, 2]).all(), "BIT b,(HL) and the prefix differ in word 2"
    data = np.frombuffer(bytes(rom), dtype=np.uint8)
    pre = out.astype(np.int64)[data]
    pos = np.arange(len(data))
    # A CB prefix: the word of the instruction it and the next byte make, whose one
    # immediate is that byte (at the ROM's last byte the bank-edge rule below applies).
    desc = _started_descriptors(data)
    cb = desc >= CB_BASE
    pre[cb] = prefixed[desc[cb] - CB_BASE] | (out[0xCB] & 3)
    # The inner loop loads an instruction's three code bytes from one bank: at a bank
    # offset above 0x3FFC they span two, so the lane there is LANE_GENERIC.
    pre[(pos & 0x3FFF) > 0x3FFC] &= (1 << QUICK_SHIFT) - 1
    # Where runs and loops may start: also not below 0x100 (where a boot ROM may be
    # mapped).
    fetchable = ((pos & 0x3FFF) <= 0x3FFC) & (pos >= 0x100)
    nop = fetchable & (data == 0x00)
    jr0 = np.zeros(len(data), dtype=bool)
    jr0[:-1] = fetchable[:-1] & (data[:-1] == 0x18) & (data[1:] == 0x00)
    for mask, step, flag in ((nop, 1, 0), (jr0, 2, RUN_JR)):
        count = np.zeros(len(data), dtype=np.int64)
        for first in range(step):
            count[first::step] = _run_lengths(mask[first::step])
        start = count >= 2
        pre[start] = QUICK_RUN << QUICK_SHIFT | flag | np.minimum(count[start], RUN_MAX)
    for head, word in countdown_loops(data, fetchable):
        run = pre[head] & (RUN_JR | RUN_MAX) if pre[head] >> QUICK_SHIFT == QUICK_RUN else 0
        pre[head] = QUICK_RUN << QUICK_SHIFT | RUN_LOOP | run | word
    return np.append(pre, RUN_LOOP).astype(np.int32)


# One entry of the predecoded ROM as the run kernel reads it (``rom_predecode_entries``):
# four int32, 16 bytes, so one aligned load brings all that the inner loop needs of an
# instruction at once.
PRE_ENTRY_WORDS = 4
PRE_ENTRY_BYTES = 4 * PRE_ENTRY_WORDS
# The entries follow the descriptors in one array: each stays 16-byte aligned.
assert DESC_TABLE_BYTES % PRE_ENTRY_BYTES == 0


# Column 3 of an entry above its immediates and opcode: the special field of the
# instruction's descriptor (which column 0's lane replaces) in bits 24-26, and bit 27 set
# at a CB prefix. With them the CUDA variant has the whole descriptor word 0 from an
# entry, except where a run or loop starts (QUICK_RUN replaces column 0 there).
PRE_SPECIAL_SHIFT = 24
PRE_CB = 1 << 27
# Bit 31 of column 2 (word 2's fields end at bit 8, the fused loads' at bit 29; the sign
# bit, so one compare tests it): the instruction falls through into the start of a
# countdown or fill loop (RUN_LOOP) and neither writes, jumps nor is special, so the
# CUDA variant may run the loop's passes at once right after its work, as after a jump
# back, where one by one the loop's first pass would run each of its instructions.
INTO_LOOP = -(1 << 31)


def rom_predecode_entries(rom: bytes) -> np.ndarray:
    """The predecoded ROM as the run kernel keeps it: int32 of shape ``(len(rom) + 1,
    PRE_ENTRY_WORDS)``, one row per ROM byte and the word after them. Column 0 is
    ``rom_predecode``'s word; columns 1 and 2 are words 1 and 2 of the descriptor of the
    instruction that starts at the byte (at a CB prefix, the CB-prefixed instruction's),
    column 2 with INTO_LOOP where that instruction falls into a loop;
    column 3 holds its immediates in bits 0-15 (as many bytes as its opcode takes, the
    rest zero; zero past the ROM's end), its opcode in bits 16-23 (at a CB prefix, the
    second opcode byte), its descriptor's special field (PRE_SPECIAL_SHIFT) and PRE_CB at
    a CB prefix. The opcode, immediates and descriptor then come from one load that
    waits only for PC, not from loads of the code bytes and then of the descriptor at
    the opcode."""
    table = decode_table().reshape(2 * CB_BASE, WORDS)
    data = np.frombuffer(bytes(rom), dtype=np.uint8).astype(np.int64)
    out = np.zeros((len(data) + 1, PRE_ENTRY_WORDS), dtype=np.int64)
    out[:, 0] = rom_predecode(rom)
    desc = _started_descriptors(data)
    out[:-1, 1] = table[desc, 1]
    out[:-1, 2] = table[desc, 2]
    padded = np.concatenate([data, np.zeros(2, dtype=np.int64)])
    n_imm = table[data, 0] & 3
    imm = (np.where(n_imm >= 1, padded[1:-1], 0)
           | np.where(n_imm == 2, padded[2:] << 8, 0))
    word0 = table[desc, 0]
    special = (word0 >> SPECIAL_SHIFT) & 7
    out[:-1, 3] = (imm | (desc & 0xFF) << 16 | special << PRE_SPECIAL_SHIFT
                   | np.where(desc >= CB_BASE, PRE_CB, 0))
    out[_into_loop(out[:-1, 0], word0, 1 + n_imm), 2] |= INTO_LOOP
    return out.astype(np.int32)


def _into_loop(words: np.ndarray, word0: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The ROM offsets that get INTO_LOOP: every instruction (descriptor word 0 and
    length in bytes at each offset) that ends where a loop starts (``words``:
    rom_predecode's), in its bank, without writes, jumps or special effects. Bytes are not
    known to be code, so every such reading of the bytes before a loop is marked:
    whichever one runs falls into the loop."""
    heads = np.flatnonzero((words >> QUICK_SHIFT == QUICK_RUN) & ((words & RUN_LOOP) != 0))
    quiet = ((((word0 >> NWR_SHIFT) & 3) == 0) & (((word0 >> PC_SHIFT) & 7) == PC_KEEP)
             & (((word0 >> SPECIAL_SHIFT) & 7) == SP_NONE))
    marked = []
    for back in (1, 2, 3):
        at = heads - back
        at = at[(at >= 0x100) & (at >> 14 == (at + back) >> 14)]
        marked.append(at[(length[at] == back) & quiet[at]])
    return np.concatenate(marked)


# The CUDA variant's entries (``rom_fused_entries``) run a register load and the
# instruction after it in one pass of the run loop, where each pass costs a warp much the
# same whatever its Game Boys run: INC rr / DEC rr, LD rr,nn and LD HL,SP+e, which touch
# nothing but a register pair (and F for LD HL,SP+e), are how compiled C code (SDCC's
# stack frames) and hand-written code alike set up most memory accesses, and LD r,r' and
# LD r,n (not (HL)), which touch one register, how they move values between the others.
# The entry at such an instruction is the entry of the instruction after it, with the
# load in word 2's bits above the descriptor's fields: FUSE_KIND (bits 9-11: FUSE_STEP
# for INC/DEC rr, FUSE_SP_OFFSET for LD HL,SP+e, FUSE_LOAD for LD rr,nn, FUSE_REG8 for LD
# r,r', FUSE_IMM8 for LD r,n, 0 for none), FUSE_PAIR (bits 12-13: BC DE HL SP) and
# FUSE_ADD (bits 14-29): for a 16-bit load what is added to the pair, to SP for LD
# HL,SP+e, to zero for LD rr,nn (1, 0xFFFF, e sign-extended, nn); for an 8-bit one the
# destination register (bits 0-2, the run kernel's register index, which is the opcode's)
# and the source register or n (from bit 3). The load's length in bytes and its M-cycles
# follow from its kind (FUSE_LENGTHS, FUSE_MCYCLES: two bits per kind).
FUSE_KIND_SHIFT = 9
FUSE_PAIR_SHIFT = 12
FUSE_ADD_SHIFT = 14
FUSE_NONE, FUSE_STEP, FUSE_SP_OFFSET, FUSE_LOAD, FUSE_REG8, FUSE_IMM8 = range(6)
FUSE_PAIR_SP = 3
FUSE_MAX_CYCLES = 12
_FUSE_LENGTH = {FUSE_NONE: 0, FUSE_STEP: 1, FUSE_SP_OFFSET: 2, FUSE_LOAD: 3, FUSE_REG8: 1,
                FUSE_IMM8: 2}
_FUSE_MCYCLES = {FUSE_NONE: 0, FUSE_STEP: 2, FUSE_SP_OFFSET: 3, FUSE_LOAD: 3, FUSE_REG8: 1,
                 FUSE_IMM8: 2}
FUSE_LENGTHS = sum(n << 2 * k for k, n in _FUSE_LENGTH.items())
FUSE_MCYCLES = sum(n << 2 * k for k, n in _FUSE_MCYCLES.items())
KindT = TypeVar("KindT", int, np.ndarray)  # a kind, or an array of kinds


def fuse_length(kind: KindT) -> KindT:
    """Bytes of a fused load of ``kind`` (FUSE_*, or an array of them), as the run kernel
    reads them."""
    return (FUSE_LENGTHS >> 2 * kind) & 3


def fuse_mcycles(kind: KindT) -> KindT:
    """M-cycles of a fused load of ``kind`` (FUSE_*), as the run kernel reads them."""
    return (FUSE_MCYCLES >> 2 * kind) & 3


def _fused_loads(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kind, pair, addend) of the register load that starts at each byte of ``data``
    (kind FUSE_NONE where none does)."""
    size = len(data)
    padded = np.concatenate([data, np.zeros(2, dtype=data.dtype)]).astype(np.int64)
    op = padded[:size]
    b1 = padded[1:size + 1]
    b2 = padded[2:size + 2]
    kind = np.zeros(size, dtype=np.int64)
    pair = (op >> 4) & 3
    add = np.zeros(size, dtype=np.int64)
    step = (op & 0xC7) == 0x03  # INC rr (0x03 + 16p) and DEC rr (0x0B + 16p)
    kind[step] = FUSE_STEP
    add[step] = np.where((op[step] & 8) != 0, 0xFFFF, 1)
    load = (op & 0xCF) == 0x01  # LD rr,nn
    kind[load] = FUSE_LOAD
    add[load] = b1[load] | b2[load] << 8
    sp_off = op == 0xF8  # LD HL,SP+e
    kind[sp_off] = FUSE_SP_OFFSET
    pair[sp_off] = 2
    add[sp_off] = (b1[sp_off] - ((b1[sp_off] & 0x80) << 1)) & 0xFFFF
    # LD r,r' (0x40 + 8 dst + src) and LD r,n (0x06 + 8 dst), neither register (HL) (6)
    dst = (op >> 3) & 7
    reg8 = (op >= 0x40) & (op < 0x80) & (dst != 6) & ((op & 7) != 6)
    kind[reg8] = FUSE_REG8
    add[reg8] = dst[reg8] | (op[reg8] & 7) << 3
    imm8 = ((op & 0xC7) == 0x06) & (dst != 6)
    kind[imm8] = FUSE_IMM8
    add[imm8] = dst[imm8] | b1[imm8] << 3
    pair[reg8 | imm8] = 0
    return kind, pair, add


def rom_fused_entries(rom: bytes, entries: np.ndarray | None = None) -> np.ndarray:
    """The CUDA variant's predecoded ROM: ``rom_predecode_entries`` (``entries``, computed
    when not given), except where a register load (see FUSE_KIND_SHIFT) starts and the
    instruction after it starts in the same bank at an offset whose entry the run kernel
    reads (at most 0x3FFC into the bank): there the entry is that instruction's, with the
    load in word 2. Not where the load falls into a loop (INTO_LOOP): its own entry runs
    the loop's passes with it. The run kernel reads these only where neither an event, an
    interrupt, an EI delay nor OAM DMA can come between the two instructions, and no
    register pair points into FE00-FEFF (where INC/DEC rr has the OAM bug, which the load
    then runs alone to have)."""
    if entries is None:
        entries = rom_predecode_entries(rom)
    data = np.frombuffer(bytes(rom), dtype=np.uint8)
    kind, pair, add = _fused_loads(data)
    pos = np.arange(len(data))
    after = pos + fuse_length(kind)
    fused = ((kind != FUSE_NONE) & ((pos & 0x3FFF) <= 0x3FFC) & ((after & 0x3FFF) <= 0x3FFC)
             & (after >> 14 == pos >> 14) & (after < len(data)) & (entries[:len(data), 2] >= 0))
    at = np.flatnonzero(fused)
    out = entries.astype(np.int64)
    out[at] = out[after[at]]
    out[at, 2] |= (kind[at] << FUSE_KIND_SHIFT | pair[at] << FUSE_PAIR_SHIFT
                   | add[at] << FUSE_ADD_SHIFT)
    return out.astype(np.int32)


_DEC_R8 = {0x05 + 8 * y: y for y in (0, 1, 2, 3, 4, 5, 7)}  # DEC B ... DEC A, not (HL)
_FILL_OPS = {0x22: LOOP_FILL, 0x32: LOOP_FILL | LOOP_FILL_DOWN}  # LD (HL+),A / LD (HL-),A
_FILL_REGS = (0, 1, 2, 3)  # B C D E: a fill loop's count is neither HL nor A


def countdown_loops(data: np.ndarray, fetchable: np.ndarray) -> list[tuple[int, int]]:
    """The countdown and fill loops of a ROM (see RUN_LOOP): (the ROM offset where one
    starts, its RUN_LOOP fields). Every instruction of a loop starts at a fetchable offset
    of one bank, and a JP NZ's target is the loop's start as the CPU sees it in either half
    of the map."""
    found = []
    size = len(data)
    decs = np.flatnonzero(np.isin(data[:-1], list(_DEC_R8)) & fetchable[:-1]
                          & np.isin(data[1:], (0x20, 0xC2)))
    for dec in decs.tolist():
        jump = dec + 1
        if not fetchable[jump] or jump + 2 >= size:
            continue
        if data[jump] == 0x20:
            head = jump + 2 + int(np.int8(data[jump + 1]))
            high = 0
        else:
            target = int(data[jump + 1]) | int(data[jump + 2]) << 8
            if target >= 0x8000 or (target >= 0x4000) != (dec >= 0x4000):
                continue  # bank 0 is the low half; a loop elsewhere runs from the high half
            head = (dec & ~0x3FFF) | (target & 0x3FFF)
            high = LOOP_HIGH if target >= 0x4000 else 0
        if not (head <= dec and head >> 14 == dec >> 14):
            continue
        nops = jrs = 0
        at = head
        fill = _FILL_OPS.get(int(data[head]), 0) if head < dec else 0
        if fill:
            if _DEC_R8[int(data[dec])] not in _FILL_REGS or not fetchable[head]:
                continue
            at += 1
        while at < dec and fetchable[at]:
            if data[at] == 0x00:
                nops, at = nops + 1, at + 1
            elif data[at] == 0x18 and data[at + 1] == 0x00:
                jrs, at = jrs + 1, at + 2
            else:
                break
        if at != dec or nops > LOOP_PAD_MAX or jrs > LOOP_PAD_MAX:
            continue
        word = (_DEC_R8[int(data[dec])] << LOOP_REG_SHIFT | high
                | (LOOP_JP if data[jump] == 0xC2 else 0)
                | nops << LOOP_NOPS_SHIFT | jrs << LOOP_JRS_SHIFT | fill)
        found.append((head, word))
    return found


def _run_lengths(mask: np.ndarray) -> np.ndarray:
    """For each index, how many consecutive True values of ``mask`` start there."""
    idx = np.arange(len(mask))
    stop = np.where(mask, len(mask), idx)  # the first False at or after each index
    stop = np.minimum.accumulate(stop[::-1])[::-1]
    return np.where(mask, stop - idx, 0)


def m_cycles(index: int, taken: bool = True) -> int:
    """M-cycles of an instruction according to its descriptor (the CB prefix's own byte
    counted in the CB entries): what the kernel spends, for tests against the opcode
    tables."""
    d = describe(index)
    go = d.cc == CC_ALWAYS or taken
    n = 1 + d.n_imm + d.r_wait
    if index >= CB_BASE:
        n += 1  # the 0xCB fetch
    if go:
        n += d.n_rd + d.w_wait + d.n_wr + d.extra
    return n
