"""Built-in artifact writers: run metadata, checkpoints and failure bundles.

Each writer is ``writer(run_dir, payload) -> Path`` and writes atomically
(temporary file in the target directory, then ``os.replace``), so a killed
process never leaves a half-written file under its final name.

Layout of a run directory::

    meta.json  config.json  train_log.jsonl
    checkpoints/ckpt_<step>.pt  checkpoints/latest   (text: file name of the newest)
    failures/<trace_id>/error.txt  config.json  records.jsonl  repro.txt  [details.json]
                      [actions.json: the last actions of one env]
    media/
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gbx import hookimpl
from gbx.config import write_json_atomic

CHECKPOINT_DIR = "checkpoints"
LATEST = "latest"
FAILURE_DIR = "failures"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str) + "\n"


def write_meta(run_dir: Path, payload: Mapping[str, Any]) -> Path:
    """``payload = {"meta": {...}, "config": {...}}`` -> meta.json and config.json."""
    write_json_atomic(Path(run_dir) / "config.json", _json(payload["config"]))
    return write_json_atomic(Path(run_dir) / "meta.json", _json(payload["meta"]))


def checkpoint_name(step: int) -> str:
    return f"ckpt_{int(step):012d}.pt"


def write_checkpoint(run_dir: Path, payload: Mapping[str, Any]) -> Path:
    """``payload = {"step", "state", "config", "run_id"}`` -> checkpoints/ckpt_<step>.pt.

    The ``latest`` pointer is updated only after the checkpoint file is in place.
    """
    folder = Path(run_dir) / CHECKPOINT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / checkpoint_name(payload["step"])
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ckpt.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(dict(payload), tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    write_json_atomic(folder / LATEST, path.name + "\n")
    return path


def latest_checkpoint(path: Path) -> Path:
    """Resolve a run dir, its checkpoints/ folder or a checkpoint file to a ``.pt`` file."""
    path = Path(path)
    if path.is_file() and path.name != LATEST:
        return path
    folder = path if path.name == CHECKPOINT_DIR else path / CHECKPOINT_DIR
    if path.name == LATEST:
        folder = path.parent
    pointer = folder / LATEST
    if pointer.is_file():
        candidate = folder / pointer.read_text(encoding="utf-8").strip()
        if candidate.is_file():
            return candidate
    found = sorted(folder.glob("ckpt_*.pt"))
    if not found:
        raise FileNotFoundError(f"no checkpoint under {folder}")
    return found[-1]


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint payload written by :func:`write_checkpoint` (on the CPU)."""
    payload = torch.load(latest_checkpoint(path), map_location="cpu", weights_only=False)
    if not isinstance(payload, dict) or "state" not in payload or "config" not in payload:
        raise ValueError(f"{path} is not a gbx checkpoint (missing 'state' or 'config')")
    return payload


def write_failure(run_dir: Path, payload: Mapping[str, Any]) -> Path:
    """``payload = {"trace_id", "error", "traceback", "config", "records", "repro"}``."""
    folder = Path(run_dir) / FAILURE_DIR / str(payload["trace_id"])
    folder.mkdir(parents=True, exist_ok=True)
    error = f"{payload['error']}\n\n{payload.get('traceback', '')}"
    write_json_atomic(folder / "error.txt", error)
    write_json_atomic(folder / "config.json", _json(payload["config"]))
    lines = "".join(json.dumps(r, default=str) + "\n" for r in payload.get("records", []))
    write_json_atomic(folder / "records.jsonl", lines)
    write_json_atomic(folder / "repro.txt", str(payload["repro"]) + "\n")
    if payload.get("details"):
        write_json_atomic(folder / "details.json", _json(payload["details"]))
    actions = payload.get("actions")
    if actions is not None:
        values = actions.tolist() if hasattr(actions, "tolist") else list(actions)
        write_json_atomic(folder / "actions.json", json.dumps(values) + "\n")
    return folder


@hookimpl
def register_artifact_writers(register: Any) -> None:
    register("meta", write_meta, description="meta.json + config.json")
    register("checkpoint", write_checkpoint, description="checkpoints/ckpt_<step>.pt + latest")
    register("failure", write_failure, description="failures/<trace_id>/ bundle")
