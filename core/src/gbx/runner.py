"""The run loop: builds everything from a resolved config and implements RunContext.

The trainer owns its training loop; :class:`Run` gives it envs, a place to
send metrics and checkpoints, and a stop flag. Everything else (observers,
artifact writers, resume, failure bundles, signals) happens here.
"""

from __future__ import annotations

import collections
import datetime as _dt
import importlib.metadata
import platform
import shlex
import signal
import subprocess
import sys
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch

from gbx import __version__, seeds
from gbx import distributed as gdist
from gbx.api import (
    DeviceDefaults,
    EnvMeta,
    FailureContext,
    GoalStateSaver,
    RealStartConfig,
)
from gbx.artifacts import latest_checkpoint, remove_partial_checkpoints
from gbx.checkpoint_file import FORMAT_VERSION as CHECKPOINT_FORMAT
from gbx.config import Config, RunConfig, to_dict, write_atomic
from gbx.envcheck import CheckedEnv
from gbx.errors import GbxError, RunFailedError
from gbx.plugins import PluginHost
from gbx.records import Stamper
from gbx.registry import ObserverSpec, Registry
from gbx.resolve import (
    require_algorithm,
    require_env,
    require_observer,
    resolve_device,
    wrap_explorer,
)
from gbx.saved import SavedCheckpoint, init_from_checkpoint, load_trainer, newest_checkpoint
from gbx.schedule import Schedule, run_final_checkpoint

OBSERVER_EVENTS = ("on_run_start", "on_record", "on_eval", "on_checkpoint", "on_failure",
                   "on_run_end")
_KEEP_RECORDS = 50  # records kept in memory for failure bundles


SUMMARY_FILE = "summary.json"
GOAL_STATES_DIR = "goal_states"  # savestates the training envs reached at the goal
# The stop reason of a run an evaluation ended (run.stop_at_success).
SOLVED = "solved"
# The stop reason of a run whose wall-clock budget ran out (run.max_seconds).
TIME_LIMIT = "time_limit"
# Exit status of `gbx run` by how the run ended; a stop by signal N exits 128 + N (the
# shell's convention: 143 for SIGTERM, 130 for SIGINT), so a supervisor tells a stopped
# run from a completed one.
EXIT_COMPLETED = 0
EXIT_FAILED = 1


def exit_code_for(status: str, signum: int | None) -> int:
    """``gbx run``'s exit status for a run that ended with ``status``."""
    if status == "completed":
        return EXIT_COMPLETED
    if status in ("stopped", "interrupted"):
        return 128 + int(signum if signum is not None else signal.SIGINT)
    return EXIT_FAILED


def new_run_id() -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


def default_run_dir(run: RunConfig, run_id: str, root: Path = Path("runs")) -> Path:
    """``runs/<timestamp>__<algo>__<env>__<tag>/`` (tag part omitted when empty)."""
    parts = [run_id, run.algo, run.env] + ([run.tag] if run.tag else [])
    return root / "__".join(parts)


