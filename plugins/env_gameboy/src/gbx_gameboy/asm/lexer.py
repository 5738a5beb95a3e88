"""Tokenizer for one source line.

Token kinds: ``num`` (int value), ``str`` (text), ``id`` (identifier, may start with ``.``),
``op`` (punctuation and operators).  A ``;`` outside a string starts a comment.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import AsmError


class Token(NamedTuple):
    kind: str
    value: str | int


_TWO_CHAR_OPS = ("<<", ">>", "==", "!=", "<=", ">=", "&&", "||", "::")
_ONE_CHAR_OPS = "+-*/%&|^~!()[],:<>="
_ESCAPES = {"n": "\n", "t": "\t", "0": "\0", "\\": "\\", '"': '"', "'": "'", "r": "\r"}
_HEX = "0123456789abcdefABCDEF"
_IDENT_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_."
_IDENT_CHARS = _IDENT_START + "0123456789#"


def _percent_is_modulo(tokens: list[Token], text: str, i: int) -> bool:
    """Whether ``%`` at ``text[i]`` is the modulo operator rather than a binary number.

    After a number or a closing bracket it is modulo.  After a name it is modulo unless
    written like a prefix, ``name %101`` (space before, digits right after): that form is
    how keywords such as ``EQU``, ``db`` or ``and`` take a binary operand.
    """
    if not tokens:
        return False
    last = tokens[-1]
    if last.kind in ("num", "str") or last.value in (")", "]"):
        return True
    if last.kind == "id":
        return not (i > 0 and text[i - 1] in " \t")
    return False


def _read_quoted(text: str, start: int, quote: str) -> tuple[str, int]:
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\\" and i + 1 < len(text):
            esc = text[i + 1]
            if esc not in _ESCAPES:
                raise AsmError(f"unknown escape '\\{esc}' in string")
            out.append(_ESCAPES[esc])
            i += 2
            continue
        out.append(ch)
        i += 1
    raise AsmError(f"unterminated {'string' if quote == chr(34) else 'character literal'}")


def _read_number(text: str, i: int, digits: str, base: int, prefix_len: int) -> tuple[int, int]:
    j = i + prefix_len
    while j < len(text) and (text[j] in digits or text[j] == "_"):
        j += 1
    body = text[i + prefix_len : j].replace("_", "")
    if not body:
        raise AsmError(f"malformed number near '{text[i:j + 1]}'")
    if j < len(text) and text[j] in _IDENT_CHARS and text[j] != ".":
        raise AsmError(f"malformed number near '{text[i:j + 1]}'")
    return int(body, base), j


def tokenize(text: str) -> list[Token]:
    """Split one line into tokens, dropping the comment."""
    tokens: list[Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
        elif ch == ";":
            break
        elif ch == '"':
            s, i = _read_quoted(text, i, '"')
            tokens.append(Token("str", s))
        elif ch == "'":
            s, i = _read_quoted(text, i, "'")
            if len(s) != 1:
                raise AsmError(f"character literal must hold one character, got '{s}'")
            tokens.append(Token("num", ord(s)))
        elif ch == "$" and i + 1 < n and text[i + 1] in _HEX:
            value, i = _read_number(text, i, _HEX, 16, 1)
            tokens.append(Token("num", value))
        elif ch == "0" and i + 1 < n and text[i + 1] in "xX":
            value, i = _read_number(text, i, _HEX, 16, 2)
            tokens.append(Token("num", value))
        elif ch == "0" and i + 1 < n and text[i + 1] in "bB" and i + 2 < n and text[i + 2] in "01":
            value, i = _read_number(text, i, "01", 2, 2)
            tokens.append(Token("num", value))
        elif ch == "%" and i + 1 < n and text[i + 1] in "01" and not _percent_is_modulo(
            tokens, text, i
        ):
            value, i = _read_number(text, i, "01", 2, 1)
            tokens.append(Token("num", value))
        elif ch.isdigit():
            value, i = _read_number(text, i, "0123456789", 10, 0)
            tokens.append(Token("num", value))
        elif ch in _IDENT_START:
            j = i + 1
            while j < n and text[j] in _IDENT_CHARS:
                j += 1
            tokens.append(Token("id", text[i:j]))
            i = j
        elif ch in "$@":
            tokens.append(Token("id", "@"))  # the current address
            i += 1
        elif text[i : i + 2] in _TWO_CHAR_OPS:
            tokens.append(Token("op", text[i : i + 2]))
            i += 2
        elif ch in _ONE_CHAR_OPS:
            tokens.append(Token("op", ch))
            i += 1
        else:
            raise AsmError(f"unexpected character '{ch}'")
    return tokens


def split_commas(tokens: list[Token]) -> list[list[Token]]:
    """Split a token list at commas outside parentheses/brackets."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.kind == "op" and tok.value in ("(", "["):
            depth += 1
        elif tok.kind == "op" and tok.value in (")", "]"):
            depth -= 1
        if tok.kind == "op" and tok.value == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    if parts == [[]]:
        return []
    if any(not p for p in parts):
        raise AsmError("empty operand (stray comma)")
    return parts
