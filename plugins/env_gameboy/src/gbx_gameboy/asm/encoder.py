"""SM83 instruction encoding from the regular bit fields of the opcode map.

Operand field values (the 3-bit ``r8`` field, the 2-bit ``r16`` fields, ``cc``) are the
documented SM83 ones; each instruction form below is its base opcode plus shifted fields.
An encoded instruction is a list of pieces: plain bytes and :class:`Fixup` placeholders
whose expression is evaluated once all symbols are known (sizes never depend on values).
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import AsmError
from .expr import Node, parse_expr
from .lexer import Token

R8 = {"b": 0, "c": 1, "d": 2, "e": 3, "h": 4, "l": 5, "[hl]": 6, "a": 7}
R16 = {"bc": 0, "de": 1, "hl": 2, "sp": 3}  # ld rr,nn / inc / dec / add hl
R16_STACK = {"bc": 0, "de": 1, "hl": 2, "af": 3}  # push / pop
R16_MEM = {"[bc]": 0, "[de]": 1, "[hl+]": 2, "[hl-]": 3}  # ld [rr],a / ld a,[rr]
COND = {"nz": 0, "z": 1, "nc": 2, "c": 3}
ALU = {"add": 0, "adc": 1, "sub": 2, "sbc": 3, "and": 4, "xor": 5, "or": 6, "cp": 7}
ROT = {"rlc": 0, "rrc": 1, "rl": 2, "rr": 3, "sla": 4, "sra": 5, "swap": 6, "srl": 7}
BITOPS = {"bit": 0x40, "res": 0x80, "set": 0xC0}
NO_OPERAND = {
    "nop": [0x00], "rlca": [0x07], "rrca": [0x0F], "rla": [0x17], "rra": [0x1F],
    "daa": [0x27], "cpl": [0x2F], "scf": [0x37], "ccf": [0x3F], "halt": [0x76],
    "reti": [0xD9], "di": [0xF3], "ei": [0xFB],
    "stop": [0x10, 0x00],  # STOP is followed by a padding byte, as hardware skips one
}
REGISTER_NAMES = set(R8) | set(R16) | {"af"}
ILLEGAL_OPCODES = (0xD3, 0xDB, 0xDD, 0xE3, 0xE4, 0xEB, 0xEC, 0xED, 0xF4, 0xFC, 0xFD)


class Fixup(NamedTuple):
    """A value to fill in later. ``kind``: n8, n16, e8 (signed byte), rel (jr), hram (ldh)."""

    kind: str
    node: Node


class Operand(NamedTuple):
    """``kind`` is reg (a register or ``[reg]`` name in ``name``), imm, mem, spoff or cond."""

    kind: str
    name: str = ""
    node: Node | None = None


Piece = int | Fixup


def classify(tokens: list[Token]) -> Operand:
    """Turn one operand's tokens into an :class:`Operand`."""
    first = tokens[0]
    words = [str(t.value).lower() for t in tokens]
    if len(tokens) == 1 and first.kind == "id" and words[0] in REGISTER_NAMES | {"nz", "z", "nc"}:
        return Operand("reg", words[0])
    if first.kind == "op" and first.value == "[":
        if tokens[-1].kind != "op" or tokens[-1].value != "]":
            raise AsmError("memory operand misses its closing ']'")
        inner = tokens[1:-1]
        inner_words = words[1:-1]
        if len(inner) == 1 and inner[0].kind == "id":
            alias = {"hli": "hl+", "hld": "hl-"}.get(inner_words[0], inner_words[0])
            if alias in ("bc", "de", "hl", "hl+", "hl-", "c"):
                return Operand("reg", f"[{alias}]")
        if inner_words in (["hl", "+"], ["hl", "-"]):
            return Operand("reg", f"[hl{inner_words[1]}]")
        if len(inner) == 3 and inner_words[-2:] == ["+", "c"] and inner[0].value == 0xFF00:
            return Operand("reg", "[c]")
        if not inner:
            raise AsmError("empty memory operand '[]'")
        return Operand("mem", node=parse_expr(inner))
    if words[0] == "sp" and len(tokens) >= 3 and words[1] in ("+", "-"):
        offset = parse_expr(tokens[2:])
        return Operand("spoff", node=offset if words[1] == "+" else ("un", "-", offset))
    return Operand("imm", node=parse_expr(tokens))


def _bad(mnemonic: str, ops: list[Operand]) -> AsmError:
    shown = ", ".join(o.name if o.kind == "reg" else o.kind for o in ops)
    return AsmError(f"bad operands for '{mnemonic}': {shown or '(none)'}")


def _value_operand(op: Operand) -> Node:
    assert op.node is not None
    return op.node


