"""Every numeric field of every registered config class refuses NaN, inf and out-of-range values.

The fields declare their ranges with validators (``gbx.config.in_range`` or attrs'
number validators); this walks the installed plugins' classes, feeds each field
NaN, +-inf, -1, 0 and a huge value, and checks that every value its declared range
excludes is a one-line ConfigError naming the field's dotted path.
"""

from __future__ import annotations

import math
import typing
from typing import Any

import attrs
import pytest

from gbx.config import Range, RunConfig, structure_section
from gbx.errors import ConfigError
from gbx.plugins import load_plugins

PROBES = (math.nan, math.inf, -math.inf, -1, 0, 10**30)


def _classes() -> dict[str, type]:
    registry = load_plugins().registry
    out: dict[str, type] = {"run": RunConfig}
    seen: set[type] = {RunConfig}
    for section, table in (("env", registry.envs), ("algo", registry.algorithms)):
        for name, spec in sorted(table.items()):
            if spec.config_cls not in seen:
                seen.add(spec.config_cls)
                out[f"{section}:{name}"] = spec.config_cls
    return out


def _numeric(tp: Any) -> type | None:
    if tp in (int, float):
        return tp
    args = set(typing.get_args(tp)) - {type(None)}
    return args.pop() if len(args) == 1 and args <= {int, float} else None


def _checks(validator: Any) -> list[Any] | None:
    """The range checks ``validator`` declares; None when it holds an opaque function."""
    if validator is None:
        return []
    inner = getattr(validator, "_validators", None) or getattr(validator, "validators", None)
    if inner is not None:
        found: list[Any] = []
        for v in inner:
            sub = _checks(v)
            if sub is None:
                return None
            found += sub
        return found
    if hasattr(validator, "validator"):  # attrs.validators.optional
        return _checks(validator.validator)
    if isinstance(validator, Range) or hasattr(validator, "compare_func"):
        return [validator]
    return None


def _admits(check: Any, value: float) -> bool:
    if isinstance(check, Range):
        return check.admits(value)
    return bool(check.compare_func(value, check.bound))


def _fields(cls: type, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = []
    for f in attrs.fields(attrs.resolve_types(cls)):
        if isinstance(f.type, type) and attrs.has(f.type):
            out += _fields(f.type, (*path, f.name))
        elif _numeric(f.type) is not None:
            out.append(((*path, f.name), f))
    return out


def _nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    return {path[0]: value} if len(path) == 1 else {path[0]: _nest(path[1:], value)}


CLASSES = _classes()


@pytest.mark.parametrize("label", sorted(CLASSES))
def test_numeric_fields_refuse_what_their_range_excludes(label: str) -> None:
    cls = CLASSES[label]
    section = label.split(":")[0]
    fields = _fields(cls)
    assert fields or label.startswith("env:"), f"{label} has no numeric field"
    unbounded = []
    for path, field in fields:
        checks = _checks(field.validator)
        if checks == []:
            unbounded.append(".".join(path))
            continue
        dotted = ".".join((section, *path))
        for probe in PROBES:
            excluded = not math.isfinite(probe) or (
                checks is not None and not all(_admits(c, probe) for c in checks))
            if not excluded:
                continue
            with pytest.raises(ConfigError) as info:
                structure_section(_nest(path, probe), cls, section)
            message = str(info.value)
            assert dotted in message and "\n" not in message, (dotted, probe, message)
    assert not unbounded, f"{label}: numeric fields without a declared range: {unbounded}"
