"""Artifact writers: PNG frames for failure bundles, and media files under ``run_dir/media/``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gbx.config import write_atomic
from gbx_observers.rollout import encode_gif, encode_png, frame_of

_SAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def safe_name(text: str) -> str:
    """A file-name-safe form of a trace id (anything odd becomes '_')."""
    cleaned = _SAFE.sub("_", text).strip("._")
    if not cleaned:
        raise ValueError(f"{text!r} gives an empty file name; use letters, digits, '_', '-', '.'")
    return cleaned


def frames_of(value: Any) -> list[np.ndarray]:
    """Split observations/frames (``[T, K, H, W]``, ``[T, H, W]`` or a list) into frames."""
    if isinstance(value, torch.Tensor | np.ndarray):
        if value.ndim < 3:
            raise ValueError(f"frames need a leading time axis, got shape {tuple(value.shape)}")
        return [frame_of(value[i]) for i in range(value.shape[0])]
    if isinstance(value, Sequence):
        return [frame_of(item) for item in value]
    raise ValueError(f"cannot read frames from {type(value).__name__}")


def write_failure_frames(run_dir: Path, payload: Mapping[str, Any]) -> Path:
    """Add ``frames/frame_<i>.png`` (and ``frames.gif``) to ``failures/<trace_id>/``.

    The core writes the rest of the bundle (actions, records, config, repro
    command). Payloads without ``"frames"`` leave the bundle as it is.
    """
    trace_id = payload.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise ValueError("a failure payload needs a non-empty 'trace_id' string")
    bundle = Path(run_dir) / "failures" / safe_name(trace_id)
    frames = payload.get("frames")
    if frames is None:
        return bundle
    shaded = frames_of(frames)
    folder = bundle / "frames"
    width = max(3, len(str(len(shaded) - 1)))
    for index, frame in enumerate(shaded):
        write_atomic(folder / f"frame_{index:0{width}d}.png", encode_png(frame, scale=2))
    if len(shaded) > 1:
        write_atomic(bundle / "frames.gif", encode_gif(shaded, scale=2, fps=10))
    return folder


def write_media(run_dir: Path, payload: Mapping[str, Any]) -> Path:
    """Write one media file to ``run_dir/media/<name>`` atomically.

    Payload: ``name`` (a relative path ending in ``.png`` or ``.gif``) and one
    of ``data`` (encoded bytes), ``frame`` (one observation/frame) or
    ``frames`` (a sequence, for a GIF). Optional ``scale`` (default 2).
    """
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a media payload needs a 'name' such as 'eval_1000/start.png'")
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"media name {name!r} must be a relative path inside media/")
    path = Path(run_dir) / "media" / relative
    scale = int(payload.get("scale", 2))
    if "data" in payload:
        data = payload["data"]
        if not isinstance(data, bytes | bytearray):
            raise ValueError("media 'data' must be bytes of an encoded file")
        return write_atomic(path, bytes(data))
    suffix = relative.suffix.lower()
    if "frame" in payload and suffix == ".png":
        return write_atomic(path, encode_png(frame_of(payload["frame"]), scale=scale))
    if "frames" in payload and suffix == ".gif":
        fps = int(payload.get("fps", 15))
        gif = encode_gif(frames_of(payload["frames"]), scale=scale, fps=fps)
        return write_atomic(path, gif)
    raise ValueError(
        f"media {name!r}: give 'data' bytes, a 'frame' for a .png or 'frames' for a .gif"
    )