def git_state(cwd: Path | None = None) -> dict[str, Any] | None:
    """Commit and dirty flag of the git checkout around ``cwd`` (None outside git)."""
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "gbx": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    try:  # read from the metadata: importing warp would initialise it
        out["warp"] = importlib.metadata.version("warp-lang")
    except importlib.metadata.PackageNotFoundError:
        out["warp"] = None
    return out


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def _cpu_value(value: Any) -> Any:
    """A one-element tensor as a plain number in CPU memory; anything else unchanged."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return value


def with_device_defaults(config: Config, device: torch.device) -> Config:
    """``config`` with the device-dependent defaults of its env and algorithm sections
    resolved for ``device`` (:class:`gbx.api.DeviceDefaults`); other sections unchanged."""
    sections = {name: section.for_device(device) for name in ("env", "algo")
                if isinstance(section := getattr(config, name), DeviceDefaults)}
    return attrs.evolve(config, **sections) if sections else config


class Run:
    """One run: implements :class:`gbx.api.RunContext` for the trainer."""

    def __init__(
        self,
        config: Config,
        host: PluginHost,
        *,
        run_dir: Path,
        run_id: str,
        device: torch.device,
        resume: Mapping[str, Any] | None = None,
        argv: list[str] | None = None,
        dist: gdist.DistInfo | None = None,
    ) -> None:
        self.config = config = with_device_defaults(config, device)
        self.host = host
        self.run_dir = run_dir
        self.run_id = run_id
        self.device = device
        # With several ranks (torchrun) each rank has its own seed, so env shards differ.
        self.dist = dist or gdist.DistInfo()
        self.seed = seeds.rank_seed(config.run.seed, self.dist.rank)
        self.resume_info = dict(resume) if resume else None
        self.argv = argv
        self.observers: list[Any] = []
        self.trainer: Any = None
        self.env_meta: dict[str, Any] = {}
        self.last_step = int(resume["step"]) if resume else 0
        # a resumed run starts at its checkpoint: that step needs no second one
        self.last_checkpoint_step: int | None = self.last_step if resume else None
        last_eval = int(resume.get("last_eval_step", -1)) if resume else -1
        # wall-clock seconds of the run before this process (run.max_seconds counts on)
        self.seconds_before = float(resume.get("elapsed_s", 0.0)) if resume else 0.0
        self.last_eval_step: int | None = last_eval if last_eval >= 0 else None
        # Evaluations and checkpoints on the run's cadence, continued from a resumed step.
        self.schedule = Schedule.of(config.run, start_step=self.last_step)
        self._stop_reason: str | None = None
        self.stop_signal: int | None = None  # the signal that stopped the run, if one did
        self.explored = False  # whether the configured explorer wrapped a training env
        self._started = False
        # The common fields of every record (seq, wall time, sps, ...): computed here only.
        self.stamper = Stamper(run_id, start_step=self.last_step)
        self._records: collections.deque[dict[str, Any]] = collections.deque(maxlen=_KEEP_RECORDS)
        self._training_envs: list[Any] = []  # built by make_env for training (not evaluation)

    # -- RunContext ----------------------------------------------------------

    def make_env(self, num_envs: int, *, seed_offset: int = 0, training: bool = False) -> Any:
        spec = require_env(self.host.registry, self.config.run.env)
        env_config = self.config.env
        if not training and isinstance(env_config, RealStartConfig):
            env_config = env_config.real_start()  # the task itself, never the curriculum
        env = spec.factory(env_config, num_envs, self.device, self.seed + seed_offset)
        if training:
            self._training_envs.append(env)  # its goal states go to every checkpoint
        if training and self.config.explore.enabled:
            env = self._explore(env)
        if self.config.run.debug:
            env = CheckedEnv(env)  # checks what the trainer sees, the explorer's output
        if isinstance(env, EnvMeta) and (not self.env_meta or training):
            self.env_meta = dict(env.meta())
        return env

    def _explore(self, env: Any) -> Any:
        """Wrap training envs in the configured explorer (``explore.name``)."""
        wrapped = wrap_explorer(self.host.registry, self.config.explore, env,
                                seed=seeds.derive(self.seed, seeds.Stream.EXPLORE),
                                env_name=self.config.run.env)
        self.explored = True
        return wrapped

    def record(self, metrics: Mapping[str, Any]) -> None:
        if self.dist.enabled:  # every rank ends up with the same global record
            metrics = gdist.reduce_record(metrics)
        rec = self._stamp(metrics, "train")
        if isinstance(rec.get("step"), int | float):
            self.last_step = max(self.last_step, int(rec["step"]))
        self._emit("on_record", rec)
        # The trainer calls record between updates, so its state is whole here.
        if self.schedule.after_record(self.last_step, self.trainer,
                                      record_eval=self.record_eval, checkpoint=self.checkpoint):
            self.stamper.restart_window()  # evaluation and checkpoint time is not training
        limit = self.config.run.max_seconds
        if (limit > 0 and self._stop_reason is None
                and self.seconds_before + float(rec["wall_time_s"]) >= limit):
            self.request_stop(TIME_LIMIT)
        if self._stop_reason == SOLVED and self.last_checkpoint_step != self.last_step:
            # Now, while the trainer's state is the evaluated one: a trainer may finish
            # some work before it looks at should_stop().
            self.checkpoint(self.trainer.state_dict(), step=self.last_step)

    def record_eval(self, metrics: Mapping[str, Any]) -> None:
        rec = self._stamp(metrics, "eval")
        self.last_eval_step = int(rec["step"])
        self._emit("on_eval", rec)
        target = self.config.run.stop_at_success
        success = rec.get("success_rate")
        if (target > 0 and not rec.get("final") and isinstance(success, int | float)
                and success >= target):
            self.request_stop(SOLVED)

    def checkpoint(self, state: Mapping[str, Any], *, step: int) -> Path:
        if self.dist.enabled:
            # Trainers count their own rank's env steps; the run counts the whole job's.
            step = max(int(step), self.last_step)
            if not self.dist.is_main:  # rank 0 writes; every rank holds the same model
                self.last_step = max(self.last_step, int(step))
                self.last_checkpoint_step = int(step)
                return self.run_dir / "checkpoints"
        payload = {
            "format": CHECKPOINT_FORMAT,
            "step": int(step),
            "run_id": self.run_id,
            "config": to_dict(self.config),
            "state": dict(state),
            # The schedule evaluates before it checkpoints: a run resumed from here knows
            # whether this step's evaluation (which stands in for the final one) happened.
            "last_eval_step": -1 if self.last_eval_step is None else int(self.last_eval_step),
            # the run's wall clock so far: a resumed run's run.max_seconds counts on from it
            "elapsed_s": round(self.seconds_before + self.elapsed(), 3),
        }
        self._ensure_started()
        paths = self.write_artifact("checkpoint", payload)
        if not paths:
            raise GbxError("no 'checkpoint' artifact writer is registered")
        self.last_step = max(self.last_step, int(step))
        self.last_checkpoint_step = int(step)
        self._save_goal_states()
        self._emit("on_checkpoint", paths[0], int(step))
        return paths[0]

    def _save_goal_states(self) -> None:
        """Write the goal states the training envs hold into ``goal_states/`` (envs that
        keep them: :class:`gbx.api.GoalStateSaver`; others write nothing)."""
        for env in self._training_envs:
            if isinstance(env, GoalStateSaver):
                env.write_goal_states(self.run_dir / GOAL_STATES_DIR)

    def should_stop(self) -> bool:
        if self._stop_reason is None and self.last_step >= self.config.run.steps:
            self._stop_reason = "steps"
        if self.dist.enabled and gdist.any_rank(self._stop_reason is not None):
            # A signal that reached one rank stops them all at the same update; so does
            # an evaluation that reached run.stop_at_success on one rank (each rank
            # evaluates its own episodes), and then all of them say why.
            # (The second collective depends on the config alone, so every rank makes it.)
            if (self.config.run.stop_at_success > 0
                    and gdist.any_rank(self._stop_reason == SOLVED)
                    and self._stop_reason != "signal"):
                self._stop_reason = SOLVED
            # Each rank reads its own clock: the first past run.max_seconds stops them all.
            if (self.config.run.max_seconds > 0
                    and gdist.any_rank(self._stop_reason == TIME_LIMIT)
                    and self._stop_reason is None):
                self._stop_reason = TIME_LIMIT
            self._stop_reason = self._stop_reason or "signal"
        return self._stop_reason is not None

    # -- extras --------------------------------------------------------------

    def request_stop(self, reason: str = "signal") -> None:
        """Ask the trainer to stop at its next ``should_stop()`` check."""
        self._stop_reason = self._stop_reason or reason

    @property
    def stop_reason(self) -> str | None:
        """Why the run stops (``"signal"``, ``"steps"``, ``"solved"``, ``"time_limit"``), or
        None while it goes on."""
        return self._stop_reason

    def write_artifact(self, kind: str, payload: Mapping[str, Any]) -> list[Path]:
        """Hand ``payload`` to every writer of ``kind``; return the paths written.

        Only rank 0 writes run files; the other ranks write nothing.
        """
        if not self.dist.is_main:
            return []
        return [Path(w.writer(self.run_dir, payload)) for w in self.host.registry.writers_for(kind)]

    def elapsed(self) -> float:
        return self.stamper.elapsed()

    # -- internals -----------------------------------------------------------

    def _stamp(self, metrics: Mapping[str, Any], kind: str) -> dict[str, Any]:
        rec = self.stamper.stamp({k: _cpu_value(v) for k, v in metrics.items()}, kind)
        self._records.append(rec)
        self._ensure_started()
        return rec

    def _emit(self, event: str, *args: Any) -> None:
        for obs in self.observers:
            method = getattr(obs, event, None)
            if method is not None:
                method(*args)

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "run_id": self.run_id,
            "run_dir": str(self.run_dir),
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "git": git_state(),
            "config": to_dict(self.config),
            "versions": versions(),
            "plugins": {p.distribution: p.version for p in self.host.plugins},
            "device": str(self.device),
            "device_name": device_name(self.device),
            "seed": self.seed,
            "argv": self.argv,
            "env": self.env_meta,
        }
        if self.dist.enabled:
            meta["distributed"] = {"world_size": self.dist.world_size,
                                   "backend": self.dist.backend,
                                   "seeds": [seeds.rank_seed(self.config.run.seed, r)
                                             for r in range(self.dist.world_size)]}
        if self.resume_info:
            meta["resume"] = self.resume_info
        return meta

    def mark_started(self) -> None:
        """Write no run metadata and start no observers (a run context for evaluation)."""
        self._started = True

    def _ensure_started(self) -> None:
        if self._started:
            return
        self._started = True
        if not self.dist.is_main:
            return  # rank 0 writes the run's metadata and runs the observers
        meta = self.meta()
        self.write_artifact("meta", {"meta": meta, "config": meta["config"]})
        self._emit("on_run_start", meta)

    def summary(self, status: str) -> dict[str, Any]:
        """How the run ended (``wall_time_s`` this process's time, ``elapsed_s`` the whole
        run's, a resumed run's earlier time included): ``status`` is ``completed`` (the
        step budget ran out, an evaluation reached ``run.stop_at_success``, or
        ``run.max_seconds`` passed),
        ``stopped`` (a signal asked it to stop; its checkpoint is written),
        ``interrupted`` (a second Ctrl-C) or ``failed``; ``exit_code`` is what
        ``gbx run`` exits with (:func:`exit_code_for`)."""
        elapsed = self.elapsed()  # read once: both times end at the same moment
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "run_dir": str(self.run_dir),
            "status": status,
            "step": self.last_step,
            "wall_time_s": round(elapsed, 3),
            # the whole run's wall clock: a resumed run's earlier time (its checkpoint's)
            # and this process's
            "elapsed_s": round(self.seconds_before + elapsed, 3),
        }
        if self._stop_reason is not None:
            out["stop_reason"] = self._stop_reason
        if self.stop_signal is not None:
            out["signal"] = signal.Signals(self.stop_signal).name
        out["exit_code"] = exit_code_for(status, self.stop_signal)
        return out

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        """``summary.json`` in the run directory (rank 0; atomic), rewritten at each end."""
        if self.dist.is_main:
            import json

            from gbx.config import write_json_atomic

            write_json_atomic(self.run_dir / SUMMARY_FILE,
                              json.dumps(dict(summary), indent=2) + "\n")

    def repro_command(self, bundle: Path) -> str:
        """One command that reruns this configuration into a fresh directory."""
        return (
            f"gbx run --config {shlex.quote(str(bundle / 'config.json'))} "
            f"--run-dir {shlex.quote(str(self.run_dir) + '__repro')}"
        )

    def fail(self, exc: BaseException) -> RunFailedError:
        """Write the failure bundle, notify observers; return the error to raise."""
        trace_id = str(getattr(exc, "trace_id", "") or f"{self.run_id}.fail.{uuid.uuid4().hex[:6]}")
        message = f"{type(exc).__name__}: {exc}".strip()
        error = {
            "trace_id": trace_id,
            "run_id": self.run_id,
            "step": self.last_step,
            "error": message,
            "message": message,
            "traceback": "".join(traceback.format_exception(exc)),
            "config": to_dict(self.config),
            "records": list(self._records),
            "repro": self.repro_command(self.run_dir / "failures" / trace_id),
        }
        # Errors that carry their own diagnostics (e.g. NonFiniteError's batch
        # statistics) hand them to the bundle as plain data.
        details = getattr(exc, "to_dict", None)
        if callable(details):
            error["details"] = details()
        # The trainer's last observations and actions of one env ("frames", "actions"),
        # when it offers them; a failure while gathering them must not hide the error.
        if isinstance(self.trainer, FailureContext):
            try:
                context = self.trainer.failure_context()
                error.update({k: v for k, v in context.items() if k in ("frames", "actions")})
            except Exception as ctx_exc:  # noqa: BLE001 - the bundle matters more
                error["context_error"] = f"{type(ctx_exc).__name__}: {ctx_exc}"
        paths: list[Path] = []
        try:
            self._ensure_started()
            paths = self.write_artifact("failure", error)
        finally:
            error["paths"] = [str(p) for p in paths]
            self._emit("on_failure", error)
        where = f" (bundle: {paths[0]})" if paths else ""
        return RunFailedError(f"run failed [trace_id={trace_id}]: {message}{where}", trace_id)


@contextmanager
def stop_on_signals(run: Any) -> Iterator[None]:
    """SIGINT/SIGTERM ask the trainer to stop; a second SIGINT interrupts at once.

    ``run`` is a :class:`Run` or any run context with ``request_stop(reason)`` and a
    ``stop_reason`` attribute (``gbx dreamer validate`` uses its own); the handler
    calls ``run.request_stop("signal")`` and the trainer stops at its next
    ``should_stop()`` check. Outside the main thread it does nothing.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        if signum == signal.SIGINT and run.stop_reason == "signal":
            raise KeyboardInterrupt
        if isinstance(run, Run) and run.stop_signal is None:
            run.stop_signal = signum
        run.request_stop("signal")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _warn(line: str) -> None:
    print(line, file=sys.stderr)


