"""Reading, repairing and validating ``train_log.jsonl`` files (schema v1)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from gbx.errors import GbxError
from gbx.records import (
    TAGS,
    ErrorLine,
    EvalLine,
    MetaLine,
    ResumeLine,
    SchemaError,
    TrainRecord,
    parse,
)

LOG_NAME = "train_log.jsonl"


def classify(obj: dict[str, Any]) -> str:
    """The line's kind: one of :data:`TAGS` for ``{"tag": {...}}`` lines, else ``"record"``."""
    if len(obj) == 1:
        (key,) = obj
        if key in TAGS:
            return key
    return "record"


def iter_lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """Yield ``(line_number, text, has_newline)`` for each line, numbered from 1.

    Raises :class:`GbxError` at the first line that is not UTF-8 text (not a gbx log).
    """
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise GbxError(
                    f"{path} line {number} is not UTF-8 text (byte {exc.start}: "
                    f"{raw[exc.start:exc.start + 1]!r}); a gbx log is UTF-8 JSON lines"
                ) from exc
            yield number, text.rstrip("\n"), text.endswith("\n")


def repair_torn_tail(path: Path) -> int:
    """Cut a last line left incomplete by a killed writer; return the bytes removed.

    Records are written whole and flushed, each ending in a newline, so any
    bytes after the last newline are a partial write.
    """
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as handle:
        # Scan backwards in blocks for the last newline: logs can be large.
        position = size
        block = 4096
        while position > 0:
            start = max(0, position - block)
            handle.seek(start)
            chunk = handle.read(position - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            position = start
        else:
            keep = 0
        if keep < size:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
    return size - keep


@attrs.define
class ValidationSummary:
    """What ``gbx log validate`` prints (as JSON)."""

    file: str
    lines: int = 0
    records: int = 0
    evals: int = 0
    errors: int = 0
    resumes: int = 0
    last_env_steps: int | None = None
    problems: int = 0
    first_problem: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.problems == 0

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **attrs.asdict(self)}

    def note(self, line: int, message: str) -> None:
        self.problems += 1
        if self.first_problem is None:
            self.first_problem = {"line": line, "message": message}


@attrs.define
class _Segment:
    """Counters of the records since the start or the last resume line."""

    env_steps: int = -1
    opt_steps: int = -1
    wall_time_s: float = -1.0
    floor_env_steps: int = 0


def validate_log(path: Path) -> ValidationSummary:
    """Check every line of a log: schema, run id, counter monotonicity, numeric sanity."""
    summary = ValidationSummary(file=str(path))
    if not path.exists():
        summary.note(0, f"{path} does not exist")
        return summary
    run_id: str | None = None
    num_envs: int | None = None
    segment = _Segment()
    for number, text, has_newline in iter_lines(path):
        summary.lines = number
        try:
            obj = json.loads(text, parse_constant=_reject_constant)
        except (json.JSONDecodeError, SchemaError) as exc:
            torn = "" if has_newline else " (torn last line of a killed run; resuming repairs it)"
            summary.note(number, f"not valid JSON: {exc}{torn}")
            continue
        if not isinstance(obj, dict):
            summary.note(number, "a line must be a JSON object")
            continue
        kind = classify(obj)
        if number == 1 and kind != "meta":
            summary.note(number, 'the first line must be {"meta": {...}}')
        try:
            if kind == "meta":
                if number != 1:
                    raise SchemaError("a meta line may only be the first line")
                meta: MetaLine = parse(MetaLine, obj["meta"])
                run_id, num_envs = meta.run_id, meta.num_envs
            elif kind == "record":
                record: TrainRecord = parse(TrainRecord, obj, num_envs=num_envs)
                summary.records += 1
                _check_record_order(record, run_id, segment)
                summary.last_env_steps = record.env_steps
            elif kind == "eval":
                evaluation: EvalLine = parse(EvalLine, obj["eval"], num_envs=num_envs)
                summary.evals += 1
                if evaluation.env_steps < segment.floor_env_steps:
                    raise SchemaError("eval env_steps lies before the step the run resumed from")
            elif kind == "resume":
                resume: ResumeLine = parse(ResumeLine, obj["resume"], num_envs=num_envs)
                summary.resumes += 1
                if run_id is not None and resume.run_id != run_id:
                    raise SchemaError(f"resume run_id {resume.run_id!r} != meta run_id {run_id!r}")
                segment = _Segment(floor_env_steps=resume.env_steps or 0)
            else:
                parse(ErrorLine, obj["error"], num_envs=num_envs)
                summary.errors += 1
        except SchemaError as exc:
            summary.note(number, f"{kind}: {exc}")
    if summary.lines == 0:
        summary.note(0, "the log is empty")
    return summary


def _reject_constant(name: str) -> float:
    raise SchemaError(f"{name} is not allowed; values must be finite")


def _check_record_order(record: TrainRecord, run_id: str | None, segment: _Segment) -> None:
    if run_id is not None and record.run_id != run_id:
        raise SchemaError(f"run_id {record.run_id!r} differs from the meta line's {run_id!r}")
    if record.env_steps < segment.floor_env_steps:
        raise SchemaError(
            f"env_steps {record.env_steps} lies before the resume step {segment.floor_env_steps}"
        )
    for key in ("env_steps", "opt_steps", "wall_time_s"):
        previous = getattr(segment, key)
        current = getattr(record, key)
        if current < previous:
            raise SchemaError(f"{key} went backwards: {previous} -> {current}")
        setattr(segment, key, current)


@attrs.define
class LoadedLog:
    """The effective content of a log, for plots and tools.

    ``records`` has superseded entries removed: when a resumed run logs a step
    the killed run had already logged, the newer record wins and the older
    records from that step on are dropped, so series stay monotonic.
    """

    meta: dict[str, Any]
    records: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    resumes: list[dict[str, Any]]


def load_log(path: Path) -> LoadedLog:
    """Read a log leniently (unparsable lines skipped) for display."""
    loaded = LoadedLog(meta={}, records=[], evals=[], errors=[], resumes=[])
    after_resume = False
    for _number, text, _newline in iter_lines(path):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        kind = classify(obj)
        if kind == "meta":
            loaded.meta = obj["meta"]
        elif kind == "record":
            steps = obj.get("env_steps")
            if after_resume and isinstance(steps, int):
                loaded.records = [r for r in loaded.records if r.get("env_steps", -1) < steps]
                loaded.evals = [e for e in loaded.evals if e.get("env_steps", -1) < steps]
            after_resume = False
            loaded.records.append(obj)
        elif kind == "eval":
            loaded.evals.append(obj["eval"])
        elif kind == "error":
            loaded.errors.append(obj["error"])
        else:
            loaded.resumes.append(obj["resume"])
            after_resume = True
    return loaded


def last_record(path: Path) -> dict[str, Any] | None:
    """The last parsable training record of a log, if any."""
    found: dict[str, Any] | None = None
    for _number, text, _newline in iter_lines(path):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and classify(obj) == "record":
            found = obj
    return found
