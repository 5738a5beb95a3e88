"""The ``goal-file`` fuzz target: malformed goal folders and templates for the goal env.

One input is a goal written into the target's folder (a goal folder with ``goal.npy``
and ``meta.json``, a bare ``.npy``, an ``.npz``, a directory in the wrong place...),
starting from a valid goal and broken in one to three ways, then resolved through
:func:`gbx_gameboy.goal.resolve_goal` as a goal env's config would be: loading,
the meta checks, the ROM hash check and the obs-size check. Contract:
:func:`gbx.hookspecs.register_fuzz_targets`.
"""

from __future__ import annotations

import io
import json
import math
import random
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gbx_gameboy.capture import GOAL_FILE, META_FILE

_SHAPES = ((72, 80), (144, 160), (80, 72), (0, 80), (72, 0), (1, 1), (72,), (72, 80, 1), ())
_DTYPES = (np.uint8, np.int8, np.uint16, np.int64, np.float32, np.float64, np.bool_, "U3",
           np.complex64)
_ODD: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2, 0.5, 1.0, 1.5, -0.5, 1e-300, 1e308, math.nan, math.inf,
    -math.inf, "0.1", "", "ab" * 32, [], {}, [0.1], {"tau": 0.1}, 2**70,
)


def _template(rng: random.Random) -> np.ndarray:
    shape = rng.choice(_SHAPES) if rng.random() < 0.3 else (72, 80)
    dtype = rng.choice(_DTYPES) if rng.random() < 0.2 else np.uint8
    high = rng.choice((1, 4, 5, 256)) if rng.random() < 0.2 else 4
    values = np.random.default_rng(rng.getrandbits(32)).integers(0, high, size=shape)
    try:
        return values.astype(dtype)
    except (TypeError, ValueError):
        return values.astype(np.uint8)


def _meta(rng: random.Random, rom_sha: str) -> Any:
    meta: dict[str, Any] = {"tau": 0.05, "consec_k": 1, "rom_sha256": rom_sha,
                            "obs_size": "72x80"}
    for _ in range(rng.randrange(3)):
        key = rng.choice(("tau", "consec_k", "rom_sha256", "obs_size", "note", "tau"))
        if rng.random() < 0.15:
            meta.pop(key, None)
        else:
            meta[key] = rng.choice(_ODD) if key != "tau" or rng.random() < 0.7 \
                else rng.uniform(-1.0, 2.0)
    if rng.random() < 0.05:
        return rng.choice(([], [1, 2], "text", 3, None))
    return meta


def _meta_bytes(rng: random.Random, meta: Any) -> bytes:
    text = json.dumps(meta)
    r = rng.random()
    if r < 0.04:
        return text.encode()[: rng.randrange(len(text) + 1)]  # truncated
    if r < 0.06:
        return b"\xff\xfe" + text.encode()  # not UTF-8
    if r < 0.08:
        return ("[" * rng.choice((10, 1000, 100_000))).encode()  # deeply nested
    return text.encode()


def _npy_bytes(rng: random.Random, template: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, template, allow_pickle=False)
    data = buf.getvalue()
    r = rng.random()
    if r < 0.05:
        return data[: rng.randrange(len(data) + 1)]  # truncated
    if r < 0.1:
        flip = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            flip[rng.randrange(len(flip))] = rng.randrange(256)
        return bytes(flip)
    if r < 0.13:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(200)))
    if r < 0.16:  # an .npz container under the .npy name
        zbuf = io.BytesIO()
        np.savez(zbuf, goal=template)
        return zbuf.getvalue()
    if r < 0.17:  # a pickled object array
        obj = io.BytesIO()
        np.save(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        return obj.getvalue()
    return data


def _layout(rng: random.Random, root: Path, npy: bytes, meta: bytes | None) -> Path:
    """Write the goal in one of the layouts a user might pass; return env.goal_dir."""
    kind = rng.choices(("folder", "bare-npy", "npz", "other-file", "missing", "dir-as-npy",
                        "empty-folder"), weights=(70, 10, 6, 4, 4, 3, 3))[0]
    folder = root / "goal"
    folder.mkdir()
    if kind == "folder":
        (folder / GOAL_FILE).write_bytes(npy)
        if meta is not None:
            (folder / META_FILE).write_bytes(meta)
        return folder
    if kind == "bare-npy":
        (folder / "template.npy").write_bytes(npy)
        if meta is not None:
            (folder / META_FILE).write_bytes(meta)
        return folder / "template.npy"
    if kind == "npz":
        with zipfile.ZipFile(folder / "goal.npz", "w") as zf:
            zf.writestr("goal.npy", npy)
        return folder / "goal.npz"
    if kind == "other-file":
        (folder / "goal.png").write_bytes(npy)
        return folder / "goal.png"
    if kind == "missing":
        return folder / "nowhere"
    if kind == "dir-as-npy":
        (folder / GOAL_FILE).mkdir()
        if meta is not None:
            (folder / META_FILE).mkdir() if rng.random() < 0.3 else \
                (folder / META_FILE).write_bytes(meta)
        return folder
    return folder  # an empty folder


def fuzz_goal_file(rng: random.Random, workdir: Path) -> None:
    """One generated goal, resolved as ``gbx run --env gameboy-goal`` would."""
    from gbx_gameboy.capture import sha256_file
    from gbx_gameboy.env import DEFAULT_ROM
    from gbx_gameboy.goal import GoalConfig, resolve_goal

    rom_sha = sha256_file(DEFAULT_ROM) if rng.random() < 0.9 else "0" * 64
    template = _template(rng)
    meta = None if rng.random() < 0.1 else _meta_bytes(rng, _meta(rng, rom_sha))
    goal_dir = _layout(rng, workdir, _npy_bytes(rng, template), meta)
    pick: Callable[[tuple[Any, ...]], Any] = rng.choice
    config = GoalConfig(
        goal_dir=str(goal_dir),
        obs_size=pick(("72x80", "72x80", "144x160")),
        tau=pick((None, None, 0.05, 1.0)),
        consec_k=pick((None, None, 1, 3)),
        allow_goal_rom_mismatch=rng.random() < 0.2,
    )
    goal, tau, consec_k = resolve_goal(config)
    # what the env does with them: a distance in [0, 1] needs 0 < tau, 1 <= consec_k
    assert 0.0 < tau <= 1.0 and consec_k >= 1, (tau, consec_k)
    assert goal.template.dtype == np.uint8 and int(goal.template.max()) <= 3

