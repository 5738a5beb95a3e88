"""The checkpoint file format: plain data and tensors, a version and a content hash.

A checkpoint must never run code when it is opened (checkpoints are shared
between people), so its payload is written by ``torch.save`` from plain data
only and read back with ``torch.load(weights_only=True)``, whose unpickler
rebuilds tensors and the types of :data:`ALLOWED_TYPES` and refuses
everything else.

Layout of a file::

    GBXCKPT {"format": 2, "sha256": "<hex>", "size": <payload bytes>}   (256 bytes, padded)
    <payload: torch.save zip of the checkpoint dict>

The header's hash covers the payload, so a flipped byte, a truncated copy or
an empty file is an error naming the file, not a silent load. Files of the
earlier format (a bare ``torch.save`` pickle) are refused with the way out:
``gbx checkpoint migrate FILE`` (which unpickles them, after asking).
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import pathlib
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from gbx.config import atomic_file
from gbx.errors import GbxError

FORMAT_VERSION = 2
MAGIC = b"GBXCKPT "
HEADER_SIZE = 256
_ZIP_MAGIC = b"PK\x03\x04"  # a bare torch.save file: the earlier, unpickled format
_MIGRATE_HINT = "gbx checkpoint migrate"

# What a checkpoint may hold, besides tensors (torch.Size and torch.dtype values
# come with tensors and optimiser states). Anything else is converted by
# :func:`to_checkpoint_data` when the conversion is lossless, else refused.
ALLOWED_TYPES: tuple[type, ...] = (
    dict, collections.OrderedDict, list, tuple, str, bytes, int, float, bool, type(None),
    torch.Size, torch.dtype,
)
# Globals the weights-only unpickler may resolve beyond its built-in tensor set.
SAFE_GLOBALS: list[Any] = [collections.OrderedDict, torch.Size]


class CheckpointError(GbxError):
    """A checkpoint file is missing, damaged, of another format or holds unsafe data."""


# ---------------------------------------------------------------------------
# Conversion to plain data (the one place where trainer state is made safe)
# ---------------------------------------------------------------------------


def to_checkpoint_data(value: Any, where: str = "checkpoint") -> Any:
    """``value`` with numpy arrays as tensors, numpy scalars and paths as Python values.

    RNG states need it: ``np.random.get_state()`` holds an ndarray (a trainer restores
    it from the tensor). Raises
    :class:`CheckpointError` naming the key path of a value of any other type.
    """
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if isinstance(value, dict):  # OrderedDict (module state dicts) keeps its type
        out = type(value)() if type(value) in (dict, collections.OrderedDict) else {}
        for key, item in value.items():
            if not isinstance(key, str | int):
                raise CheckpointError(f"{where}: key {key!r} of type {type(key).__name__} "
                                      "cannot be stored in a checkpoint (use str or int)")
            out[key] = to_checkpoint_data(item, f"{where}.{key}")
        meta = getattr(value, "_metadata", None)
        if meta is not None:  # nn.Module.state_dict versions its entries here
            out._metadata = to_checkpoint_data(meta, f"{where}._metadata")  # type: ignore[attr-defined]
        return out
    if isinstance(value, torch.Size):
        return value
    if isinstance(value, list | tuple):
        items = [to_checkpoint_data(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if type(value) in ALLOWED_TYPES:
        return value
    raise CheckpointError(
        f"{where}: a {type(value).__module__}.{type(value).__qualname__} cannot be stored in a "
        "checkpoint; state_dict() must return tensors, numbers, strings, lists, tuples and dicts"
    )


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


class _HashingWriter:
    """A write-only file object that hashes and counts what passes through it."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.sha.update(view)
        self.size += len(view)
        return self.fh.write(view)

    def flush(self) -> None:
        self.fh.flush()


def _header(sha256: str, size: int) -> bytes:
    body = json.dumps({"format": FORMAT_VERSION, "sha256": sha256, "size": size})
    line = MAGIC + body.encode("ascii")
    return line.ljust(HEADER_SIZE - 1, b" ") + b"\n"


def dump(payload: Mapping[str, Any], fh: BinaryIO) -> None:
    """Write ``payload`` in the checkpoint format to a seekable binary file."""
    data = to_checkpoint_data(dict(payload))
    start = fh.tell()
    fh.write(b"\0" * HEADER_SIZE)
    writer = _HashingWriter(fh)
    torch.save(data, writer)  # type: ignore[arg-type]
    end = fh.tell()
    fh.seek(start)
    fh.write(_header(writer.sha.hexdigest(), writer.size))
    fh.seek(end)


