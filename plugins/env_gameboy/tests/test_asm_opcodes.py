"""Every SM83 opcode (244 base + 256 CB-prefixed) assembles to its bit-field encoding.

The expected table comes from decoding each opcode byte by its bit fields
(x = bits 7-6, y = bits 5-3, z = bits 2-0, p = y >> 1, q = y & 1), written here
independently of the assembler's own encoder, which works in the other direction.
"""

from __future__ import annotations

from gbx_gameboy.asm import assemble

R8 = ["b", "c", "d", "e", "h", "l", "[hl]", "a"]
RP = ["bc", "de", "hl", "sp"]
RP2 = ["bc", "de", "hl", "af"]
CC = ["nz", "z", "nc", "c"]
ALU = ["add a,", "adc a,", "sub", "sbc a,", "and", "xor", "or", "cp"]
ROT = ["rlc", "rrc", "rl", "rr", "sla", "sra", "swap", "srl"]
ILLEGAL = {0xD3, 0xDB, 0xDD, 0xE3, 0xE4, 0xEB, 0xEC, 0xED, 0xF4, 0xFC, 0xFD}
N8, N16, E8, JR_DELTA = 0x5A, 0x1234, -3, 0x12  # operand values used in the table
N16_BYTES = [0x34, 0x12]


def decode_base(op: int) -> tuple[str, list[int]] | None:
    """Assembly text and full encoding for base opcode ``op``; None for illegal/CB."""
    x, y, z = op >> 6, (op >> 3) & 7, op & 7
    p, q = y >> 1, y & 1
    if op in ILLEGAL or op == 0xCB:
        return None
    if x == 0:
        if z == 0:
            if y == 0:
                return "nop", [op]
            if y == 1:
                return f"ld [{N16}], sp", [op, *N16_BYTES]
            if y == 2:
                return "stop", [op, 0x00]
            cond = "" if y == 3 else CC[y - 4] + ", "
            return f"jr {cond}@ + {JR_DELTA}", [op, JR_DELTA - 2]
        if z == 1:
            if q == 0:
                return f"ld {RP[p]}, {N16}", [op, *N16_BYTES]
            return f"add hl, {RP[p]}", [op]
        if z == 2:
            mem = ["[bc]", "[de]", "[hl+]", "[hl-]"][p]
            return (f"ld {mem}, a" if q == 0 else f"ld a, {mem}"), [op]
        if z == 3:
            return f"{'inc' if q == 0 else 'dec'} {RP[p]}", [op]
        if z == 4:
            return f"inc {R8[y]}", [op]
        if z == 5:
            return f"dec {R8[y]}", [op]
        if z == 6:
            return f"ld {R8[y]}, {N8}", [op, N8]
        return ["rlca", "rrca", "rla", "rra", "daa", "cpl", "scf", "ccf"][y], [op]
    if x == 1:
        return ("halt" if y == z == 6 else f"ld {R8[y]}, {R8[z]}"), [op]
    if x == 2:
        return f"{ALU[y]} {R8[z]}", [op]
    if z == 0:
        if y < 4:
            return f"ret {CC[y]}", [op]
        return [
            (f"ldh [$FF00 + {N8}], a", [op, N8]),
            (f"add sp, {E8}", [op, E8 & 0xFF]),
            (f"ldh a, [{N8}]", [op, N8]),
            (f"ld hl, sp + {E8}", [op, E8 & 0xFF]),
        ][y - 4]
    if z == 1:
        if q == 0:
            return f"pop {RP2[p]}", [op]
        return ["ret", "reti", "jp hl", "ld sp, hl"][p], [op]
    if z == 2:
        if y < 4:
            return f"jp {CC[y]}, {N16}", [op, *N16_BYTES]
        return [
            ("ld [c], a", [op]),
            (f"ld [{N16}], a", [op, *N16_BYTES]),
            ("ld a, [c]", [op]),
            (f"ld a, [{N16}]", [op, *N16_BYTES]),
        ][y - 4]
    if z == 3:
        return {0: (f"jp {N16}", [op, *N16_BYTES]), 6: ("di", [op]), 7: ("ei", [op])}[y]
    if z == 4:
        return f"call {CC[y]}, {N16}", [op, *N16_BYTES]
    if z == 5:
        return (f"push {RP2[p]}", [op]) if q == 0 else (f"call {N16}", [op, *N16_BYTES])
    if z == 6:
        return f"{ALU[y]} {N8}", [op, N8]
    return f"rst {y * 8}", [op]


def decode_cb(op: int) -> tuple[str, list[int]]:
    x, y, z = op >> 6, (op >> 3) & 7, op & 7
    if x == 0:
        return f"{ROT[y]} {R8[z]}", [0xCB, op]
    return f"{['bit', 'res', 'set'][x - 1]} {y}, {R8[z]}", [0xCB, op]


def _table() -> list[tuple[str, str, list[int]]]:
    rows = []
    for op in range(256):
        decoded = decode_base(op)
        if decoded is not None:
            rows.append((f"{op:02X}", *decoded))
    for op in range(256):
        rows.append((f"CB{op:02X}", *decode_cb(op)))
    return rows


def _assemble_table(rows: list[tuple[str, str, list[int]]], transform=str) -> bytes:
    lines = ['SECTION "ops", ROM0[$0150]'] + [f"  {transform(text)}" for _, text, _ in rows]
    return assemble("\n".join(lines))


def _compare(rom: bytes, rows: list[tuple[str, str, list[int]]]) -> list[str]:
    mismatches = []
    at = 0x150
    for name, text, expected in rows:
        got = list(rom[at : at + len(expected)])
        if got != expected:
            want = bytes(expected).hex()
            mismatches.append(f"{name} '{text}': got {bytes(got).hex()} want {want}")
        at += len(expected)
    return mismatches


def test_table_covers_every_legal_opcode() -> None:
    rows = _table()
    base = {bytes_[0] for name, _, bytes_ in rows if not name.startswith("CB")}
    cb = {bytes_[1] for name, _, bytes_ in rows if name.startswith("CB")}
    assert len(base) == 256 - len(ILLEGAL) - 1 and len(cb) == 256
    assert base.isdisjoint(ILLEGAL)


def test_every_opcode_encodes_as_the_bit_fields_say() -> None:
    rows = _table()
    rom = _assemble_table(rows)
    assert _compare(rom, rows) == []


def test_mnemonics_and_registers_are_case_insensitive() -> None:
    rows = _table()
    rom = _assemble_table(rows, transform=lambda t: t.upper().replace("$FF00", "$ff00"))
    assert _compare(rom, rows) == []


def test_alternate_spellings() -> None:
    src = """
SECTION "alt", ROM0[$0150]
    ld a, [hli]
    ld [hld], a
    ldi a, [hl]
    ldd [hl], a
    ldh [$40], a
    ld a, [$FF00+c]
    ldh [c], a
    add b
    adc a, 1
    ldhl sp, 4
    jp [hl]
    rst $38
"""
    rom = assemble(src)
    want = bytes.fromhex("2a 32 2a 32 e040 f2 e2 80 ce01 f804 e9 ff".replace(" ", ""))
    assert rom[0x150 : 0x150 + len(want)] == want
