"""The record schema: what a run's records hold, the contract between algorithms and observers.

A trainer hands ``ctx.record(metrics)`` its own measurements (losses, rates, counters); the
run loop adds the common fields in one place, :class:`Stamper` (``run_id``, ``seq``,
``kind``, ``step``/``env_steps``, ``wall_time_s``, ``trace_id`` and, for training
records, ``sps``), and every observer receives the result. Record kinds
(:data:`KINDS`): ``train`` (``on_record``) and ``eval`` (``on_eval``).

Schema v1 of the run's JSON-lines log (written by the observer that declares a ``log``
output, read back by the log commands) is defined here too, the one definition writers and
validators share. A log is a sequence of JSON objects, one a line:

* line 1: ``{"meta": {...}}``, the run's metadata (:class:`MetaLine`);
* one training record per update, a flat object (:class:`TrainRecord`);
* ``{"eval": {...}}`` evaluation summaries (:class:`EvalLine`);
* ``{"resume": {...}}`` where a resumed run starts appending (:class:`ResumeLine`);
* ``{"error": {...}}`` failures and rejected records (:class:`ErrorLine`).

Each class lists its known fields; the ``check`` metadata of a field names
the rule its value obeys. Keys a class does not list are *extras*: allowed
(an algorithm's own losses, an env's own counters) as long as they are JSON
scalars or short numeric lists. Every number must be finite.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

SCHEMA_VERSION = 1
# Kinds of run records: training records (observers' on_record), evaluation summaries
# (on_eval).
KINDS = ("train", "eval")
# Fields the run loop stamps on every record; training records get SPS_FIELD as well.
COMMON_FIELDS = ("run_id", "seq", "kind", "step", "env_steps", "wall_time_s", "trace_id")
SPS_FIELD = "sps"


class Stamper:
    """Computes the common fields of a run's records: the one place they come from.

    ``step`` is the record's ``step``, else its ``env_steps``, else the last step seen
    (env steps of the whole run); ``sps`` is env steps per second of wall clock since
    the previous training record (or since :meth:`restart_window`, which the run calls
    after work that is not training, such as a scheduled evaluation).
    """

    def __init__(self, run_id: str, *, start_step: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.run_id = run_id
        self.seq = 0
        self.last_step = int(start_step)
        self._clock = clock
        self._t0 = clock()
        self._window = (self.last_step, self._t0)

    def elapsed(self) -> float:
        """Seconds since the stamper (the run) started."""
        return self._clock() - self._t0

    def restart_window(self) -> None:
        """Start the next ``sps`` window now (time spent so far is not training time)."""
        self._window = (self.last_step, self._clock())

    def stamp(self, metrics: Mapping[str, Any], kind: str) -> dict[str, Any]:
        """``metrics`` with the common fields of a ``kind`` record."""
        if kind not in KINDS:
            raise ValueError(f"record kind {kind!r} is not one of {KINDS}")
        self.seq += 1
        rec = dict(metrics)
        step = rec.get("step", rec.get("env_steps", self.last_step))
        if isinstance(step, int | float) and not isinstance(step, bool):
            step = int(step)
            self.last_step = max(self.last_step, step)
        rec["step"] = step
        rec.setdefault("env_steps", step)
        now = self._clock()
        rec.update(kind=kind, run_id=self.run_id, seq=self.seq,
                   wall_time_s=round(now - self._t0, 4), trace_id=f"{self.run_id}.{self.seq}")
        if kind == "train":
            start_step, start_time = self._window
            moved = step - start_step if isinstance(step, int) else 0
            rec[SPS_FIELD] = max(moved, 0) / max(now - start_time, 1e-9)
            self._window = (self.last_step, now)
        return rec
# Longest list a line may hold. Logs carry window statistics, never per-env
# vectors: with thousands of envs those would bloat the file and hide bugs.
MAX_LIST_LEN = 64
TAGS = ("meta", "eval", "resume", "error")


class SchemaError(ValueError):
    """A log line breaks schema v1; the message names the key and the rule."""


def _field(check: str, *, required: bool = False) -> Any:
    if required:
        return attrs.field(metadata={"check": check})
    return attrs.field(default=None, metadata={"check": check})


@attrs.frozen
class TrainRecord:
    """One record per update. Required keys first, then known optional ones.

    Optional keys are left out when the run cannot measure them (no distance
    for an env without goals, no value head for a random policy).
    """

    run_id: str = _field("text", required=True)
    trace_id: str = _field("text", required=True)
    env_steps: int = _field("counter", required=True)
    opt_steps: int = _field("counter", required=True)
    wall_time_s: float = _field("nonneg", required=True)
    sps: float = _field("nonneg", required=True)
    done_rate: float = _field("rate", required=True)
    trunc_rate: float = _field("rate", required=True)
    reset_rate: float = _field("rate", required=True)
    reward_mean: float = _field("finite", required=True)
    success_rate: float | None = _field("rate")
    episodes: int | None = _field("count")
    episode_return_mean: float | None = _field("finite")
    episode_length_mean: float | None = _field("nonneg")
    dist_p10: float | None = _field("finite")
    dist_p50: float | None = _field("finite")
    dist_p90: float | None = _field("finite")
    entropy_mean: float | None = _field("nonneg")
    value_mean: float | None = _field("finite")
    value_std: float | None = _field("nonneg")
    action_hist: list[int] | None = _field("hist")
    extras: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class MetaLine:
    """Run metadata, written once at the top. Whatever the run knows is kept as extras.

    Typical extras: ``git_commit``, ``git_dirty``, ``rom_sha256``,
    ``state_sha256``, ``goal_sha256``, ``config`` (the full resolved config),
    ``versions`` (python, torch, warp, cuda), ``device_name``, ``seed``,
    ``action_codec``, ``frames_per_step``, ``stack_k``, ``num_envs``.
    """

    run_id: str = _field("text", required=True)
    log_schema: int = attrs.field(default=SCHEMA_VERSION, metadata={"check": "count"})
    num_envs: int | None = _field("count")
    extras: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class EvalLine:
    """One evaluation summary, tagged with the training step it was taken at.

    Returns and lengths are per episode (not per step as in training
    records). A random-policy baseline, when measured, comes as ``random_*``
    extras with the same meaning.
    """

    env_steps: int = _field("counter", required=True)
    episodes: int | None = _field("count")
    success_rate: float | None = _field("rate")
    mean_return: float | None = _field("finite")
    mean_length: float | None = _field("nonneg")
    median_steps_to_goal: float | None = _field("nonneg")
    extras: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ResumeLine:
    """Marks where a resumed run starts appending.

    ``env_steps`` is the step the run resumes from (its checkpoint), when
    known: records logged after that checkpoint by the killed run are
    superseded by the ones that follow this line. ``repaired_bytes`` counts
    the bytes of a torn last line that were cut off before appending.
    """

    run_id: str = _field("text", required=True)
    time: str = _field("text", required=True)
    env_steps: int | None = _field("counter")
    last_logged_env_steps: int | None = _field("counter")
    repaired_bytes: int | None = _field("count")
    extras: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ErrorLine:
    """A failure of the run, or a record the writer had to reject."""

    message: str = _field("text", required=True)
    trace_id: str | None = _field("text")
    kind: str | None = _field("text")
    env_steps: int | None = _field("counter")
    extras: dict[str, Any] = attrs.field(factory=dict)


LINE_CLASSES: dict[str, type] = {
    "record": TrainRecord,
    "meta": MetaLine,
    "eval": EvalLine,
    "resume": ResumeLine,
    "error": ErrorLine,
}


def required_keys(cls: type) -> tuple[str, ...]:
    """Keys a line of this class must carry."""
    return tuple(
        f.name for f in attrs.fields(cls) if f.name != "extras" and f.default is attrs.NOTHING
    )


def known_keys(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in attrs.fields(cls) if f.name != "extras")


# -- value rules ----------------------------------------------------------------------


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_value(key: str, check: str, value: object) -> None:
    if check == "text":
        if not isinstance(value, str) or not value:
            raise SchemaError(f"{key!r} must be a non-empty string, got {value!r}")
        return
    if check == "hist":
        if not isinstance(value, list) or not value:
            raise SchemaError(f"{key!r} must be a non-empty list of counts, got {value!r}")
        if len(value) > MAX_LIST_LEN:
            raise SchemaError(f"{key!r} has {len(value)} bins; at most {MAX_LIST_LEN} are allowed")
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in value):
            raise SchemaError(f"{key!r} must hold non-negative integer counts")
        return
    if not _is_number(value):
        raise SchemaError(f"{key!r} must be a number, got {value!r}")
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise SchemaError(f"{key!r} is {value!r}; values must be finite (no NaN/Inf)")
    if check in ("counter", "count"):
        if not isinstance(value, int) or value < 0:
            raise SchemaError(f"{key!r} must be a non-negative integer, got {value!r}")
    elif check == "nonneg" and number < 0:
        raise SchemaError(f"{key!r} must be >= 0, got {value!r}")
    elif check == "rate" and not 0.0 <= number <= 1.0:
        raise SchemaError(f"{key!r} is a rate and must lie in [0, 1], got {value!r}")


def _check_extra(key: str, value: object, num_envs: int | None) -> None:
    if value is None or isinstance(value, str | bool):
        return
    if _is_number(value):
        if not math.isfinite(float(value)):  # type: ignore[arg-type]
            raise SchemaError(f"{key!r} is {value!r}; values must be finite (no NaN/Inf)")
        return
    if isinstance(value, list):
        if len(value) > MAX_LIST_LEN:
            raise SchemaError(
                f"{key!r} is a list of {len(value)}; at most {MAX_LIST_LEN} entries are allowed "
                "(log window statistics, not per-env vectors)"
            )
        if num_envs is not None and num_envs > 1 and len(value) == num_envs:
            raise SchemaError(
                f"{key!r} has one entry per env ({num_envs}); log a statistic of it instead"
            )
        for item in value:
            _check_extra(key, item, None)
        return
    if isinstance(value, Mapping):
        for sub_key, sub_value in value.items():
            _check_extra(f"{key}.{sub_key}", sub_value, num_envs)
        return
    raise SchemaError(f"{key!r} has unsupported value {value!r}; use numbers, strings or lists")


def parse(cls: type, data: Mapping[str, Any], *, num_envs: int | None = None) -> Any:
    """Check ``data`` against ``cls`` and build it; raise :class:`SchemaError` on the first problem.

    ``num_envs`` (from the meta line) lets list extras of that exact length
    be recognised as per-env vectors and rejected. Meta lines keep their
    extras unchecked for list length: the resolved config may hold long lists.
    """
    if not isinstance(data, Mapping):
        raise SchemaError(f"expected a JSON object, got {type(data).__name__}")
    missing = [k for k in required_keys(cls) if k not in data]
    if missing:
        raise SchemaError(f"missing required key(s) {', '.join(missing)}")
    known: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    checks = {f.name: f.metadata.get("check") for f in attrs.fields(cls) if f.name != "extras"}
    for key, value in data.items():
        if key in checks:
            if value is None and key not in required_keys(cls):
                continue
            _check_value(key, checks[key], value)
            known[key] = value
        elif cls is MetaLine:
            _check_json_numbers(key, value)
            extras[key] = value
        else:
            _check_extra(key, value, num_envs)
            extras[key] = value
    if cls is TrainRecord:
        _check_percentile_order(known)
    return cls(**known, extras=extras)


def _check_json_numbers(key: str, value: object) -> None:
    """Meta may be deep (the config); only its numbers are checked, for finiteness."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"{key!r} is {value!r}; values must be finite (no NaN/Inf)")
    if isinstance(value, Mapping):
        for sub_key, sub_value in value.items():
            _check_json_numbers(f"{key}.{sub_key}", sub_value)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_json_numbers(key, item)


def _check_percentile_order(known: Mapping[str, Any]) -> None:
    present = [known[k] for k in ("dist_p10", "dist_p50", "dist_p90") if k in known]
    if len(present) == 3 and not present[0] <= present[1] <= present[2]:
        raise SchemaError(f"dist percentiles out of order: p10 <= p50 <= p90 fails for {present}")


def to_json_dict(line: Any) -> dict[str, Any]:
    """Flatten a schema object back to the dict written to the log (extras inline, None dropped)."""
    out = {k: v for k, v in attrs.asdict(line, recurse=False).items() if k != "extras"}
    out = {k: v for k, v in out.items() if v is not None}
    out.update(line.extras)
    return out
