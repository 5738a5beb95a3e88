"""Expressions: parse a token list into a small tree, evaluate it against a symbol table.

Precedence, loosest first: ``||``, ``&&``, comparisons, ``|``, ``^``, ``&``, shifts, ``+ -``,
``* / %``, unary ``- + ~ !``.  Atoms: numbers, symbols, ``$``/``@`` (current address),
parentheses and the functions ``HIGH(x)``, ``LOW(x)``, ``BANK(label)``, ``DEFINED(name)``.
Integer arithmetic is unbounded; ``/`` and ``%`` truncate toward zero like C.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import AsmError
from .lexer import Token

Node = tuple[Any, ...]

_BINARY_LEVELS: list[tuple[str, ...]] = [
    ("||",),
    ("&&",),
    ("==", "!=", "<", ">", "<=", ">="),
    ("|",),
    ("^",),
    ("&",),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/", "%"),
]
_FUNCTIONS = ("HIGH", "LOW", "BANK", "DEFINED")


class Undefined(Exception):
    """A symbol the expression needs is not (yet) known."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take_op(self, ops: tuple[str, ...]) -> str | None:
        tok = self.peek()
        if tok is not None and tok.kind == "op" and tok.value in ops:
            self.pos += 1
            return str(tok.value)
        return None

    def expect(self, op: str) -> None:
        if self.take_op((op,)) is None:
            raise AsmError(f"expected '{op}' in expression")

    def binary(self, level: int) -> Node:
        if level == len(_BINARY_LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while (op := self.take_op(_BINARY_LEVELS[level])) is not None:
            node = ("bin", op, node, self.binary(level + 1))
        return node

    def unary(self) -> Node:
        op = self.take_op(("-", "+", "~", "!"))
        if op is not None:
            return ("un", op, self.unary())
        return self.atom()

    def atom(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise AsmError("expression ends too early")
        self.pos += 1
        if tok.kind == "num":
            return ("num", tok.value)
        if tok.kind == "str":
            text = str(tok.value)
            if len(text) != 1:
                raise AsmError(f'string "{text}" is not a number (only 1-character strings are)')
            return ("num", ord(text))
        if tok.kind == "id":
            name = str(tok.value)
            if name == "@":
                return ("pc",)
            if name.upper() in _FUNCTIONS and self.take_op(("(",)):
                if name.upper() in ("BANK", "DEFINED"):
                    arg = self.peek()
                    if arg is None or arg.kind != "id":
                        raise AsmError(f"{name.upper()}() takes a symbol name")
                    self.pos += 1
                    self.expect(")")
                    return ("fn", name.upper(), str(arg.value))
                inner = self.binary(0)
                self.expect(")")
                return ("fn", name.upper(), inner)
            return ("sym", name)
        if tok.value == "(":
            inner = self.binary(0)
            self.expect(")")
            return inner
        raise AsmError(f"unexpected '{tok.value}' in expression")


def parse_expr(tokens: list[Token]) -> Node:
    """Parse a whole token list as one expression."""
    if not tokens:
        raise AsmError("missing expression")
    parser = _Parser(tokens)
    node = parser.binary(0)
    if parser.pos != len(tokens):
        raise AsmError(f"unexpected '{tokens[parser.pos].value}' after expression")
    return node


def _c_div(a: int, b: int) -> int:
    if b == 0:
        raise AsmError("division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_BIN_FUNCS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _c_div,
    "%": lambda a, b: a - _c_div(a, b) * b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "&&": lambda a, b: int(bool(a) and bool(b)),
    "||": lambda a, b: int(bool(a) or bool(b)),
}


class Scope:
    """What an expression can see: symbols, the current address and label banks."""

    def __init__(
        self,
        lookup: Callable[[str], int],
        pc: Callable[[], int],
        bank: Callable[[str], int],
        defined: Callable[[str], bool],
    ) -> None:
        self.lookup = lookup
        self.pc = pc
        self.bank = bank
        self.defined = defined


def evaluate(node: Node, scope: Scope) -> int:
    """Evaluate a parsed expression; raises :class:`Undefined` for unknown symbols."""
    kind = node[0]
    if kind == "num":
        return int(node[1])
    if kind == "sym":
        return scope.lookup(node[1])
    if kind == "pc":
        return scope.pc()
    if kind == "un":
        value = evaluate(node[2], scope)
        return {"-": -value, "+": value, "~": ~value, "!": int(not value)}[node[1]]
    if kind == "bin":
        op = node[1]
        left = evaluate(node[2], scope)
        right = evaluate(node[3], scope)
        if op in ("<<", ">>") and right < 0:
            raise AsmError(f"negative shift count {right}")
        return _BIN_FUNCS[op](left, right)
    if kind == "fn":
        name = node[1]
        if name == "BANK":
            return scope.bank(node[2])
        if name == "DEFINED":
            return int(scope.defined(node[2]))
        value = evaluate(node[2], scope)
        return (value >> 8) & 0xFF if name == "HIGH" else value & 0xFF
    raise AssertionError(f"unknown node {kind}")
