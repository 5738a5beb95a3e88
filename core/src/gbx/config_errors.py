"""Turn cattrs/attrs validation failures into one readable line.

cattrs reports every problem of a structure call as a tree of exception
groups annotated with the attribute (or list index) being structured; attrs
validators raise plain ``ValueError``/``TypeError`` whose text starts with the
field name. Both are flattened here into ``dotted.path = value: what is
allowed`` items, joined into a single :class:`gbx.errors.ConfigError`.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

import attrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)

_MISSING = object()
# attrs number/length validators: "'lr' must be > 0: -1.0"
_ATTRS_MSG = re.compile(r"^'(?P<name>\w+)' (?P<rule>.*?)(?:: (?P<value>.*))?$", re.S)


class ConfigTypeError(TypeError):
    """A value of the wrong type for a config field (raised by the strict hooks)."""

    def __init__(self, value: Any, expected: str) -> None:
        super().__init__(f"expected {expected}, got {type(value).__name__} {value!r}")
        self.value = value
        self.expected = expected


def type_name(tp: Any) -> str:
    """Short human name of a type annotation (``int``, ``str | None``, ``tuple[str, ...]``)."""
    if tp is None or tp is type(None):
        return "None"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join("..." if a is Ellipsis else type_name(a) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(tp, "__name__", str(tp))


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _child(data: Any, key: str | int) -> Any:
    try:
        return data[key]
    except (KeyError, IndexError, TypeError):
        return _MISSING


def _with_value(path: str, value: Any, rule: str) -> str:
    if value is _MISSING:
        return f"{path}: {rule}"
    return f"{path} = {value!r}: {rule}"


def _note_of(exc: BaseException) -> Any:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote | IterableValidationNote):
            return note
    return None


def _validator_message(exc: BaseException, path: str, data: Any) -> str:
    """A failed attrs validator (run when the class is built)."""
    args = exc.args
    if len(args) >= 4 and isinstance(args[1], attrs.Attribute):
        name = args[1].name
        value = args[-1]
        if isinstance(args[2], list | tuple | set | frozenset):
            rule = "must be one of " + ", ".join(repr(o) for o in args[2])
        elif isinstance(args[2], type):
            rule = f"expected {type_name(args[2])}"
        else:
            rule = str(args[0]).removeprefix(f"'{name}' ")
        return _with_value(_join(path, name), value, rule)
    match = _ATTRS_MSG.match(str(exc))
    if match:
        name = match["name"]
        return _with_value(_join(path, name), _child(data, name), match["rule"])
    return f"{path or 'config'}: {exc}"


def _messages(exc: BaseException, path: str, data: Any, expected: Any) -> list[str]:
    if isinstance(exc, ForbiddenExtraKeysError):
        allowed = ", ".join(f.name for f in attrs.fields(exc.cl)) if attrs.has(exc.cl) else ""
        return [
            f"unknown key {_join(path, key)} (allowed keys in {path or 'config'}: {allowed})"
            for key in sorted(exc.extra_fields)
        ]
    if isinstance(exc, ClassValidationError | IterableValidationError):
        out: list[str] = []
        for sub in exc.exceptions:
            note = _note_of(sub)
            if isinstance(note, AttributeValidationNote):
                out += _messages(sub, _join(path, note.name), _child(data, note.name), note.type)
            elif isinstance(note, IterableValidationNote):
                out += _messages(sub, _join(path, note.index), _child(data, note.index), note.type)
            elif isinstance(sub, ForbiddenExtraKeysError | BaseExceptionGroup):
                out += _messages(sub, path, data, None)
            else:  # raised while building the class: an attrs validator
                out.append(_validator_message(sub, path, data))
        return out
    if isinstance(exc, BaseExceptionGroup):
        return [m for sub in exc.exceptions for m in _messages(sub, path, data, expected)]
    if isinstance(exc, KeyError) and data is _MISSING:
        return [f"{path}: missing required key"]
    if isinstance(exc, ConfigTypeError):
        return [_with_value(path, exc.value, f"expected {exc.expected}")]
    if expected is not None:
        return [_with_value(path, data, f"expected {type_name(expected)} ({exc})")]
    return [_with_value(path, data, str(exc))]


def describe(exc: BaseException, path: str, data: Any) -> list[str]:
    """All problems in a failed ``structure(data, cls)`` call at ``path``, one per item."""
    return _messages(exc, path, data, None)
