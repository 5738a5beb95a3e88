"""JSON conversion (and atomic JSON files) shared by the observers."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gbx.config import write_atomic


def atomic_write_json(path: Path, obj: Any) -> Path:
    """``obj`` as indented JSON, written with the core's atomic helper."""
    return write_atomic(path, dumps(obj, indent=2) + "\n")


def to_jsonable(value: Any) -> Any:
    """Convert run objects (paths, devices, tensors, numpy scalars, attrs) to JSON values.

    Non-finite floats become ``None`` here only for metadata; training records
    are validated instead, so a NaN there is reported, not hidden.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "__attrs_attrs__"):
        import attrs

        return to_jsonable(attrs.asdict(value, recurse=True))
    if hasattr(value, "tolist"):  # torch tensors and numpy arrays/scalars
        return to_jsonable(value.tolist())
    return str(value)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """JSON text that refuses NaN/Inf (they are not JSON)."""
    return json.dumps(obj, allow_nan=False, indent=indent)