def _make_run_dirs(run_dir: Path) -> None:
    if run_dir.exists() and not run_dir.is_dir():
        raise GbxError(f"run directory {run_dir} is an existing file; choose another --run-dir")
    try:
        for sub in ("checkpoints", "media", "failures"):
            (run_dir / sub).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GbxError(
            f"cannot create run directory {run_dir}: {exc.strerror or exc}; "
            "choose a writable --run-dir"
        ) from exc


def _plan_run(
    config: Config, resume_dir: Path | None, warn: Callable[[str], None] = _warn
) -> tuple[Config, Path, str, SavedCheckpoint | None, dict[str, Any] | None]:
    """Run directory, id and (when resuming) the checkpoint; creates the directories.

    A resumed run continues from its newest intact checkpoint (a damaged newer one is
    reported through ``warn`` and skipped); temporary files of a killed checkpoint
    write are deleted first.
    """
    checkpoint: SavedCheckpoint | None = None
    resume_info: dict[str, Any] | None = None
    if resume_dir is not None:
        run_dir = Path(resume_dir)
        try:
            checkpoint = newest_checkpoint(run_dir, warn)
        except FileNotFoundError as exc:
            raise GbxError(f"cannot resume {run_dir}: {exc}; start a new run instead") from exc
        run_id = str(checkpoint.payload.get("run_id") or run_dir.name)
        resume_info = {"from": str(checkpoint.path), "step": checkpoint.step,
                       "last_eval_step": int(checkpoint.payload.get("last_eval_step", -1)),
                       "elapsed_s": float(checkpoint.payload.get("elapsed_s", 0.0))}
        config = attrs.evolve(
            config, run=attrs.evolve(config.run, run_dir=str(run_dir), resume=str(run_dir))
        )
    else:
        run_id = new_run_id()
        run_dir = Path(config.run.run_dir) if config.run.run_dir else default_run_dir(
            config.run, run_id
        )
        if (run_dir / "meta.json").exists():
            raise GbxError(
                f"{run_dir} already holds a run; continue it with --resume {run_dir} "
                "or choose a new directory with --run-dir"
            )
        config = attrs.evolve(
            config, run=attrs.evolve(config.run, run_dir=str(run_dir), resume=None)
        )
    _make_run_dirs(run_dir)
    # Loading reads only whole checkpoint files, so the leftovers of a killed write can go
    # once the directory is known, whether the run starts or resumes.
    for tmp in remove_partial_checkpoints(run_dir):
        warn(f"gbx: removed {tmp}, a partial file of an interrupted write")
    return config, run_dir, run_id, checkpoint, resume_info


