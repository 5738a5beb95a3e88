"""Policy rollouts on one env, saved as ``rollout.gif`` + ``rollout.jsonl`` + ``meta.json``.

Frames are drawn with the DMG's green LCD palette (:data:`DMG_GREENS`),
shade 0 lightest to shade 3 darkest, and scaled up with nearest-neighbour
so pixels stay sharp.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gbx.config import write_atomic
from gbx_observers.files import atomic_write_json, dumps
from gbx_toolkit import pictures
from gbx_toolkit.pictures import PALETTES

# RGB of shades 0..3 as on the original Game Boy's green screen.
DMG_GREENS: tuple[tuple[int, int, int], ...] = PALETTES["green"]

Policy = Callable[..., torch.Tensor]


def frame_of(obs: torch.Tensor | np.ndarray) -> np.ndarray:
    """The newest frame of one observation as ``uint8 [H, W]`` shade indices.

    Accepts ``[K, H, W]`` (a frame stack: the last frame is the newest) or
    ``[H, W]``.
    """
    array = obs.detach().cpu().numpy() if isinstance(obs, torch.Tensor) else np.asarray(obs)
    if array.ndim == 3:
        array = array[-1]
    if array.ndim != 2:
        raise ValueError(
            f"cannot draw an observation of shape {tuple(array.shape)}; "
            "expected pixel frames [K, H, W] or [H, W]"
        )
    return array.astype(np.uint8)


def shades_to_rgb(frame: np.ndarray, scale: int = 2) -> np.ndarray:
    """Map shade indices 0..3 (values above are clamped) to DMG greens, scaled ``scale``x."""
    return pictures.shades_to_rgb(_clamped(frame, scale), scale=scale, palette="green")


def _clamped(frame: np.ndarray, scale: int) -> np.ndarray:
    if not 1 <= scale <= 8:
        raise ValueError(f"scale {scale} is out of range; use 1..8 (2-4 suits most screens)")
    return np.minimum(frame, 3)


def encode_png(frame: np.ndarray, scale: int = 2) -> bytes:
    return pictures.encode_png(_clamped(frame, scale), scale=scale, palette="green")


def encode_gif(frames: Sequence[np.ndarray], *, scale: int = 2, fps: int = 15) -> bytes:
    """An endlessly looping GIF of shade-index frames."""
    if not frames:
        raise ValueError("no frames to encode")
    return pictures.encode_gif([_clamped(f, scale) for f in frames], scale=scale,
                               palette="green", frame_ms=max(1000 // fps, 20), loop=0)


def run_rollout(
    env: Any, policy: Policy, *, steps: int, greedy: bool = True,
    on_step: Callable[[], None] | None = None,
) -> tuple[list[np.ndarray], list[dict[str, Any]]]:
    """Play ``steps`` steps of env 0 with ``policy(obs, greedy=...)``.

    Returns the frames shown (the first observation, then one per step) and
    one row per step; ``on_step`` is called after each (progress). This is a tool,
    not a hot path: it reads each step back.
    """
    if steps <= 0:
        raise ValueError(f"--steps must be positive, got {steps}")
    obs = env.reset()
    frames = [frame_of(obs[0])]
    rows: list[dict[str, Any]] = []
    with torch.no_grad():
        for step in range(steps):
            actions = policy(obs, greedy=greedy)
            obs, reward, done, trunc, info = env.step(actions)
            row: dict[str, Any] = {
                "step": step,
                "action": int(actions[0]),
                "reward": float(reward[0]),
            }
            dist = info.get("dist") if isinstance(info, Mapping) else None
            if isinstance(dist, torch.Tensor):
                row["dist"] = float(dist[0])
            row["done"] = bool(done[0])
            row["trunc"] = bool(trunc[0])
            rows.append(row)
            # On an episode end the env has already reset; show the final frame
            # of the finished episode when the env provides it.
            final = info.get("final_obs") if isinstance(info, Mapping) else None
            ended = row["done"] or row["trunc"]
            shown = final[0] if ended and isinstance(final, torch.Tensor) else obs[0]
            frames.append(frame_of(shown))
            if on_step is not None:
                on_step()
    return frames, rows


def write_rollout(
    out_dir: Path,
    frames: Sequence[np.ndarray],
    rows: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
    *,
    scale: int = 2,
    fps: int = 15,
) -> dict[str, Path]:
    """Write ``rollout.gif``, ``rollout.jsonl`` and ``meta.json`` into ``out_dir`` atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    gif = write_atomic(out_dir / "rollout.gif", encode_gif(frames, scale=scale, fps=fps))
    lines = "".join(dumps(dict(row)) + "\n" for row in rows)
    log = write_atomic(out_dir / "rollout.jsonl", lines)
    summary = {
        "steps": len(rows),
        "return": sum(float(r["reward"]) for r in rows),
        "episodes_ended": sum(1 for r in rows if r["done"] or r["trunc"]),
        "goals_reached": sum(1 for r in rows if r["done"]),
        "scale": scale,
        "fps": fps,
        "palette": "dmg-greens",
    }
    meta_path = atomic_write_json(out_dir / "meta.json", {**dict(meta), **summary})
    return {"gif": gif, "jsonl": log, "meta": meta_path}


def record_rollout(
    env: Any,
    policy: Policy,
    out_dir: Path,
    *,
    steps: int,
    greedy: bool = True,
    scale: int = 2,
    meta: Mapping[str, Any] | None = None,
    on_step: Callable[[], None] | None = None,
) -> dict[str, Path]:
    """Run one rollout and write its three files; the env is closed afterwards."""
    try:
        frames, rows = run_rollout(env, policy, steps=steps, greedy=greedy, on_step=on_step)
    finally:
        env.close()
    full_meta = {"greedy": greedy, **dict(meta or {})}
    return write_rollout(out_dir, frames, rows, full_meta, scale=scale)
