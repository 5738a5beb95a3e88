"""The ``jsonl`` observer: writes ``train_log.jsonl`` (schema v1), one flushed line per event."""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from gbx.records import (
    SCHEMA_VERSION,
    ErrorLine,
    EvalLine,
    MetaLine,
    ResumeLine,
    SchemaError,
    TrainRecord,
    parse,
    to_json_dict,
)
from gbx_observers.files import dumps, to_jsonable
from gbx_observers.logfile import LOG_NAME, last_record, repair_torn_tail


def _host_values(record: Mapping[str, Any]) -> dict[str, Any]:
    """Turn stray 0-d tensors/numpy scalars into Python numbers, keeping NaN visible."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if hasattr(value, "tolist") and not isinstance(value, str):
            value = value.tolist()
        elif isinstance(value, Mapping):
            value = _host_values(value)
        out[str(key)] = value
    return out


def _compact(value: Any) -> Any:
    """Round floats to 7 significant digits: metrics come from float32, more digits are noise."""
    if isinstance(value, float):
        return float(f"{value:.7g}")
    if isinstance(value, list):
        return [_compact(v) for v in value]
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items()}
    return value


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class JsonlObserver:
    """Appends schema-v1 lines to ``run_dir/train_log.jsonl``.

    The file is opened in append mode. A fresh log starts with the meta line;
    an existing one (a resumed run) first has a torn last line cut off, then
    gets a ``resume`` line. Records come stamped by the run loop
    (:class:`gbx.records.Stamper`: ``run_id``, ``trace_id``, ``wall_time_s``,
    ``sps`` ...); this observer computes none of them. A record that breaks the
    schema (a missing common field among them) (a NaN loss, a per-env vector) is not
    written: an ``error`` line naming the problem takes its place and a
    warning goes to stderr, so the run goes on and the log stays valid.
    """

    def __init__(self, run: Any, *, path: Path | None = None) -> None:
        self.run = run
        self.path = path if path is not None else Path(run.run_dir) / LOG_NAME
        self.run_id = str(getattr(run, "run_id", "run"))
        self._file: IO[str] | None = None
        self._num_envs: int | None = None
        self._last_steps: int | None = None
        self._warned: set[str] = set()

    # -- events --------------------------------------------------------------------

    def on_run_start(self, meta: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        resuming = self.path.exists() and self.path.stat().st_size > 0
        repaired = repair_torn_tail(self.path) if resuming else 0
        resuming = resuming and self.path.stat().st_size > 0
        meta_dict = to_jsonable(dict(meta))
        self.run_id = str(meta_dict.get("run_id", self.run_id))
        self._num_envs = _num_envs(meta_dict)
        self._file = open(self.path, "a", encoding="utf-8")  # held open for the whole run
        if resuming:
            previous = last_record(self.path)
            resume = {
                "run_id": self.run_id,
                "time": _utc_now(),
                "env_steps": _resume_value(meta_dict, "step"),
                "last_logged_env_steps": previous.get("env_steps") if previous else None,
                "repaired_bytes": repaired,
            }
            checkpoint = _resume_value(meta_dict, "from")
            if checkpoint is not None:
                resume["checkpoint"] = str(checkpoint)
            self._write_line("resume", ResumeLine, resume)
        else:
            meta_dict.setdefault("run_id", self.run_id)
            meta_dict.setdefault("log_schema", SCHEMA_VERSION)
            self._write_line("meta", MetaLine, meta_dict)

    def on_record(self, record: Mapping[str, Any]) -> None:
        values = self._complete(_host_values(record))
        try:
            line = parse(TrainRecord, values, num_envs=self._num_envs)
        except SchemaError as exc:
            self._reject("record", values, exc)
            return
        self._write(_compact(to_json_dict(line)))

    def on_eval(self, record: Mapping[str, Any]) -> None:
        values = _host_values(record)
        if "env_steps" not in values:
            step = values.get("step", self._last_steps)
            if step is not None:
                values["env_steps"] = step
        try:
            line = parse(EvalLine, values, num_envs=self._num_envs)
        except SchemaError as exc:
            self._reject("eval", values, exc)
            return
        self._write({"eval": _compact(to_json_dict(line))})

    def on_failure(self, error: Mapping[str, Any]) -> None:
        # The log gets a one-line summary; traceback, config and last records
        # belong to the failure bundle, which the line points to.
        values: dict[str, Any] = {
            "message": str(error.get("message") or error.get("error") or "run failed"),
            "kind": "failure",
        }
        trace_id = error.get("trace_id")
        if trace_id:
            values["trace_id"] = str(trace_id)
        if self._last_steps is not None:
            values["env_steps"] = self._last_steps
        paths = error.get("paths")
        if isinstance(paths, list | tuple) and paths:
            values["bundle"] = str(paths[0])
        if error.get("repro"):
            values["repro"] = str(error["repro"])
        self._write({"error": to_json_dict(parse(ErrorLine, values))})

    def on_checkpoint(self, path: Path, step: int) -> None:
        if self._file is not None:  # a checkpoint is a good moment to make the log durable
            os.fsync(self._file.fileno())

    def on_run_end(self, summary: Mapping[str, Any]) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    # -- helpers -------------------------------------------------------------------

    def _complete(self, values: dict[str, Any]) -> dict[str, Any]:
        steps = values.get("env_steps")
        if isinstance(steps, int):
            self._last_steps = steps  # failure lines name the last step logged
        return values

    def _reject(self, kind: str, values: Mapping[str, Any], exc: SchemaError) -> None:
        message = f"{kind} rejected by log schema v{SCHEMA_VERSION}: {exc}"
        if message not in self._warned:
            self._warned.add(message)
            print(f"gbx jsonl: {message}", file=sys.stderr)
        error: dict[str, Any] = {"message": message, "kind": f"invalid_{kind}"}
        for key in ("trace_id", "env_steps"):
            if isinstance(values.get(key), str | int) and not isinstance(values.get(key), bool):
                error[key] = values[key]
        try:
            line = parse(ErrorLine, error)
        except SchemaError:
            line = ErrorLine(message=message, kind=f"invalid_{kind}")
        self._write({"error": to_json_dict(line)})

    def _write_line(self, tag: str, cls: type, values: dict[str, Any]) -> None:
        self._write({tag: to_json_dict(parse(cls, values, num_envs=self._num_envs))})

    def _write(self, obj: Mapping[str, Any]) -> None:
        if self._file is None:
            raise RuntimeError("jsonl observer got an event before on_run_start")
        # One write call per line, then flush: a killed run tears at most the last line.
        self._file.write(dumps(obj) + "\n")
        self._file.flush()


def _resume_value(meta: Mapping[str, Any], key: str) -> Any:
    """``meta["resume"][key]`` as the core states a resumed run (``step``, ``from``)."""
    resume = meta.get("resume")
    if isinstance(resume, Mapping):
        value = resume.get(key)
        if key == "step":
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        return None if value is None else str(value)
    return None


def _num_envs(meta: Mapping[str, Any]) -> int | None:
    """The run's env count, from the meta line or the algorithm's config section."""
    candidates = [meta.get("num_envs")]
    config = meta.get("config")
    if isinstance(config, Mapping) and isinstance(config.get("algo"), Mapping):
        candidates.append(config["algo"].get("num_envs"))
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