def prepare(
    config: Config,
    host: PluginHost,
    *,
    resume_dir: Path | None = None,
    argv: list[str] | None = None,
    device: torch.device | None = None,
    dist: gdist.DistInfo | None = None,
) -> tuple[Run, SavedCheckpoint | None]:
    """Create the run directory and the :class:`Run`; load the checkpoint to resume.

    With several ranks, rank 0 plans the run (directory, id, checkpoint) and hands
    the plan, checkpoint included, to the other ranks, so all resume from rank 0's file.
    """
    dist = dist or gdist.DistInfo()
    if device is None:
        device = resolve_device(config.run.device)
    plan: Any = None
    if dist.is_main:
        try:
            plan = _plan_run(config, resume_dir)
        except GbxError as exc:
            plan = exc  # handed to the other ranks too, so none waits forever
    if dist.enabled:
        plan = gdist.broadcast_object(plan)
    if isinstance(plan, GbxError):
        raise plan
    config, run_dir, run_id, checkpoint, resume_info = plan
    run = Run(config, host, run_dir=run_dir, run_id=run_id, device=device,
              resume=resume_info, argv=argv, dist=dist)
    return run, checkpoint


def _write_fingerprint(run: Run, trainer: Any) -> None:
    """With ``GBX_DIST_FINGERPRINT_DIR`` set, write this rank's parameter hash there.

    Used by the multi-rank test to check that data-parallel ranks hold identical models.
    """
    import json
    import os

    folder = os.environ.get("GBX_DIST_FINGERPRINT_DIR")
    if not folder:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    modules = gdist.trainer_modules(trainer)
    data = {"rank": run.dist.rank, "world_size": run.dist.world_size, "step": run.last_step,
            "seed": run.seed, "modules": sorted(modules),
            "fingerprint": gdist.fingerprint(modules)}
    write_atomic(out / f"rank{run.dist.rank}.json", json.dumps(data))