def _encode_ld(ops: list[Operand]) -> list[Piece]:
    dst, src = ops
    d, s = dst.name if dst.kind == "reg" else "", src.name if src.kind == "reg" else ""
    if d in R8 and s in R8 and not (d == s == "[hl]"):
        return [0x40 | R8[d] << 3 | R8[s]]
    if d in R8 and src.kind == "imm":
        return [0x06 | R8[d] << 3, Fixup("n8", _value_operand(src))]
    if d in R16 and src.kind == "imm":
        return [0x01 | R16[d] << 4, Fixup("n16", _value_operand(src))]
    if d in R16_MEM and s == "a":
        return [0x02 | R16_MEM[d] << 4]
    if d == "a" and s in R16_MEM:
        return [0x0A | R16_MEM[s] << 4]
    if d == "[c]" and s == "a":
        return [0xE2]
    if d == "a" and s == "[c]":
        return [0xF2]
    if dst.kind == "mem" and s == "a":
        return [0xEA, Fixup("n16", _value_operand(dst))]
    if d == "a" and src.kind == "mem":
        return [0xFA, Fixup("n16", _value_operand(src))]
    if dst.kind == "mem" and s == "sp":
        return [0x08, Fixup("n16", _value_operand(dst))]
    if d == "sp" and s == "hl":
        return [0xF9]
    if d == "hl" and src.kind == "spoff":
        return [0xF8, Fixup("e8", _value_operand(src))]
    if d == "hl" and s == "sp":
        return [0xF8, 0x00]
    raise _bad("ld", ops)


def _encode_ldh(ops: list[Operand]) -> list[Piece]:
    dst, src = ops
    if dst.kind == "mem" and src.name == "a":
        return [0xE0, Fixup("hram", _value_operand(dst))]
    if dst.name == "a" and src.kind == "mem":
        return [0xF0, Fixup("hram", _value_operand(src))]
    if dst.name == "[c]" and src.name == "a":
        return [0xE2]
    if dst.name == "a" and src.name == "[c]":
        return [0xF2]
    raise _bad("ldh", ops)


def _encode_alu(mnemonic: str, ops: list[Operand]) -> list[Piece]:
    if mnemonic == "add" and len(ops) == 2 and ops[0].name == "hl" and ops[1].name in R16:
        return [0x09 | R16[ops[1].name] << 4]
    if mnemonic == "add" and len(ops) == 2 and ops[0].name == "sp" and ops[1].kind == "imm":
        return [0xE8, Fixup("e8", _value_operand(ops[1]))]
    if len(ops) == 2 and ops[0].name == "a":
        ops = ops[1:]
    if len(ops) != 1:
        raise _bad(mnemonic, ops)
    (src,) = ops
    if src.kind == "reg" and src.name in R8:
        return [0x80 | ALU[mnemonic] << 3 | R8[src.name]]
    if src.kind == "imm":
        return [0xC6 | ALU[mnemonic] << 3, Fixup("n8", _value_operand(src))]
    raise _bad(mnemonic, ops)


def _encode_flow(mnemonic: str, ops: list[Operand]) -> list[Piece]:
    cond = None
    if len(ops) == 2 or (mnemonic == "ret" and len(ops) == 1):
        if ops[0].kind != "reg" or ops[0].name not in COND:
            raise AsmError(f"'{mnemonic}' condition must be nz, z, nc or c")
        cond = COND[ops[0].name]
        ops = ops[1:]
    if mnemonic == "ret":
        if ops:
            raise _bad(mnemonic, ops)
        return [0xC9] if cond is None else [0xC0 | cond << 3]
    if len(ops) != 1:
        raise _bad(mnemonic, ops)
    (target,) = ops
    if mnemonic == "jp" and cond is None and target.name in ("hl", "[hl]"):
        return [0xE9]
    if target.kind != "imm":
        raise _bad(mnemonic, ops)
    node = _value_operand(target)
    if mnemonic == "jr":
        return [0x18 if cond is None else 0x20 | cond << 3, Fixup("rel", node)]
    base = {"jp": (0xC3, 0xC2), "call": (0xCD, 0xC4)}[mnemonic]
    return [base[0] if cond is None else base[1] | cond << 3, Fixup("n16", node)]


def _encode_incdec(mnemonic: str, ops: list[Operand]) -> list[Piece]:
    if len(ops) != 1 or ops[0].kind != "reg":
        raise _bad(mnemonic, ops)
    name = ops[0].name
    is_dec = mnemonic == "dec"
    if name in R8:
        return [(0x05 if is_dec else 0x04) | R8[name] << 3]
    if name in R16:
        return [(0x0B if is_dec else 0x03) | R16[name] << 4]
    raise _bad(mnemonic, ops)


