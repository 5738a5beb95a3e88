"""The opcode descriptor table (decode.py) against the SM83 opcode tables.

The kernel spends exactly the M-cycles a descriptor says (fetch, immediates, waits,
reads, writes, internal cycles), so the cycle counts here are the kernel's; the
conformance ROMs (instr_timing, mem_timing) check the same on the machine itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from gbx_gameboy import decode as D

# M-cycles of the unprefixed opcodes, branches not taken; 0 for the illegal ones.
# (Rows are the high nibble; the gbdev opcode table's figures divided by 4.)
BASE_CYCLES = [
    [1, 3, 2, 2, 1, 1, 2, 1, 5, 2, 2, 2, 1, 1, 2, 1],
    [1, 3, 2, 2, 1, 1, 2, 1, 3, 2, 2, 2, 1, 1, 2, 1],
    [2, 3, 2, 2, 1, 1, 2, 1, 2, 2, 2, 2, 1, 1, 2, 1],
    [2, 3, 2, 2, 3, 3, 3, 1, 2, 2, 2, 2, 1, 1, 2, 1],
    *[[2 if (row * 16 + col) & 7 == 6 else 1 for col in range(16)] for row in range(4, 7)],
    [2, 2, 2, 2, 2, 2, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1],
    *[[2 if (row * 16 + col) & 7 == 6 else 1 for col in range(16)] for row in range(8, 12)],
    [2, 3, 3, 4, 3, 4, 2, 4, 2, 4, 3, 0, 3, 6, 2, 4],
    [2, 3, 3, 0, 3, 4, 2, 4, 2, 4, 3, 0, 3, 0, 2, 4],
    [3, 3, 2, 0, 0, 4, 2, 4, 4, 1, 4, 0, 0, 0, 2, 4],
    [3, 3, 2, 1, 0, 4, 2, 4, 3, 2, 4, 1, 0, 0, 2, 4],
]
# Taken conditional branches: JR cc 3, RET cc 5, JP cc 4, CALL cc 6.
TAKEN = {0x20: 3, 0x28: 3, 0x30: 3, 0x38: 3, 0xC0: 5, 0xC8: 5, 0xD0: 5, 0xD8: 5,
         0xC2: 4, 0xCA: 4, 0xD2: 4, 0xDA: 4, 0xC4: 6, 0xCC: 6, 0xD4: 6, 0xDC: 6}
# Instruction lengths in bytes (the CB prefix counts its second byte).
LENGTH_2 = {0x06, 0x0E, 0x16, 0x1E, 0x26, 0x2E, 0x36, 0x3E, 0x10, 0x18, 0x20, 0x28, 0x30,
            0x38, 0xC6, 0xCE, 0xD6, 0xDE, 0xE6, 0xEE, 0xF6, 0xFE, 0xE0, 0xF0, 0xE8, 0xF8,
            0xCB}
LENGTH_3 = {0x01, 0x11, 0x21, 0x31, 0x08, 0xC2, 0xC3, 0xCA, 0xD2, 0xDA, 0xC4, 0xCC, 0xCD,
            0xD4, 0xDC, 0xEA, 0xFA}
ILLEGAL = {0xD3, 0xDB, 0xDD, 0xE3, 0xE4, 0xEB, 0xEC, 0xED, 0xF4, 0xFC, 0xFD}


@pytest.mark.parametrize("op", range(256))
def test_base_opcode_cycles(op: int) -> None:
    expected = BASE_CYCLES[op >> 4][op & 15]
    if op in ILLEGAL:
        assert D.describe(op).special == D.SP_ILLEGAL
        return
    if op == 0xCB:
        return  # the CB entries below carry the prefixed instructions' cycles
    assert D.m_cycles(op, taken=False) == expected, hex(op)
    assert D.m_cycles(op, taken=True) == TAKEN.get(op, expected), hex(op)


@pytest.mark.parametrize("op", range(256))
def test_instruction_length(op: int) -> None:
    # STOP is 2 bytes on the bus but its padding byte is skipped, not read (special).
    n_imm = D.describe(op).n_imm
    expected = 1 if op == 0x10 else 2 if op in LENGTH_2 else 3 if op in LENGTH_3 else 0
    assert n_imm == max(expected - 1, 0) or (op in ILLEGAL and n_imm == 0), hex(op)


def test_cb_cycles() -> None:
    for cb in range(256):
        on_hl = (cb & 7) == 6
        bit = (cb >> 6) == 1
        expected = (3 if bit else 4) if on_hl else 2
        assert D.m_cycles(D.CB_BASE + cb) == expected, hex(cb)


def test_memory_access_order_of_push_call_rst() -> None:
    # One internal M-cycle, then the high byte at SP-1 and the low byte at SP-2.
    for op in (0xC5, 0xCD, 0xC4, 0xFF):
        d = D.describe(op)
        assert (d.w_wait, d.n_wr, d.waddr, d.w_down, d.wval) == (
            1, 2, D.A_SP_DOWN, 1, D.W_PUSH), hex(op)


def test_table_packs_every_field_within_its_width() -> None:
    table = D.decode_table().reshape(2 * D.CB_BASE, D.WORDS)
    assert table.dtype == np.int32
    for i in range(2 * D.CB_BASE):
        d = D.describe(i)
        w0, w1, w2, lane = (int(x) for x in table[i])
        assert lane == d.lane()
        assert (w0 >> D.NIMM_SHIFT) & 3 == d.n_imm
        assert (w0 >> D.CC_SHIFT) & 7 == d.cc
        assert (w0 >> D.SPECIAL_SHIFT) & 7 == d.special
        assert (w0 >> D.EXTRA_SHIFT) & 3 == d.extra
        assert (w1 >> D.SRC8_SHIFT) & 15 == d.src8
        assert (w1 >> D.DST8_SHIFT) & 15 == d.dst8
        assert (w1 >> D.OP8_SHIFT) & 31 == d.op8
        assert (w1 >> D.FCALC_SHIFT) & 15 == d.fcalc
        assert (w1 >> D.F16_SHIFT) & 1 == d.f16
        assert (w2 >> D.DST16_SHIFT) & 7 == d.dst16
        assert w0 >= 0 and w1 >= 0 and w2 >= 0  # every field fits below the sign bit


def test_short_lanes_of_the_cpu_variant() -> None:
    """Word 3 sorts every opcode into the lane the CPU variant of the kernel runs it in."""
    cb = D.CB_BASE
    lanes = {
        D.LANE_JUMP: {0x00, 0x18, 0x20, 0x28, 0x30, 0x38, 0xC3, 0xC2, 0xCA, 0xD2, 0xDA, 0xE9,
                      0xCB},  # the prefix's own entry: the kernel takes the CB entry's lane
        D.LANE_REG16: {0x01, 0x03, 0x09, 0x0B, 0x11, 0x13, 0x19, 0x1B, 0x21, 0x23, 0x29,
                       0x2B, 0x31, 0x33, 0x39, 0x3B, 0xE8, 0xF8, 0xF9},
        D.LANE_LOAD8: ({0x0A, 0x1A, 0x2A, 0x3A, 0xF0, 0xF2, 0xFA}
                       | {0x46 + 8 * i for i in range(8) if i != 6}
                       | {0x86 + 8 * i for i in range(8)}
                       | {cb + 0x46 + 8 * i for i in range(8)}),  # BIT n,(HL)
        D.LANE_STORE8: {0x02, 0x12, 0x22, 0x32, 0x36, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75,
                        0x77, 0xE0, 0xE2, 0xEA},
        D.LANE_RMW8: ({0x34, 0x35} | {cb + 0x06 + 8 * i for i in range(8)}
                      | {cb + 0x86 + 8 * i for i in range(16)}),
        D.LANE_STACK: ({0xC0, 0xC8, 0xD0, 0xD8, 0xC9, 0xC4, 0xCC, 0xD4, 0xDC, 0xCD}
                       | {0xC1 + 16 * i for i in range(4)} | {0xC5 + 16 * i for i in range(4)}
                       | {0xC7 + 8 * i for i in range(8)}),
        D.LANE_GENERIC: ({0x08, 0x10, 0x76, 0xF3, 0xFB, 0xD9}
                         | {0xD3, 0xDB, 0xDD, 0xE3, 0xE4, 0xEB, 0xEC, 0xED, 0xF4, 0xFC, 0xFD}),
    }
    for lane, ops in lanes.items():
        for i in ops:
            assert D.describe(i).lane() == lane, (hex(i), lane)
    named = set().union(*lanes.values())
    for i in set(range(2 * cb)) - named:  # LD r,r', ALU and CB ops on registers, ...
        assert D.describe(i).lane() == D.LANE_REG8, hex(i)


def test_describe_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="0..511"):
        D.describe(512)


def test_rom_predecode_holds_word_0_and_the_inner_loop_lane() -> None:
    rom = bytes(range(256)) + bytes([0x18, 0xFE, 0xCB, 0x37])
    pre = D.rom_predecode(rom)
    assert pre.dtype == np.int32 and pre.shape == (len(rom) + 1,)
    assert pre[-1] == D.RUN_LOOP  # the switch of countdown loops in HRAM
    low = (1 << D.QUICK_SHIFT) - 1
    for i, byte in enumerate(rom):
        word = int(pre[i])
        d = D.describe(byte)
        if byte == 0xCB:  # the prefix: the word of the instruction it starts
            d = D.describe(D.CB_BASE + rom[i + 1])
            assert word & 3 == 1  # one immediate: the second opcode byte
        assert word & low & ~3 == d.words()[0] & low & ~3
        inner = d.lane() in D.INNER_LANES
        assert word >> D.QUICK_SHIFT == (d.lane() if inner else D.LANE_GENERIC), hex(byte)
    assert {int(pre[b]) >> D.QUICK_SHIFT for b in (0x18, 0x3C, 0x7E, 0x77)} == {
        D.LANE_JUMP, D.LANE_REG8, D.LANE_LOAD8, D.LANE_STORE8}
    assert D.DESC_TABLE_BYTES == D.decode_table().nbytes


def test_rom_predecode_gives_cb_prefixes_their_instructions_lane() -> None:
    # CB ops on registers take the 8-bit register lane, BIT b,(HL) the load lane; the
    # read-modify-writes of (HL), and a prefix with no byte after it, the full path.
    rom = bytes([0xCB, 0x37, 0xCB, 0x7E, 0xCB, 0x36, 0xCB, 0x11, 0xCB])
    pre = D.rom_predecode(rom).astype(np.int64)
    assert [int(pre[a]) >> D.QUICK_SHIFT for a in (0, 2, 4, 6, 8)] == [
        D.LANE_REG8, D.LANE_LOAD8, D.LANE_GENERIC, D.LANE_REG8, D.LANE_GENERIC]
    assert [int(pre[a]) & 3 for a in (0, 2, 6)] == [1, 1, 1]
    # the bytes after a prefix keep their own words, for code that jumps to them
    assert int(pre[1]) == int(D.rom_predecode(bytes([0x37]))[0])


def test_loads_and_16_bit_moves_and_counts_keep_every_flag() -> None:
    # The CPU variant's lanes (cpu.alu8_host, cpu.reg16_host) return F unchanged for
    # these without merging the descriptor's flag fields.
    for i in range(2 * D.CB_BASE):
        d = D.describe(i)
        if d.lane() in (D.LANE_REG8, D.LANE_LOAD8, D.LANE_RMW8) and d.op8 == D.OP_LD:
            assert (d.fkeep, d.fset, d.fcalc) == (D.FL_ALL, 0, 0), hex(i)
        if d.lane() == D.LANE_REG16 and d.op16 < D.OP16_ADD_HL:
            assert (d.fkeep, d.fset, d.fcalc, d.f16) == (D.FL_ALL, 0, 0, 0), hex(i)


def test_rom_predecode_entries_hold_the_word_the_descriptor_and_the_code_bytes() -> None:
    # A CB prefix's entry holds the prefixed instruction's descriptor words and opcode;
    # immediates past the ROM's end read as 0; the word after the ROM's keeps its row.
    # Word 0 as a fetch sees it (the prefix's immediate count at a CB prefix) follows from
    # columns 0 and 3 wherever no run starts. (Runs of NOPs are marked from 0x100 on.)
    rom = bytes([0x04]) * 0xFF + bytes([0x76, 0x3E, 0x12, 0xCB, 0x7E, 0x00, 0x00, 0x00,
                                        0xCB, 0x37, 0xEA, 0x34])
    entries = D.rom_predecode_entries(rom)
    assert entries.dtype == np.int32 and entries.shape == (len(rom) + 1, D.PRE_ENTRY_WORDS)
    assert D.PRE_ENTRY_BYTES == entries.itemsize * D.PRE_ENTRY_WORDS == 16
    assert (entries[:, 0] == D.rom_predecode(rom)).all()
    assert entries[-1].tolist() == [D.RUN_LOOP, 0, 0, 0]
    padded = rom + bytes(2)
    for i, byte in enumerate(rom):
        code = D.CB_BASE + rom[i + 1] if byte == 0xCB and i + 1 < len(rom) else byte
        words = D.describe(code).words()
        assert entries[i, 1:3].tolist() == [words[1], words[2]], hex(i)
        n_imm = D.describe(byte).words()[0] & 3
        imm = int.from_bytes(padded[i + 1:i + 1 + n_imm], "little")
        special = words[0] >> D.SPECIAL_SHIFT & 7
        cb = D.PRE_CB if code >= D.CB_BASE else 0
        assert int(entries[i, 3]) == (imm | (code & 0xFF) << 16
                                      | special << D.PRE_SPECIAL_SHIFT | cb), hex(i)
        if int(entries[i, 0]) >> D.QUICK_SHIFT != D.QUICK_RUN:
            low = int(entries[i, 0]) & ((1 << D.QUICK_SHIFT) - 1)
            assert low | special << D.QUICK_SHIFT == words[0] & ~3 | n_imm, hex(i)
    # LD A,n; the prefix of BIT 7,(HL); LD (nn),A at the end, its high byte past the ROM
    assert [int(entries[0x100 + k, 3]) for k in (0, 2, 9)] == [
        0x3E << 16 | 0x12, D.PRE_CB | 0x7E << 16 | 0x7E, 0xEA << 16 | 0x34]
    # HALT's special, which column 0's lane replaces, is in column 3
    assert int(entries[0xFF, 3]) >> D.PRE_SPECIAL_SHIFT & 7 == D.SP_HALT
    # the NOP run keeps its run word in column 0 and NOP's descriptor beside it
    assert int(entries[0x104, 0]) >> D.QUICK_SHIFT == D.QUICK_RUN


def test_rom_predecode_sends_bank_edges_to_the_full_path() -> None:
    # The inner loop loads an instruction's three code bytes from one bank: at the last
    # three offsets of a bank they span two, so the lane there is LANE_GENERIC (word 0's
    # fields stay).
    rom = bytes([0x04]) * 0x10000  # INC B everywhere: LANE_REG8
    pre = D.rom_predecode(rom).astype(np.int64)
    low = (1 << D.QUICK_SHIFT) - 1
    for bank_start in (0, 0x4000, 0x8000, 0xC000):
        edge = bank_start + 0x3FFD
        assert [int(pre[a]) >> D.QUICK_SHIFT for a in range(edge - 1, edge + 3)] == [
            D.LANE_REG8, D.LANE_GENERIC, D.LANE_GENERIC, D.LANE_GENERIC], hex(edge)
        assert int(pre[edge]) & low == D.describe(0x04).words()[0] & low
    assert int(pre[0x4000]) >> D.QUICK_SHIFT == D.LANE_REG8


def test_rom_predecode_marks_runs_of_nops_and_jr0_where_they_start() -> None:
    rom = bytearray([0x76] * 0x8000)  # HALT everywhere else
    rom[0x200:0x203] = bytes(3)  # NOP NOP NOP
    rom[0x300:0x306] = bytes([0x18, 0x00] * 3)  # JR +0 three times
    rom[0x3FFA:0x4002] = bytes(8)  # NOPs across the bank boundary
    rom[0x10:0x14] = bytes(4)  # below 0x100 (a boot ROM may be mapped there)
    pre = D.rom_predecode(bytes(rom)).astype(np.int64)
    run = D.QUICK_RUN << D.QUICK_SHIFT
    assert [int(pre[a]) for a in (0x200, 0x201)] == [run | 3, run | 2]
    assert int(pre[0x202]) >> D.QUICK_SHIFT == D.LANE_JUMP  # a run of one: the plain NOP
    assert [int(pre[a]) for a in (0x300, 0x302)] == [run | D.RUN_JR | 3, run | D.RUN_JR | 2]
    assert int(pre[0x301]) >> D.QUICK_SHIFT == D.LANE_JUMP  # operand 00 then 18: one NOP
    assert int(pre[0x3FFA]) == run | 3  # up to 0x3FFC: the three code bytes in one bank
    assert int(pre[0x4000]) == run | 2 and int(pre[0x4001]) >> D.QUICK_SHIFT == D.LANE_JUMP
    assert int(pre[0x10]) >> D.QUICK_SHIFT == D.LANE_JUMP


def test_special_instructions_write_nothing() -> None:
    # The run loop ends a special instruction (HALT, STOP, DI, EI, RETI, an illegal opcode)
    # right after its special work, without the write phase.
    specials = [i for i in range(2 * D.CB_BASE) if D.describe(i).special != D.SP_NONE]
    assert {0x10, 0x76, 0xD9, 0xF3, 0xFB} | ILLEGAL <= set(specials)
    for i in specials:
        d = D.describe(i)
        assert d.n_wr == 0 and d.w_wait == 0, hex(i)


def _loops_at(code: dict[int, bytes], size: int = 0x8000) -> dict[int, int]:
    """decode.countdown_loops of a ROM holding ``code`` at the given offsets."""
    rom = bytearray(size)
    for at, data in code.items():
        rom[at:at + len(data)] = data
    data = np.frombuffer(bytes(rom), dtype=np.uint8)
    pos = np.arange(size)
    fetchable = ((pos & 0x3FFF) <= 0x3FFC) & (pos >= 0x100)
    return dict(D.countdown_loops(data, fetchable))


def test_countdown_loops_are_found_in_every_form_and_nowhere_else() -> None:
    def fields(reg: int, nops: int = 0, jrs: int = 0, jp: int = 0) -> int:
        return (reg << D.LOOP_REG_SHIFT | jp | nops << D.LOOP_NOPS_SHIFT
                | jrs << D.LOOP_JRS_SHIFT)

    # dec c; jr nz, -3 (no padding; the ROM's zeros around are NOPs, not part of it)
    assert _loops_at({0x400: b"\x0d\x20\xfd\x76"}) == {0x400: fields(1)}
    # nop; jr +0; nop; dec a; jp nz, $0500 (bank 0: the target in the low half)
    assert _loops_at({0x500: b"\x00\x18\x00\x00\x3d\xc2\x00\x05\x76"}) == {
        0x500: fields(7, nops=2, jrs=1, jp=D.LOOP_JP)}
    # the same in bank 1, as its code sees itself at $4000-$7FFF
    assert _loops_at({0x4500: b"\x00\x05\xc2\x00\x45\x76"}) == {
        0x4500: fields(0, nops=1, jp=D.LOOP_JP | D.LOOP_HIGH)}
    for code in (
        {0x400: b"\x35\x20\xfd\x76"},  # dec (hl): memory, not a register
        {0x400: b"\x0d\x28\xfd\x76"},  # jr z: not a countdown
        {0x400: b"\x3c\x0d\x20\xfc\x76"},  # inc a in the body
        {0x500: b"\x05\xc2\x00\x45\x76"},  # bank 0's JP to the high half: another place
        {0x4500: b"\x05\xc2\x00\x05\x76"},  # bank 1's JP to the low half: another place
        {0x400: b"\x05\x20\x02\x76"},  # forward jump
        {0x3FFD: b"\x05\x20\xfd"},  # past a bank's last fetchable offset
        {0x400: b"\x00" * 32 + b"\x05\x20\xdd\x76"},  # 32 NOPs: more than a field holds
    ):
        assert _loops_at(code) == {}, code


def test_fill_loops_are_found_with_a_count_other_than_h_l_a() -> None:
    fill = D.LOOP_FILL
    # ld [hl+], a; dec b; jr nz, -4
    assert _loops_at({0x400: b"\x22\x05\x20\xfc\x76"}) == {0x400: fill}
    # ld [hl-], a; nop; jr +0; dec e; jp nz, $0600
    assert _loops_at({0x600: b"\x32\x00\x18\x00\x1d\xc2\x00\x06\x76"}) == {
        0x600: fill | D.LOOP_FILL_DOWN | 3 << D.LOOP_REG_SHIFT | 1 << D.LOOP_NOPS_SHIFT
        | 1 << D.LOOP_JRS_SHIFT | D.LOOP_JP}
    for code in (
        {0x400: b"\x22\x25\x20\xfc\x76"},  # dec h: the count would be the address
        {0x400: b"\x22\x2d\x20\xfc\x76"},  # dec l
        {0x400: b"\x32\x3d\x20\xfc\x76"},  # dec a: the count would be the value
        {0x400: b"\x77\x05\x20\xfc\x76"},  # ld [hl], a: HL does not move
        {0x400: b"\x22\x22\x05\x20\xfb\x76"},  # two stores a pass
        {0xFF: b"\x22\x05\x20\xfc\x76"},  # starts below 0x100 (a boot ROM's place)
    ):
        assert _loops_at(code) == {}, code


def _into_loop_at(code: dict[int, bytes]) -> list[int]:
    """The offsets whose predecoded entry has INTO_LOOP, in a ROM holding ``code``."""
    rom = bytearray(0x8000)
    for at, data in code.items():
        rom[at:at + len(data)] = data
    entries = D.rom_predecode_entries(bytes(rom))
    return np.flatnonzero(entries[:, 2] & D.INTO_LOOP).tolist()


def test_instructions_that_fall_into_a_loop_are_marked() -> None:
    loop = b"\x00\x05\x20\xfc\x76"  # nop; dec b; jr nz, -4; halt
    # ld b, 5 two bytes before; its immediate read as code (dec b) falls in too
    assert _into_loop_at({0x400: b"\x06\x05" + loop}) == [0x400, 0x401]
    # ld bc, $0500 (3 bytes), and its last byte read as dec b
    assert _into_loop_at({0x400: b"\x01\x00\x05" + loop}) == [0x400, 0x402]
    # rl a (CB, 2 bytes), and its second byte read as rla
    assert _into_loop_at({0x400: b"\x76\xcb\x17" + loop}) == [0x401, 0x402]
    for code in (
        {0x400: b"\x76\x77" + loop},  # ld [hl], a: a write
        {0x400: b"\x76\x20\x76" + loop},  # jr nz: a jump (also when it falls through)
        {0x400: b"\x76\xc4\x00\x10" + loop},  # call nz: a jump (and stop: special)
        {0x400: b"\x76\xfb" + loop},  # ei: special
        {0x400: b"\x76\xcb\x16" + loop},  # rl [hl]: a write
        {0x3FFE: b"\x06\x05", 0x4000: loop},  # the instruction before is in bank 0
        {0xFE: b"\x06\x05" + loop},  # below 0x100, where a boot ROM may be mapped
    ):
        assert _into_loop_at(code) == [], code


def test_fused_entries_are_the_next_instructions_with_the_load() -> None:
    # decode.rom_fused_entries: at a register load, the entry of the instruction after it,
    # with the load's kind, pair and addend in word 2's high bits.
    rom = bytearray(0x8000)
    loads = {  # offset: (code bytes, kind, pair, addend)
        0x200: (b"\x23", D.FUSE_STEP, 2, 1),  # INC HL
        0x210: (b"\x0B", D.FUSE_STEP, 0, 0xFFFF),  # DEC BC
        0x218: (b"\x13", D.FUSE_STEP, 1, 1),  # INC DE
        0x220: (b"\x3B", D.FUSE_STEP, 3, 0xFFFF),  # DEC SP
        0x230: (b"\x31\x34\x12", D.FUSE_LOAD, 3, 0x1234),  # LD SP,$1234
        0x238: (b"\x11\xCD\xAB", D.FUSE_LOAD, 1, 0xABCD),  # LD DE,$ABCD
        0x240: (b"\xF8\xFE", D.FUSE_SP_OFFSET, 2, 0xFFFE),  # LD HL,SP-2
        0x248: (b"\xF8\x7F", D.FUSE_SP_OFFSET, 2, 0x007F),  # LD HL,SP+127
        0x258: (b"\x78", D.FUSE_REG8, 0, 7 | 0 << 3),  # LD A,B
        0x260: (b"\x6B", D.FUSE_REG8, 0, 5 | 3 << 3),  # LD L,E
        0x268: (b"\x06\x33", D.FUSE_IMM8, 0, 0 | 0x33 << 3),  # LD B,$33
        0x270: (b"\x3E\xFF", D.FUSE_IMM8, 0, 7 | 0xFF << 3),  # LD A,$FF
        0x3FFB: (b"\x23", D.FUSE_STEP, 2, 1),  # the next one at 0x3FFC: still read
    }
    for at, (code, *_rest) in loads.items():
        rom[at:at + len(code)] = code
        rom[at + len(code)] = 0x7E  # LD A,(HL)
    rom[0x250:0x253] = b"\x23\xCB\x37"  # INC HL; SWAP A: the next entry is the CB one's
    loads[0x250] = (b"\x23", D.FUSE_STEP, 2, 1)
    rom[0x278:0x27D] = b"\x0E\x05\x0D\x20\xFD"  # LD C,5 falls into a countdown loop
    rom[0x280:0x282] = b"\x46\x7E"  # LD B,(HL) and LD A,(HL): (HL) is no register
    rom[0x288:0x28A] = b"\x36\x01"  # LD (HL),1 neither
    rom[0x3FFC] = 0x23  # the next instruction's entry at 0x3FFD is not read: no fusion
    rom[0x7FFF] = 0x03  # INC BC at the ROM's end: nothing after it
    data = bytes(rom)
    plain = D.rom_predecode_entries(data)
    fused = D.rom_fused_entries(data)
    assert fused.shape == plain.shape and fused.dtype == np.int32
    # The load into the loop keeps its own entry, which runs the loop's passes with it.
    assert plain[0x278, 2] < 0 and (fused[0x278] == plain[0x278]).all()
    for at, (code, kind, pair, add) in loads.items():
        after = plain[at + len(code)]
        word2 = fused[at, 2]
        assert (fused[at, [0, 1, 3]] == after[[0, 1, 3]]).all(), hex(at)
        assert word2 & ((1 << D.FUSE_KIND_SHIFT) - 1) == after[2], hex(at)
        assert (word2 >> D.FUSE_KIND_SHIFT) & 7 == kind, hex(at)
        assert D.fuse_length(kind) == len(code), hex(at)
        assert (word2 >> D.FUSE_PAIR_SHIFT) & 3 == pair, hex(at)
        assert (word2 >> D.FUSE_ADD_SHIFT) & 0xFFFF == add, hex(at)
    # (Every byte has an entry: the immediates $7F, $33 and $01 read as LD A,A, INC SP
    # and LD BC,nn.)
    inside = {0x249, 0x269, 0x289}
    assert all((fused[k, 2] >> D.FUSE_KIND_SHIFT) != 0 for k in inside)
    others = [k for k in range(len(plain)) if k not in loads and k not in inside]
    assert (fused[others] == plain[others]).all()
    # No descriptor uses the bits the loads take.
    assert not (D.decode_table().reshape(-1, D.WORDS)[:, 2] >> D.FUSE_KIND_SHIFT).any()


def test_fused_loads_take_their_instructions_bytes_and_m_cycles() -> None:
    # What the run kernel adds for a fused load of each kind (two bits per kind in
    # FUSE_LENGTHS and FUSE_MCYCLES), against the opcode tables.
    ops = {D.FUSE_STEP: 0x23, D.FUSE_SP_OFFSET: 0xF8, D.FUSE_LOAD: 0x21, D.FUSE_REG8: 0x78,
           D.FUSE_IMM8: 0x3E}
    for kind, op in ops.items():
        assert D.fuse_length(kind) == 1 + D.describe(op).n_imm, hex(op)
        assert D.fuse_mcycles(kind) == D.m_cycles(op), hex(op)
    assert D.fuse_length(D.FUSE_NONE) == D.fuse_mcycles(D.FUSE_NONE) == 0


def test_every_register_load_is_fused() -> None:
    # All 13 16-bit ones (INC rr, DEC rr, LD rr,nn for BC DE HL SP, and LD HL,SP+e) and
    # the 56 8-bit ones (LD r,r' and LD r,n for B C D E H L A), and nothing else.
    regs8 = (0, 1, 2, 3, 4, 5, 7)
    ops = [0x03 + 16 * p for p in range(4)] + [0x0B + 16 * p for p in range(4)] + [
        0x01 + 16 * p for p in range(4)] + [0xF8] + [
        0x40 + 8 * d + s for d in regs8 for s in regs8] + [0x06 + 8 * d for d in regs8]
    rom = bytearray(0x8000)
    at = {}
    for k, op in enumerate(ops):
        at[op] = 0x400 + 8 * k
        rom[at[op]] = op
    fused = D.rom_fused_entries(bytes(rom))
    kinds = {op: (fused[a, 2] >> D.FUSE_KIND_SHIFT) & 7 for op, a in at.items()}

    def kind(op: int) -> int:
        if op == 0xF8:
            return D.FUSE_SP_OFFSET
        if 0x40 <= op < 0x80:
            return D.FUSE_REG8
        if op & 7 == 6:
            return D.FUSE_IMM8
        return D.FUSE_LOAD if op & 0xF == 1 else D.FUSE_STEP

    assert kinds == {op: kind(op) for op in ops}
    for op in range(256):
        if op not in at:
            rom[0x2000] = op
            assert (D.rom_fused_entries(bytes(rom))[0x2000, 2] >> D.FUSE_KIND_SHIFT) == 0, hex(op)