def execute(
    config: Config,
    host: PluginHost,
    *,
    resume_dir: Path | None = None,
    argv: list[str] | None = None,
    on_prepared: Callable[[Run], None] | None = None,
) -> dict[str, Any]:
    """Run training end to end; return the summary. Raises RunFailedError on a crash.

    Under torchrun (``WORLD_SIZE`` > 1) this process is one data-parallel rank:
    it joins the process group first and only rank 0 runs observers and writes files.
    """
    dist, device = gdist.init_from_env(config.run.device)
    ok = False
    try:
        summary = _execute(config, host, resume_dir=resume_dir, argv=argv,
                           on_prepared=on_prepared, device=device, dist=dist)
        ok = True
        return summary
    finally:
        if dist.enabled:
            gdist.shutdown(wait=ok)


def _execute(
    config: Config,
    host: PluginHost,
    *,
    resume_dir: Path | None,
    argv: list[str] | None,
    on_prepared: Callable[[Run], None] | None,
    device: torch.device,
    dist: gdist.DistInfo,
) -> dict[str, Any]:
    run, checkpoint = prepare(config, host, resume_dir=resume_dir, argv=argv, device=device,
                              dist=dist)
    if on_prepared is not None and dist.is_main:
        on_prepared(run)
    registry = host.registry
    if dist.is_main:
        run.observers = [make_observer(require_observer(registry, n), run, config.observer)
                         for n in config.run.observers]
    algo = require_algorithm(registry, config.run.algo)
    status = "completed"
    with stop_on_signals(run):
        try:
            torch.manual_seed(seeds.derive(run.seed, seeds.Stream.TRAIN_RNG))
            if checkpoint is not None:  # --resume: the run's trainer, restored
                trainer = load_trainer(checkpoint, host, run=run).trainer
            else:
                trainer = algo.trainer_cls(run.config.algo, run)
                if run.config.run.init_from:  # a curriculum's next stage: weights only
                    init_from_checkpoint(trainer, run.config.run.algo,
                                         Path(run.config.run.init_from))
            # Observers that roll out the policy (gif) find it here.
            run.trainer = trainer
            # Run metadata goes out with the first record, checkpoint or failure, once
            # the trainer has built its env, so the env's facts are part of it.
            trainer.train()
            if run.config.explore.enabled and not run.explored:
                _warn(f"gbx: warning: explore.name={run.config.explore.name} had no effect: "
                      f"{run.config.run.algo} built no training envs with "
                      "make_env(training=True)")
            run_final_checkpoint(run, trainer, run.last_step, run.last_checkpoint_step)
            if run.stop_reason != "signal":
                final_evaluation(run, trainer)
            _write_fingerprint(run, trainer)
        except KeyboardInterrupt:
            status = "interrupted"
            run.stop_signal = signal.SIGINT
        except GbxError:
            raise
        except Exception as exc:
            error = run.fail(exc)
            # Observers close their files in on_run_end, so they get it after a failure too.
            failed = run.summary("failed")
            run.write_summary(failed)
            run._emit("on_run_end", failed)
            raise error from exc
    if run._stop_reason == "signal" and status == "completed":
        status = "stopped"
    run._ensure_started()
    summary = run.summary(status)
    run.write_summary(summary)
    run._emit("on_run_end", summary)
    return summary