def _encode_cb(mnemonic: str, ops: list[Operand]) -> list[Piece]:
    if mnemonic in ROT:
        if len(ops) != 1 or ops[0].name not in R8:
            raise _bad(mnemonic, ops)
        return [0xCB, ROT[mnemonic] << 3 | R8[ops[0].name]]
    if len(ops) != 2 or ops[0].kind != "imm" or ops[1].name not in R8:
        raise _bad(mnemonic, ops)
    return [0xCB, Fixup(f"bit{BITOPS[mnemonic]:02X}{R8[ops[1].name]}", _value_operand(ops[0]))]


def encode(mnemonic: str, ops: list[Operand]) -> list[Piece]:
    """Encode one instruction; ``mnemonic`` is lower-case."""
    if mnemonic in NO_OPERAND:
        if ops:
            raise _bad(mnemonic, ops)
        return list(NO_OPERAND[mnemonic])
    if mnemonic in ("ld", "ldh", "ldi", "ldd", "ldhl") and len(ops) != 2:
        raise AsmError(f"'{mnemonic}' takes two operands")
    if mnemonic == "ld":
        return _encode_ld(ops)
    if mnemonic == "ldh":
        return _encode_ldh(ops)
    if mnemonic in ("ldi", "ldd"):
        step = "+" if mnemonic == "ldi" else "-"
        ops = [Operand("reg", f"[hl{step}]") if o.name == "[hl]" else o for o in ops]
        return _encode_ld(ops)
    if mnemonic == "ldhl":
        if ops[0].name != "sp" or ops[1].kind != "imm":
            raise _bad(mnemonic, ops)
        return [0xF8, Fixup("e8", _value_operand(ops[1]))]
    if mnemonic in ALU:
        return _encode_alu(mnemonic, ops)
    if mnemonic in ("jp", "jr", "call", "ret"):
        return _encode_flow(mnemonic, ops)
    if mnemonic in ("inc", "dec"):
        return _encode_incdec(mnemonic, ops)
    if mnemonic in ("push", "pop"):
        if len(ops) != 1 or ops[0].name not in R16_STACK:
            raise _bad(mnemonic, ops)
        return [(0xC5 if mnemonic == "push" else 0xC1) | R16_STACK[ops[0].name] << 4]
    if mnemonic == "rst":
        if len(ops) != 1 or ops[0].kind != "imm":
            raise _bad(mnemonic, ops)
        return [Fixup("rst", _value_operand(ops[0]))]
    if mnemonic in ROT or mnemonic in BITOPS:
        return _encode_cb(mnemonic, ops)
    raise AsmError(f"unknown mnemonic '{mnemonic}'")


MNEMONICS = (
    set(NO_OPERAND) | set(ALU) | set(ROT) | set(BITOPS)
    | {"ld", "ldh", "ldi", "ldd", "ldhl", "jp", "jr", "call", "ret", "inc", "dec", "push", "pop",
       "rst"}
)


def piece_size(piece: Piece) -> int:
    if isinstance(piece, int):
        return 1
    return 2 if piece.kind == "n16" else 1


def resolve_fixup(fixup: Fixup, value: int, pc_after: int) -> list[int]:
    """Range-check ``value`` for its field and return the bytes; ``pc_after`` is for jr."""
    kind = fixup.kind
    if kind == "n8":
        if not -128 <= value <= 255:
            raise AsmError(f"value {value} out of range for 8-bit operand (-128..255)")
        return [value & 0xFF]
    if kind == "n16":
        if not -32768 <= value <= 65535:
            raise AsmError(f"value {value} out of range for 16-bit operand (-32768..65535)")
        return [value & 0xFF, (value >> 8) & 0xFF]
    if kind == "e8":
        if not -128 <= value <= 127:
            raise AsmError(f"offset {value} out of range for signed 8-bit operand (-128..127)")
        return [value & 0xFF]
    if kind == "rel":
        offset = value - pc_after
        if not -128 <= offset <= 127:
            raise AsmError(f"jr target out of range ({offset} bytes; -128..127): use jp")
        return [offset & 0xFF]
    if kind == "hram":
        if 0xFF00 <= value <= 0xFFFF:
            return [value & 0xFF]
        if 0 <= value <= 0xFF:
            return [value]
        raise AsmError(f"ldh address ${value:X} out of range ($FF00-$FFFF or $00-$FF)")
    if kind == "rst":
        if value not in range(0, 0x40, 8):
            raise AsmError(f"rst target ${value:X} invalid (one of $00,$08,...,$38)")
        return [0xC7 | value]
    if kind.startswith("bit"):
        if not 0 <= value <= 7:
            raise AsmError(f"bit number {value} out of range (0..7)")
        return [int(kind[3:5], 16) | value << 3 | int(kind[5])]
    raise AssertionError(kind)
