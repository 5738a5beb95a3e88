"""The two-pass driver: directives, labels, macros, and the final image.

Pass 1 runs the whole source to learn every section's size and every label's offset
(instruction sizes never depend on operand values).  Floating sections are then placed and
pass 2 runs the source again with all label addresses known, evaluating every operand.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from . import encoder
from .errors import AsmError
from .expr import Node, Scope, Undefined, evaluate, parse_expr
from .image import REGIONS, HeaderField, Section, build_rom, place_sections
from .lexer import Token, split_commas, tokenize


@dataclass(frozen=True)
class Line:
    file: str
    number: int
    text: str


@dataclass
class Macro:
    name: str
    body: list[Line]


_BLOCK_OPENERS = {"REPT": "ENDR", "MACRO": "ENDM"}
_MAX_DEPTH = 64
_HEADER_FIELDS = {
    "HEADER_CART_TYPE": 0x147,
    "HEADER_ROM_SIZE": 0x148,
    "HEADER_RAM_SIZE": 0x149,
    "HEADER_VERSION": 0x14C,
}


def split_lines(text: str, file: str) -> list[Line]:
    return [Line(file, i + 1, t) for i, t in enumerate(text.splitlines())]


def _word(tok: Token) -> str:
    return str(tok.value).upper() if tok.kind == "id" else ""


def _split_macro_args(text: str) -> list[str]:
    args: list[str] = []
    depth, quote, current = 0, "", []
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            current.append(ch)
        elif ch in "([":
            depth += 1
            current.append(ch)
        elif ch in ")]":
            depth -= 1
            current.append(ch)
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
        elif ch == ";":
            break
        else:
            current.append(ch)
    last = "".join(current).strip()
    if last or args:
        args.append(last)
    return args


class _Pass:
    """One run over the source.  ``labels`` holds addresses known from the previous pass."""

    def __init__(
        self,
        final: bool,
        labels: dict[str, tuple[int, int]],
        include_dirs: list[str],
        placement: dict[int, tuple[int, int]] | None = None,
    ) -> None:
        self.final = final
        self.placement = placement or {}  # section index -> (address, bank) from pass 1
        self.known_labels = labels
        self.include_dirs = include_dirs
        self.sections: list[Section] = []
        self.section_names: set[str] = set()
        self.current: Section | None = None
        self.constants: dict[str, int] = {}
        self.equ_names: set[str] = set()
        self.labels: dict[str, tuple[int, int]] = {}  # name -> (section index, offset)
        self.scope = ""
        self.macros: dict[str, Macro] = {}
        self.header: list[HeaderField] = []
        self.unique = 0
        self.depth = 0
        self.where = Line("<source>", 0, "")
        self.expr_scope = Scope(self._lookup, self._pc, self._bank, self._defined)

    # ----- symbols -------------------------------------------------------------------------
    def _qualify(self, name: str) -> str:
        if name.startswith("."):
            if not self.scope:
                raise AsmError(f"local label '{name}' used before any global label")
            return self.scope + name
        return name

    def _label_address(self, full: str) -> tuple[int, int] | None:
        if full in self.known_labels:
            return self.known_labels[full]
        if full in self.labels:
            index, offset = self.labels[full]
            sec = self.sections[index]
            if sec.address is not None and sec.bank is not None:
                return sec.address + offset, sec.bank
        return None

    def _lookup(self, name: str) -> int:
        full = self._qualify(name)
        if full in self.constants:
            return self.constants[full]
        found = self._label_address(full)
        if found is None:
            raise Undefined(full)
        return found[0]

    def _bank(self, name: str) -> int:
        full = self._qualify(name)
        found = self._label_address(full)
        if found is None:
            raise Undefined(full)
        return found[1]

    def _defined(self, name: str) -> bool:
        full = self._qualify(name)
        return full in self.constants or full in self.labels

    def _pc(self) -> int:
        sec = self._section()
        if sec.address is None:
            raise Undefined("@")
        return sec.address + sec.size

    def _section(self) -> Section:
        if self.current is None:
            raise AsmError("code or data outside any SECTION (add SECTION \"name\", ROM0[$addr])")
        return self.current

    def eval_now(self, node: Node, what: str) -> int:
        """Evaluate a value needed to lay out the code (``ds``, ``org``, ``IF``, ...)."""
        try:
            return evaluate(node, self.expr_scope)
        except Undefined as err:
            raise AsmError(f"{what} uses '{err.name}', which is not defined above it") from None

    def eval_final(self, node: Node) -> int:
        """Evaluate an operand in the final pass (0 in the first pass)."""
        if not self.final:
            return 0
        try:
            return evaluate(node, self.expr_scope)
        except Undefined as err:
            raise AsmError(f"undefined symbol '{err.name}'") from None

    # ----- line processing -------------------------------------------------------------------
    def run(self, lines: list[Line]) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise AsmError("macros/REPT/INCLUDE nested too deep (recursion?)")
        conditions: list[tuple[bool, bool]] = []  # (active, some branch already taken)
        i = 0
        while i < len(lines):
            line = lines[i]
            self.where = line
            i += 1
            try:
                tokens = tokenize(line.text)
                head = _word(tokens[0]) if tokens else ""
                active = all(c[0] for c in conditions)
                if head in ("IF", "ELIF", "ELSE", "ENDC"):
                    self._conditional(head, tokens, conditions)
                    continue
                if not active or not tokens:
                    continue
                block_kind = head if head in _BLOCK_OPENERS else ""
                if not block_kind and len(tokens) >= 3 and _word(tokens[2]) == "MACRO":
                    block_kind = "MACRO"  # old form "name: MACRO"
                if block_kind:
                    body, i = self._collect_block(lines, i, block_kind)
                    self._block(block_kind, tokens, body)
                    continue
                self._statement(tokens, line)
            except AsmError as err:
                if err.line:
                    raise
                raise AsmError(err.message, line.file, line.number) from None
        if conditions:
            raise AsmError("IF without ENDC", self.where.file, self.where.number)
        self.depth -= 1

    def _conditional(self, head: str, tokens: list[Token], conds: list[tuple[bool, bool]]) -> None:
        outer = all(c[0] for c in conds[:-1]) if head != "IF" else all(c[0] for c in conds)
        if head == "IF":
            value = bool(self.eval_now(parse_expr(tokens[1:]), "IF")) if outer else False
            conds.append((value, value))
            return
        if not conds:
            raise AsmError(f"{head} without IF")
        _, taken = conds[-1]
        if head == "ELIF":
            value = (not taken and outer and bool(self.eval_now(parse_expr(tokens[1:]), "ELIF")))
            conds[-1] = (value, taken or value)
        elif head == "ELSE":
            conds[-1] = (not taken, True)
        else:
            conds.pop()

    def _collect_block(self, lines: list[Line], i: int, kind: str) -> tuple[list[Line], int]:
        closer = _BLOCK_OPENERS[kind]
        depth = 1
        body: list[Line] = []
        while i < len(lines):
            # bodies may hold macro arguments (\1) that do not tokenize yet: look at words only
            match = re.match(r"\s*([A-Za-z_]\w*)", lines[i].text)
            head = match.group(1).upper() if match else ""
            if kind == "REPT" and head == "REPT":
                depth += 1
            if head == closer:
                depth -= 1
                if depth == 0:
                    return body, i + 1
            body.append(lines[i])
            i += 1
        raise AsmError(f"{kind} without {closer}")

    def _block(self, kind: str, tokens: list[Token], body: list[Line]) -> None:
        if kind == "REPT":
            count = self.eval_now(parse_expr(tokens[1:]), "REPT count")
            if not 0 <= count <= 65536:
                raise AsmError(f"REPT count {count} out of range (0..65536)")
            for _ in range(count):
                self.run(body)
            return
        name_tok = tokens[1] if _word(tokens[0]) == "MACRO" else tokens[0]
        if len(tokens) < 2 or name_tok.kind != "id":
            raise AsmError("MACRO needs a name: MACRO name")
        name = str(name_tok.value)
        if name.lower() in encoder.MNEMONICS:
            raise AsmError(f"macro name '{name}' is an instruction mnemonic")
        self.macros[name] = Macro(name, body)

    def _expand_macro(self, macro: Macro, line: Line) -> None:
        match = re.match(r"\s*(?:[\w.]+::?\s*)?[\w.]+\s*(.*)$", line.text)
        args = _split_macro_args(match.group(1) if match else "")
        self.unique += 1
        suffix = f"_{self.unique}"

        def substitute(text: str) -> str:
            def repl(m: re.Match[str]) -> str:
                key = m.group(1)
                if key == "@":
                    return suffix
                index = int(key)
                if index > len(args):
                    raise AsmError(f"macro '{macro.name}' uses \\{index} but got {len(args)} args")
                return args[index - 1]

            return re.sub(r"\\([1-9@])", repl, text)

        saved = self.constants.get("_NARG")
        self.constants["_NARG"] = len(args)
        body = [Line(b.file, b.number, substitute(b.text)) for b in macro.body]
        try:
            self.run(body)
        except AsmError as err:
            raise AsmError(f"{err.message} (in macro '{macro.name}' called at "
                           f"{line.file}:{line.number})", err.file, err.line) from None
        if saved is None:
            del self.constants["_NARG"]
        else:
            self.constants["_NARG"] = saved

    # ----- statements --------------------------------------------------------------------------
    def _statement(self, tokens: list[Token], line: Line) -> None:
        if len(tokens) >= 2 and tokens[0].kind == "id" and tokens[1].value in (":", "::"):
            self._define_label(str(tokens[0].value))
            tokens = tokens[2:]
            if not tokens:
                return
        if _word(tokens[0]) == "DEF":
            tokens = tokens[1:]
            if len(tokens) < 3:
                raise AsmError("DEF needs: DEF NAME EQU value (or = value)")
        if len(tokens) >= 2 and tokens[0].kind == "id" and (
            _word(tokens[1]) == "EQU" or tokens[1].value == "="
        ):
            self._define_constant(str(tokens[0].value), tokens[2:], _word(tokens[1]) == "EQU")
            return
        if tokens[0].kind != "id":
            raise AsmError(f"expected an instruction or directive, got '{tokens[0].value}'")
        word = str(tokens[0].value)
        handler = _DIRECTIVES.get(word.upper())
        if handler is not None:
            handler(self, tokens[1:], line)
        elif word.lower() in encoder.MNEMONICS:
            self._instruction(word.lower(), tokens[1:])
        elif word in self.macros:
            self._expand_macro(self.macros[word], line)
        else:
            raise AsmError(f"unknown mnemonic or directive '{word}'")

    def _define_label(self, name: str) -> None:
        if not name.startswith("."):
            self.scope = name.split(".")[0]
        full = self._qualify(name)
        if full in self.labels or full in self.constants:
            raise AsmError(f"symbol '{full}' defined twice")
        sec = self._section()
        self.labels[full] = (self.sections.index(sec), sec.size)
        if self.final:
            assert sec.address is not None
            if self.known_labels.get(full, (None,))[0] != sec.address + sec.size:
                raise AsmError(f"label '{full}' moved between passes (IF on a later label?)")

    def _define_constant(self, name: str, value_tokens: list[Token], is_equ: bool) -> None:
        if name.startswith(".") or name in self.labels:
            raise AsmError(f"cannot define constant '{name}'")
        if is_equ and name in self.equ_names:
            raise AsmError(f"constant '{name}' defined twice (use '=' for a variable)")
        node = parse_expr(value_tokens)
        try:
            value = evaluate(node, self.expr_scope)
        except Undefined as err:
            if self.final:
                raise AsmError(f"undefined symbol '{err.name}'") from None
            return  # a later label; known in the final pass
        self.constants[name] = value
        if is_equ:
            self.equ_names.add(name)

    def _instruction(self, mnemonic: str, operand_tokens: list[Token]) -> None:
        ops = [encoder.classify(part) for part in split_commas(operand_tokens)]
        pieces = encoder.encode(mnemonic, ops)
        sec = self._section()
        if not sec.region.holds_data:
            raise AsmError(f"instruction in {sec.region.name} section '{sec.name}'")
        size = sum(encoder.piece_size(p) for p in pieces)
        out: list[int] = []
        for piece in pieces:
            if isinstance(piece, int):
                out.append(piece)
            elif self.final:
                pc_after = (sec.address or 0) + sec.size + size
                out.extend(encoder.resolve_fixup(piece, self.eval_final(piece.node), pc_after))
            else:
                out.extend([0] * encoder.piece_size(piece))
        sec.emit(out, self.where.file, self.where.number)

    def open_section(self, sec: Section) -> None:
        if sec.name in self.section_names:
            raise AsmError(f"section '{sec.name}' defined twice")
        self.section_names.add(sec.name)
        if self.final:
            previous = self.placement.get(len(self.sections))
            if previous is not None:
                sec.address, sec.bank = previous
        self.sections.append(sec)
        self.current = sec


# ----- directives ----------------------------------------------------------------------------
def _bracket_value(p: _Pass, tokens: list[Token], keyword: str) -> int | None:
    """Parse ``KEYWORD[expr]`` (or bare ``KEYWORD``) and return the value or None."""
    if len(tokens) == 1:
        return None
    if tokens[1].value != "[" or tokens[-1].value != "]":
        raise AsmError(f"expected {keyword}[value]")
    return p.eval_now(parse_expr(tokens[2:-1]), f"{keyword}[...]")


def _dir_section(p: _Pass, tokens: list[Token], line: Line) -> None:
    parts = split_commas(tokens)
    if len(parts) < 2 or len(parts[0]) != 1 or parts[0][0].kind != "str":
        raise AsmError('SECTION needs: SECTION "name", ROM0[$addr] (or ROMX[$addr], BANK[n])')
    name = str(parts[0][0].value)
    region_name = _word(parts[1][0])
    if region_name not in REGIONS:
        raise AsmError(f"unknown section type '{parts[1][0].value}' ({', '.join(REGIONS)})")
    address = _bracket_value(p, parts[1], region_name)
    bank = None
    for extra in parts[2:]:
        if _word(extra[0]) != "BANK":
            raise AsmError(f"unexpected '{extra[0].value}' in SECTION (only BANK[n])")
        bank = _bracket_value(p, extra, "BANK")
    p.open_section(Section(name, REGIONS[region_name], address, bank, line.file, line.number))


def _dir_org(p: _Pass, tokens: list[Token], line: Line) -> None:
    address = p.eval_now(parse_expr(tokens), "org")
    region = p.current.region if p.current else REGIONS["ROM0"]
    bank = p.current.bank if p.current else None
    if not region.start <= address < region.end:
        matches = [r for r in REGIONS.values() if r.start <= address < r.end]
        if not matches:
            raise AsmError(f"org ${address:04X} is not in any section region")
        region, bank = matches[0], None
    name = f"org ${address:04X} ({line.file}:{line.number})"
    p.open_section(Section(name, region, address, bank, line.file, line.number))


def _dir_db(p: _Pass, tokens: list[Token], line: Line) -> None:
    out: list[int] = []
    for part in split_commas(tokens):
        if len(part) == 1 and part[0].kind == "str":
            text = str(part[0].value)
            if any(ord(ch) > 255 for ch in text):
                raise AsmError(f'string "{text}" has a character above 255')
            out.extend(ord(ch) for ch in text)
        else:
            value = p.eval_final(parse_expr(part))
            out.extend(encoder.resolve_fixup(encoder.Fixup("n8", ("num", 0)), value, 0))
    p._section().emit(out, line.file, line.number)


def _dir_dw(p: _Pass, tokens: list[Token], line: Line) -> None:
    out: list[int] = []
    for part in split_commas(tokens):
        value = p.eval_final(parse_expr(part))
        out.extend(encoder.resolve_fixup(encoder.Fixup("n16", ("num", 0)), value, 0))
    p._section().emit(out, line.file, line.number)


def _dir_ds(p: _Pass, tokens: list[Token], line: Line) -> None:
    parts = split_commas(tokens)
    if not parts:
        raise AsmError("ds needs a byte count: ds count[, fill bytes]")
    count = p.eval_now(parse_expr(parts[0]), "ds count")
    if count < 0:
        raise AsmError(f"ds count {count} is negative (section already past that address?)")
    fill = [p.eval_final(parse_expr(part)) & 0xFF for part in parts[1:]] or None
    sec = p._section()
    if fill and not sec.region.holds_data:
        raise AsmError(f"ds fill bytes in {sec.region.name} section '{sec.name}'")
    sec.reserve(count, fill)


def _string_arg(tokens: list[Token], what: str) -> str:
    if not tokens or tokens[0].kind != "str":
        raise AsmError(f'{what} needs a quoted file name: {what} "file"')
    return str(tokens[0].value)


def _find_file(p: _Pass, name: str, line: Line) -> str:
    base = os.path.dirname(line.file) if not line.file.startswith("<") else "."
    for folder in (base, *p.include_dirs):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    raise AsmError(f"file '{name}' not found (looked next to {line.file} and in include dirs)")


def _dir_include(p: _Pass, tokens: list[Token], line: Line) -> None:
    path = _find_file(p, _string_arg(tokens, "INCLUDE"), line)
    with open(path, encoding="utf-8") as f:
        p.run(split_lines(f.read(), path))


def _dir_incbin(p: _Pass, tokens: list[Token], line: Line) -> None:
    parts = split_commas(tokens)
    path = _find_file(p, _string_arg(parts[0] if parts else [], "INCBIN"), line)
    with open(path, "rb") as f:
        data = f.read()
    start = p.eval_now(parse_expr(parts[1]), "INCBIN start") if len(parts) > 1 else 0
    length = p.eval_now(parse_expr(parts[2]), "INCBIN length") if len(parts) > 2 else None
    end = len(data) if length is None else start + length
    if not 0 <= start <= end <= len(data):
        raise AsmError(f"INCBIN range {start}..{end} outside '{path}' ({len(data)} bytes)")
    p._section().emit(data[start:end], line.file, line.number)


def _dir_title(p: _Pass, tokens: list[Token], line: Line) -> None:
    title = _string_arg(tokens, "HEADER_TITLE")
    if len(title) > 16 or not title.isascii():
        raise AsmError(f'title "{title}" must be at most 16 ASCII characters')
    data = title.encode("ascii").ljust(16, b"\0")
    p.header.append(HeaderField(0x134, data, "HEADER_TITLE", line.file, line.number))


def _header_byte(directive: str) -> Callable[[_Pass, list[Token], Line], None]:
    def handler(p: _Pass, tokens: list[Token], line: Line) -> None:
        value = p.eval_now(parse_expr(tokens), directive)
        if not 0 <= value <= 255:
            raise AsmError(f"{directive} value {value} out of range (0..255)")
        offset = _HEADER_FIELDS[directive]
        p.header.append(HeaderField(offset, bytes([value]), directive, line.file, line.number))

    return handler


def _dir_assert(p: _Pass, tokens: list[Token], line: Line) -> None:
    parts = split_commas(tokens)
    if not parts:
        raise AsmError('ASSERT needs a condition: ASSERT expr[, "message"]')
    if not p.final:
        return
    if not p.eval_final(parse_expr(parts[0])):
        message = str(parts[1][0].value) if len(parts) > 1 and parts[1][0].kind == "str" else ""
        raise AsmError(f"assertion failed{': ' + message if message else ''}")


def _dir_ignore(p: _Pass, tokens: list[Token], line: Line) -> None:
    """EXPORT/GLOBAL: every symbol is visible anyway in a one-unit assembler."""


def _dir_stray(p: _Pass, tokens: list[Token], line: Line) -> None:
    raise AsmError("ENDR/ENDM without REPT/MACRO")


_DIRECTIVES: dict[str, Callable[[_Pass, list[Token], Line], None]] = {
    "SECTION": _dir_section,
    "ORG": _dir_org,
    "DB": _dir_db,
    "DW": _dir_dw,
    "DS": _dir_ds,
    "INCLUDE": _dir_include,
    "INCBIN": _dir_incbin,
    "HEADER_TITLE": _dir_title,
    "ASSERT": _dir_assert,
    "EXPORT": _dir_ignore,
    "GLOBAL": _dir_ignore,
    "ENDR": _dir_stray,
    "ENDM": _dir_stray,
    **{name: _header_byte(name) for name in _HEADER_FIELDS},
}


def assemble_with_symbols(
    source: str, *, origin_file: str = "<source>", include_dirs: list[str] | None = None
) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """Like :func:`assemble`, also returning every label as ``name -> (bank, address)``."""
    lines = split_lines(source, origin_file)
    dirs = list(include_dirs or [])
    first = _Pass(final=False, labels={}, include_dirs=dirs)
    first.run(lines)
    place_sections(first.sections)
    labels: dict[str, tuple[int, int]] = {}
    for name, (index, offset) in first.labels.items():
        sec = first.sections[index]
        assert sec.address is not None and sec.bank is not None
        labels[name] = (sec.address + offset, sec.bank)
    placement = {
        i: (s.address, s.bank) for i, s in enumerate(first.sections)
        if s.address is not None and s.bank is not None
    }
    final = _Pass(final=True, labels=labels, include_dirs=dirs, placement=placement)
    final.run(lines)
    for a, b in zip(first.sections, final.sections, strict=True):
        if a.size != b.size:
            raise AsmError(f"section '{a.name}' changed size between passes", a.file, a.line)
    rom = build_rom(final.sections, final.header, origin_file)
    return rom, {name: (bank, address) for name, (address, bank) in labels.items()}


def assemble(source: str, *, origin_file: str = "<source>",
             include_dirs: list[str] | None = None) -> bytes:
    """Assemble SM83 source text into a complete ROM image (header checksums fixed)."""
    return assemble_with_symbols(source, origin_file=origin_file, include_dirs=include_dirs)[0]


def format_symbols(symbols: dict[str, tuple[int, int]]) -> str:
    """Symbol file text, one ``BB:AAAA name`` line per label, sorted by bank and address."""
    rows = sorted(symbols.items(), key=lambda item: (item[1], item[0]))
    return "".join(f"{bank:02X}:{address:04X} {name}\n" for name, (bank, address) in rows)


def assemble_file(path: str | os.PathLike[str], *, include_dirs: list[str] | None = None) -> bytes:
    """Assemble a source file; INCLUDE/INCBIN paths resolve next to the including file."""
    return assemble_file_with_symbols(path, include_dirs=include_dirs)[0]


def assemble_file_with_symbols(
    path: str | os.PathLike[str], *, include_dirs: list[str] | None = None
) -> tuple[bytes, dict[str, tuple[int, int]]]:
    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return assemble_with_symbols(source, origin_file=path, include_dirs=include_dirs)