def make_observer(spec: ObserverSpec, run: Any, sections: Mapping[str, Any]) -> Any:
    """Build one observer for ``run``; one that declares a config class gets its section of
    ``sections`` (a config's ``observer`` table; the class defaults when it has none)."""
    if spec.config_cls is None:
        return spec.factory(run)
    options = sections.get(spec.name)
    return spec.factory(run, options if options is not None else spec.config_cls())


def final_evaluation(run: Run, trainer: Any) -> None:
    """Evaluate the trained policy once more and record it, unless the trainer just did.

    Every observer gets the result through ``on_eval`` (the gif observer draws a rollout
    of the policy), so a run leaves an evaluation behind at any eval cadence.
    """
    episodes = run.config.run.final_eval_episodes
    if not episodes or run.last_eval_step == run.last_step:
        return
    summary = call_evaluate(trainer, episodes, greedy=True, baseline=True)
    run.record_eval({**summary, "step": run.last_step, "env_steps": run.last_step,
                     "final": True})


def call_evaluate(trainer: Any, episodes: int, *, greedy: bool, baseline: bool) -> dict[str, Any]:
    """``trainer.evaluate`` (gbx.api.Trainer) as a plain dict."""
    return dict(trainer.evaluate(episodes, greedy=greedy, baseline=baseline))


