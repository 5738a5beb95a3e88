"""Built-in artifact writers: run metadata, checkpoints and failure bundles.

Each writer is ``writer(run_dir, payload) -> Path`` and writes atomically
(temporary file in the target directory, then ``os.replace``), so a killed
process never leaves a half-written file under its final name.

Layout of a run directory::

    meta.json  config.json  (and the files the run's observers declare as their outputs)
    checkpoints/ckpt_<step>.pt  checkpoints/latest   (text: file name of the newest)
        (at most run.keep_checkpoints files, format: gbx.checkpoint_file)
    failures/<trace_id>/error.txt  config.json  records.jsonl  repro.txt  [details.json]
                      [actions.json: the last actions of one env]
    media/
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gbx import checkpoint_file, hookimpl
from gbx.config import remove_temporary_files, write_json_atomic

CHECKPOINT_DIR = "checkpoints"
LATEST = "latest"
FAILURE_DIR = "failures"
DEFAULT_KEEP = 3  # run.keep_checkpoints when a payload's config does not say


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str) + "\n"


def write_meta(run_dir: Path, payload: Mapping[str, Any]) -> Path:
    """``payload = {"meta": {...}, "config": {...}}`` -> meta.json and config.json."""
    write_json_atomic(Path(run_dir) / "config.json", _json(payload["config"]))
    return write_json_atomic(Path(run_dir) / "meta.json", _json(payload["meta"]))


def checkpoint_name(step: int) -> str:
    return f"ckpt_{int(step):012d}.pt"


def _keep(payload: Mapping[str, Any]) -> int:
    run = payload.get("config", {}).get("run", {}) if isinstance(payload.get("config"), Mapping) \
        else {}
    return max(1, int(run.get("keep_checkpoints", DEFAULT_KEEP)))


def write_checkpoint(run_dir: Path, payload: Mapping[str, Any]) -> Path:
    """``payload = {"step", "state", "config", "run_id"}`` -> checkpoints/ckpt_<step>.pt.

    The ``latest`` pointer is updated only after the checkpoint file is in place;
    then the oldest checkpoints beyond ``run.keep_checkpoints`` are deleted.
    """
    folder = Path(run_dir) / CHECKPOINT_DIR
    path = checkpoint_file.write_file(folder / checkpoint_name(payload["step"]), payload)
    write_json_atomic(folder / LATEST, path.name + "\n")
    for old in list_checkpoints(folder)[_keep(payload):]:
        old.unlink(missing_ok=True)
    return path


def list_checkpoints(folder: Path) -> list[Path]:
    """The checkpoint files in ``folder``, newest (highest step) first."""
    return sorted(Path(folder).glob("ckpt_*.pt"), reverse=True)


def remove_partial_checkpoints(run_dir: Path) -> list[Path]:
    """Delete the temporary files a killed write left in a run directory."""
    run_dir = Path(run_dir)
    return [*remove_temporary_files(run_dir / CHECKPOINT_DIR), *remove_temporary_files(run_dir)]


def _checkpoint_folder(path: Path) -> Path:
    if path.name == LATEST:
        return path.parent
    return path if path.name == CHECKPOINT_DIR else path / CHECKPOINT_DIR


def _pointed(folder: Path) -> Path | None:
    """The file the ``latest`` pointer names, when it names a checkpoint in ``folder``."""
    pointer = folder / LATEST
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not re.fullmatch(r"ckpt_[0-9]+\.pt", name):  # never a path out of the folder
        return None
    candidate = folder / name
    return candidate if candidate.is_file() else None


def latest_checkpoint(path: Path) -> Path:
    """Resolve a run dir, its checkpoints/ folder or a checkpoint file to a ``.pt`` file."""
    path = Path(path)
    if path.is_file() and path.name != LATEST:
        return path
    folder = _checkpoint_folder(path)
    candidate = _pointed(folder)
    if candidate is not None:
        return candidate
    found = list_checkpoints(folder)
    if not found:
        raise FileNotFoundError(f"no checkpoint under {folder}")
    return found[0]


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load and check a checkpoint written by :func:`write_checkpoint` (on the CPU).

    Raises :class:`gbx.checkpoint_file.CheckpointError` (one line, naming the file)
    for a damaged, foreign or unsafe file.
    """
    return checkpoint_file.read_file(latest_checkpoint(path))


def load_latest_good(run_dir: Path, warn: Callable[[str], None]) -> tuple[Path, dict[str, Any]]:
    """The newest intact checkpoint of a run; each damaged newer one is reported via ``warn``.

    Raises FileNotFoundError when the run has no checkpoint, and the newest file's
    :class:`CheckpointError` when none of them loads.
    """
    folder = _checkpoint_folder(Path(run_dir))
    newest = latest_checkpoint(run_dir)
    candidates = [newest, *(p for p in list_checkpoints(folder) if p != newest)]
    first_error: checkpoint_file.CheckpointError | None = None
    for i, path in enumerate(candidates):
        try:
            return path, checkpoint_file.read_file(path)
        except checkpoint_file.CheckpointError as exc:
            first_error = first_error or exc
            later = candidates[i + 1] if i + 1 < len(candidates) else None
            if later is not None:
                warn(f"gbx: warning: {exc}; falling back to the previous checkpoint {later.name}")
    assert first_error is not None
    raise checkpoint_file.CheckpointError(f"{first_error}; no intact checkpoint in {folder}")


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