def write_file(path: Path, payload: Mapping[str, Any]) -> Path:
    """Write a checkpoint file atomically (a killed write leaves only a ``.tmp`` file)."""
    with atomic_file(path) as fh:
        dump(payload, fh)
    return path


def dumps(payload: Mapping[str, Any]) -> bytes:
    """The bytes of a checkpoint file holding ``payload`` (tests, fuzzing)."""
    buf = io.BytesIO()
    dump(payload, buf)
    return buf.getvalue()


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    # torch's refusal opens with advice about weights_only; the reason is further down.
    reasons = [ln for ln in lines if "GLOBAL" in ln or "Unsupported" in ln]
    return (reasons or lines or [type(exc).__name__])[0]


def _parse_header(raw: bytes, name: str) -> tuple[str, int]:
    if not raw:
        raise CheckpointError(f"{name} is empty; pick another checkpoint")
    if raw.startswith(_ZIP_MAGIC):
        raise CheckpointError(
            f"{name} is a checkpoint of an older format that runs code when it is opened; "
            f"if you trust its source, convert it with `{_MIGRATE_HINT} {name}`"
        )
    if not raw.startswith(MAGIC):
        raise CheckpointError(f"{name} is not a gbx checkpoint (no GBXCKPT header)")
    if len(raw) < HEADER_SIZE:
        raise CheckpointError(f"{name} is truncated (its header is incomplete)")
    try:
        header = json.loads(raw[len(MAGIC):].decode("ascii"))
        version, sha, size = header["format"], str(header["sha256"]), int(header["size"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{name} has a damaged header") from exc
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"{name} has checkpoint format {version!r}; this gbx reads format {FORMAT_VERSION}"
        )
    return sha, size


def loads(raw: bytes, name: str = "checkpoint") -> dict[str, Any]:
    """Check and decode the bytes of a checkpoint file; ``name`` appears in errors."""
    sha, size = _parse_header(raw[:HEADER_SIZE], name)
    payload = memoryview(raw)[HEADER_SIZE:]
    if len(payload) != size:
        what = "truncated" if len(payload) < size else "longer than its header says"
        raise CheckpointError(f"{name} is {what} ({len(payload)} of {size} payload bytes)")
    if hashlib.sha256(payload).hexdigest() != sha:
        raise CheckpointError(f"{name} is damaged: its content hash does not match the header")
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            data = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{name} holds data outside the checkpoint allowlist and was not loaded "
            f"({_first_line(exc)[:160]})"
        ) from exc
    except Exception as exc:  # a payload torch cannot decode (crafted, not damaged)
        raise CheckpointError(f"{name} cannot be decoded: {_first_line(exc)[:160]}") from exc
    if not isinstance(data, dict) or "state" not in data or "config" not in data:
        raise CheckpointError(f"{name} is not a gbx checkpoint (missing 'state' or 'config')")
    if type(data.get("step", 0)) is not int:
        raise CheckpointError(f"{name} is not a gbx checkpoint (its 'step' is not an integer)")
    return data


def read_file(path: Path) -> dict[str, Any]:
    """Load and check a checkpoint file; every problem is one :class:`CheckpointError`."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror}") from exc
    return loads(raw, str(path))


# ---------------------------------------------------------------------------
# Migration of the earlier format
# ---------------------------------------------------------------------------


def migrate_file(source: Path, dest: Path) -> Path:
    """Unpickle an earlier-format checkpoint (RUNS ITS CODE) and rewrite it safely.

    Only for files from a trusted source: the caller asks the user first.
    """
    source = Path(source)
    with source.open("rb") as fh:
        head = fh.read(len(_ZIP_MAGIC))
    if head != _ZIP_MAGIC:
        if head.startswith(MAGIC[: len(head)]) and head:
            read_file(source)  # already current: check it, nothing to convert
            raise CheckpointError(f"{source} is already in checkpoint format {FORMAT_VERSION}")
        raise CheckpointError(f"{source} is not a checkpoint of the earlier format")
    try:
        payload = torch.load(source, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise CheckpointError(f"{source} cannot be unpickled: {_first_line(exc)[:160]}") from exc
    if not isinstance(payload, dict) or "state" not in payload or "config" not in payload:
        raise CheckpointError(f"{source} is not a gbx checkpoint (missing 'state' or 'config')")
    payload["format"] = FORMAT_VERSION
    return write_file(dest, payload)