def run_outputs(run_dir: Path, registry: Registry, observers: Iterable[str]) -> dict[str, Path]:
    """Where a finished run's files are (those present): what its observers declare they
    write (log, plot...), then its config, newest checkpoint and failure bundles."""
    found: dict[str, Path] = {}
    candidates = {
        label: run_dir / rel
        for name in observers if name in registry.observers
        for label, rel in registry.observers[name].outputs.items()
    }
    candidates["config"] = run_dir / "config.json"
    for label, path in candidates.items():
        if path.exists():
            found[label] = path
    try:
        found["checkpoint"] = latest_checkpoint(run_dir)
    except FileNotFoundError:
        pass
    failures = run_dir / "failures"
    if failures.is_dir() and any(failures.iterdir()):
        found["failures"] = failures
    return found


def evaluate_checkpoint(
    path: Path, host: PluginHost, *, episodes: int, greedy: bool, device: str | None = None,
    baseline: bool = True,
) -> dict[str, Any]:
    """Rebuild the trainer of a run or checkpoint (:func:`gbx.saved.load_trainer`) and run
    its ``evaluate``.

    ``baseline=False`` asks the trainer to skip the random-policy baseline (it plays its
    episodes to the time limit, the slow part on a GPU); a trainer whose ``evaluate`` takes
    no ``baseline`` argument evaluates as it always does."""
    try:
        loaded = load_trainer(Path(path), host, device=device)
    except FileNotFoundError as exc:
        raise GbxError(f"{exc}; pass a run directory or a checkpoint file") from exc
    summary = call_evaluate(loaded.trainer, episodes, greedy=greedy, baseline=baseline)
    summary.setdefault("checkpoint", str(loaded.checkpoint.path))
    summary.setdefault("step", loaded.checkpoint.step)
    return {k: _cpu_value(v) for k, v in summary.items()}
