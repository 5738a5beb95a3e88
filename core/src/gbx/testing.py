"""Helpers for plugin authors' tests.

* ``check_env(env)`` drives any env through resets and random steps and
  checks every output against the :class:`gbx.api.Env` contract, including
  autoreset::

      from gbx.testing import check_env

      def test_my_env_follows_the_contract():
          check_env(make_my_env(MyConfig(), num_envs=4, device="cpu", seed=0))

* :class:`InMemoryRunContext` is the one run-context stand-in of the tests: it runs a
  trainer on the toy env (or any env factory) without the run loop and keeps its
  records, evals, checkpoints and env seeds, and serves observers as their run handle;
  :func:`roundtrip` and
  :func:`comparable` help compare a resumed run with an uninterrupted one,
  and :func:`train_and_resume` produces the two;
* :func:`count_host_reads` proves a hot loop reads nothing back from the
  device;
* :func:`check_sigkill_resume` kills a ``gbx run`` at a random moment after a
  checkpoint, resumes it and compares its logged records and its final
  checkpoint (weights, optimiser, env state) with an uninterrupted run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch

from gbx.envcheck import EnvContractError, check_reset_output, check_step_output
from gbx.registry import ObserverSpec
from gbx.toy import ToyConfig, make_toy_env


def check_env(env: Any, *, steps: int = 64, seed: int = 0) -> dict[str, int]:
    """Check ``env`` over ``steps`` random steps; return counts of done/trunc seen.

    Raises :class:`gbx.envcheck.EnvContractError` on the first violation.
    """
    for attr in ("num_envs", "num_actions", "obs_shape", "device"):
        if not hasattr(env, attr):
            raise EnvContractError(f"env has no attribute {attr!r}")
    if not isinstance(env.num_actions, int) or env.num_actions < 1:
        raise EnvContractError(f"num_actions must be a positive int, got {env.num_actions!r}")
    device = torch.device(env.device)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    obs = env.reset()
    check_reset_output(env, obs)
    counts = {"done": 0, "trunc": 0}
    for _ in range(steps):
        actions = torch.randint(0, env.num_actions, (env.num_envs,), generator=gen).to(device)
        out = env.step(actions)
        check_step_output(env, out)
        counts["done"] += int(out[2].sum())
        counts["trunc"] += int(out[3].sum())
        if "final_obs" in out[4]:
            # Envs that did not finish must not report a different final observation.
            keep = ~out[4]["reset_mask"]
            if bool(keep.any()) and not torch.equal(out[4]["final_obs"][keep], out[0][keep]):
                raise EnvContractError("info['final_obs'] differs from obs for a running env")
    env.close()
    return counts


# ---------------------------------------------------------------------------
# Driving a trainer without the run loop
# ---------------------------------------------------------------------------


@attrs.frozen
class _RunSection:
    steps: int
    eval_every: int = 0
    checkpoint_every: int = 0
    eval_episodes: int = 8
    eval_greedy: bool = True
    eval_baseline: bool = False


@attrs.frozen
class _RunConfig:
    run: _RunSection
    env: Any
    algo: Any


def roundtrip(state: Mapping[str, Any]) -> dict[str, Any]:
    """Serialise ``state`` and load it back, as a checkpoint file does.

    A trainer's state holds live tensors; a test that keeps the dict itself
    would see later in-place updates, which a real checkpoint never does.
    """
    from gbx import checkpoint_file

    raw = checkpoint_file.dumps({"state": dict(state), "config": {}})
    loaded: dict[str, Any] = checkpoint_file.loads(raw)["state"]
    return loaded


EnvFactory = Callable[[int, int], Any]  # (num_envs, seed) -> env


class InMemoryRunContext:
    """A :class:`gbx.api.RunContext` in memory, on the built-in toy env: the one stand-in
    for the run loop in tests (trainers', and observers' as their run handle).

    Keeps every record, eval record and checkpoint (serialised and loaded
    back, see :func:`roundtrip`) so a test can drive a trainer directly::

        ctx = InMemoryRunContext(MyConfig(), steps=4096, checkpoint_every=1024)
        ctx.run(MyTrainer(MyConfig(), ctx))
        assert ctx.records[-1]["env_steps"] == 4096

    ``eval_every``/``checkpoint_every`` (env steps) are the run's schedule, which
    :meth:`record` follows as the core run loop does (:class:`gbx.schedule.Schedule`)
    once :meth:`run` has bound the trainer; :meth:`run` also writes the final
    checkpoint. ``stop_after_records`` makes :meth:`should_stop` return True once
    that many train records arrived (a stop request between updates).
    ``env_factory(num_envs, seed)`` builds another env than the toy one (e.g. a
    wrapper around it, or a test env); ``env_seeds`` lists the seed of every env built.
    ``trainer`` is None until :meth:`run` binds one or a test sets it (observers that
    roll out the policy read ``run.trainer.act``, as in a real run).
    ``wrap_training(env)`` wraps the training envs as a configured explorer would.
    """

    def __init__(
        self,
        algo_config: Any = None,
        *,
        steps: int = 10_000,
        seed: int = 0,
        env_config: ToyConfig | None = None,
        env_factory: EnvFactory | None = None,
        device: str = "cpu",
        run_dir: Path | None = None,
        run_id: str = "test",
        stop_after_records: int | None = None,
        wrap_training: Callable[[Any], Any] | None = None,
        eval_every: int = 0,
        checkpoint_every: int = 0,
        eval_episodes: int = 8,
    ) -> None:
        from gbx.schedule import Schedule

        self.run_id = run_id
        # What the run loop's explorer does: wrap the training envs (make_env(training=True)).
        self.wrap_training = wrap_training
        self.run_dir = run_dir or Path(".")
        self.device = torch.device(device)
        self.seed = seed
        self.env_config = env_config or ToyConfig()
        self.env_factory = env_factory
        run = _RunSection(steps, eval_every, checkpoint_every, eval_episodes)
        self.config = _RunConfig(run, self.env_config, algo_config)
        self.records: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self.checkpoints: list[tuple[int, dict[str, Any]]] = []
        self.env_seeds: list[int] = []
        self.stop_after_records = stop_after_records
        self.made_envs: list[tuple[int, bool]] = []  # (num_envs, training) per make_env
        self.schedule = Schedule.of(run)
        self.trainer: Any = None
        self.last_step = 0

    def run(self, trainer: Any, *, resume_step: int | None = None) -> Any:
        """Bind ``trainer`` (the schedule reaches it), train it, write the final
        checkpoint as the run loop does; return it. ``resume_step`` is the step of
        the checkpoint it was restored from."""
        from gbx.schedule import run_final_checkpoint

        if resume_step is not None:
            self.last_step = self.schedule.last_step = int(resume_step)
        self.trainer = trainer
        trainer.train()
        last = self.checkpoints[-1][0] if self.checkpoints else None
        if self.records:
            run_final_checkpoint(self, trainer, self.last_step, last)
        return trainer

    def make_env(self, num_envs: int, *, seed_offset: int = 0, training: bool = False) -> Any:
        seed = self.seed + seed_offset
        self.env_seeds.append(seed)
        self.made_envs.append((num_envs, training))
        if self.env_factory is not None:
            env = self.env_factory(num_envs, seed)
        else:
            env = make_toy_env(self.env_config, num_envs, self.device, seed)
        if training and self.wrap_training is not None:
            env = self.wrap_training(env)
        return env

    def record(self, metrics: Mapping[str, Any]) -> None:
        self.records.append(dict(metrics))
        step = metrics.get("step", metrics.get("env_steps"))
        if isinstance(step, int | float):
            self.last_step = max(self.last_step, int(step))
        self.schedule.after_record(self.last_step, self.trainer,
                                   record_eval=self.record_eval, checkpoint=self.checkpoint)

    def record_eval(self, metrics: Mapping[str, Any]) -> None:
        self.evals.append(dict(metrics))

    def checkpoint(self, state: Mapping[str, Any], *, step: int) -> Path:
        self.checkpoints.append((step, roundtrip(state)))
        self.last_step = max(self.last_step, int(step))
        return self.run_dir / f"ckpt-{step}"

    def should_stop(self) -> bool:
        return self.stop_after_records is not None and len(self.records) >= self.stop_after_records


def train_and_resume(
    make_trainer: Callable[[Any, Any], Any],
    algo_config: Any,
    *,
    steps: int,
    seed: int = 0,
    env_config: ToyConfig | None = None,
    env_factory: EnvFactory | None = None,
    checkpoint: int = 0,
    checkpoint_every: int = 0,
    eval_every: int = 0,
) -> tuple[InMemoryRunContext, InMemoryRunContext]:
    """Train to the budget; train again resumed from checkpoint number ``checkpoint``.

    ``checkpoint_every``/``eval_every`` (env steps) are the run's schedule; ``env_factory``
    builds another env than the toy one, as in :class:`InMemoryRunContext`. Returns
    both contexts (uninterrupted, resumed). The global RNGs are perturbed before
    resuming, so the checkpoint must restore them for the resumed records to match
    the uninterrupted run's later ones.
    """
    def context() -> InMemoryRunContext:
        return InMemoryRunContext(algo_config, steps=steps, seed=seed, env_config=env_config,
                                  env_factory=env_factory, checkpoint_every=checkpoint_every,
                                  eval_every=eval_every)

    full = context()
    full.run(make_trainer(algo_config, full))
    step, state = full.checkpoints[checkpoint]
    torch.manual_seed(12345)
    resumed_ctx = context()
    resumed = make_trainer(algo_config, resumed_ctx)
    resumed.load_state_dict(roundtrip(state))
    resumed_ctx.run(resumed, resume_step=step)
    return full, resumed_ctx


# Record fields that differ between two runs of the same computation.
TIMING_KEYS = frozenset({"sps", "ups", "train_sps", "wall_time_s"})


def comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` without its wall-clock fields, for comparing two runs."""
    return {k: v for k, v in record.items() if k not in TIMING_KEYS}


# ---------------------------------------------------------------------------
# Host reads in a hot path
# ---------------------------------------------------------------------------

_HOST_READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__")


@contextmanager
def no_cuda_syncs() -> Iterator[None]:
    """Inside, any operation that makes the host wait for the CUDA device raises
    (``torch.cuda.set_sync_debug_mode("error")``); the device is synchronised first so
    earlier work does not count, and the mode is reset on the way out."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@contextmanager
def count_host_reads(forbid: bool) -> Iterator[list[str]]:
    """Count (or, with ``forbid``, refuse) every Python-level device-to-host tensor read.

    Yields the list of the names of the methods called (``item``, ``tolist``,
    ...). Reads made inside ``torch.optim`` are not counted: optimisers keep
    their step counters on the host, so reading them does not wait for the
    device. On the CPU this is the way to prove a loop has no hidden syncs;
    on CUDA, :func:`no_cuda_syncs` checks the rest.
    """
    calls: list[str] = []
    saved = {n: getattr(torch.Tensor, n) for n in _HOST_READS}
    optim_dir = f"torch{os.sep}optim{os.sep}"

    def wrap(name: str) -> Callable[..., Any]:
        original = saved[name]

        def reader(self: torch.Tensor, *a: Any, **k: Any) -> Any:
            if optim_dir in sys._getframe(1).f_code.co_filename:
                return original(self, *a, **k)
            if forbid:
                raise AssertionError(f"host read Tensor.{name} in the hot path")
            calls.append(name)
            return original(self, *a, **k)

        return reader

    for n in _HOST_READS:
        setattr(torch.Tensor, n, wrap(n))
    try:
        yield calls
    finally:
        for n, f in saved.items():
            setattr(torch.Tensor, n, f)


# ---------------------------------------------------------------------------
# Kill a CLI run, resume it
# ---------------------------------------------------------------------------


def printed_records(stdout: str) -> dict[int, str]:
    """Train records printed by the ``print`` observer, keyed by step, timing fields dropped."""
    out: dict[int, str] = {}
    for line in stdout.splitlines():
        parts = line.split("] ", 1)
        if len(parts) != 2 or not parts[1].startswith("step="):
            continue
        fields = dict(kv.split("=", 1) for kv in parts[1].split(" ") if "=" in kv)
        out[int(fields["step"])] = " ".join(
            f"{k}={v}" for k, v in fields.items() if k not in TIMING_KEYS
        )
    return out


# Fields of a log record that differ between an uninterrupted and a resumed run by
# construction: wall-clock timings, the run id and the per-process record counter.
RESUME_VOLATILE_KEYS = TIMING_KEYS | {"seq", "trace_id", "run_id", "time_s"}


def log_observer() -> ObserverSpec:
    """The installed observer that declares a ``log`` output (the run's JSON-lines log)."""
    from gbx.plugins import get_host

    for spec in get_host().registry.observers.values():
        if "log" in spec.outputs:
            return spec
    raise LookupError("no installed observer declares a 'log' output; install one that does")


def logged_records(run_dir: Path) -> dict[int, dict[str, Any]]:
    """Train records of the run's log (:func:`log_observer`) keyed by env step, wall-clock
    fields dropped; a step logged twice (before a kill and again after the resume) keeps
    its last record."""
    import json

    log = Path(run_dir) / log_observer().outputs["log"]
    out: dict[int, dict[str, Any]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        step = rec.get("env_steps", rec.get("step"))
        if not isinstance(step, int) or "error" in rec or rec.get("kind", "train") != "train":
            continue
        out[step] = {k: v for k, v in rec.items() if k not in RESUME_VOLATILE_KEYS}
    return out


def logged_evals(run_dir: Path) -> dict[int, dict[str, Any]]:
    """Evaluation lines of the run's log (:func:`log_observer`) keyed by env step, like
    :func:`logged_records` (wall-clock fields dropped, the last of a step kept)."""
    import json

    log = Path(run_dir) / log_observer().outputs["log"]
    out: dict[int, dict[str, Any]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line).get("eval")
        if isinstance(rec, dict) and isinstance(rec.get("env_steps"), int):
            out[rec["env_steps"]] = {k: v for k, v in rec.items()
                                     if k not in RESUME_VOLATILE_KEYS}
    return out


def printed_checkpoint_steps(stdout: str) -> list[int]:
    """Steps of the checkpoints the ``print`` observer announced, in order."""
    return [int(line.split(" checkpoint step=", 1)[1].split()[0])
            for line in stdout.splitlines() if " checkpoint step=" in line]


def assert_same_state(a: Any, b: Any, where: str = "state") -> None:
    """``a`` and ``b`` (nested dicts/lists of tensors and plain values) are equal bit for bit."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a.view(torch.uint8) if a.dtype.is_floating_point and a.dim()
                           else a, b.view(torch.uint8) if b.dtype.is_floating_point and b.dim()
                           else b), f"{where} differs"
    elif isinstance(a, Mapping):
        assert isinstance(b, Mapping) and set(a) == set(b), f"{where}: keys differ"
        for k in a:
            assert_same_state(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{where}[{i}]")
    elif hasattr(a, "shape") and hasattr(a, "tobytes"):  # numpy arrays (RNG states)
        assert a.tobytes() == b.tobytes(), f"{where} differs"
    else:
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"


def _without_observer_flag(run_args: Sequence[str]) -> list[str]:
    args, skip = [], False
    for arg in run_args:
        if skip:
            skip = False
            continue
        if arg == "--observer":
            skip = True
            continue
        args.append(arg)
    return args


def check_sigkill_resume(
    run_args: Sequence[str],
    work_dir: Path,
    *,
    plugins: str,
    total_steps: int,
    expected_records: int,
    timeout: float = 300,
    seed: int | None = None,
) -> int:
    """SIGKILL a ``gbx run`` at a random moment after its first checkpoint, resume it, and
    compare with an uninterrupted run; return the step of the checkpoint it resumed from.

    ``run_args`` are the ``gbx run`` arguments (with a checkpoint cadence; any
    ``--observer`` is replaced by ``print`` and the log observer, :func:`log_observer`);
    ``plugins`` is the ``GBX_PLUGINS`` selection (the log observer's plugin is added).
    The kill lands after a random number of output lines and a random delay (``seed``
    picks them; None: fresh), so it may hit an update or a checkpoint write. The
    uninterrupted run must log ``expected_records`` train records over ``total_steps``
    env steps; after ``--resume`` the killed run's log must hold the same records and
    evaluations (wall-clock fields aside), the resumed run must checkpoint at the steps
    the uninterrupted one did after the resumed checkpoint (the run's schedule
    continues), and its final checkpoint must hold the same state, weights and
    optimiser included, bit for bit.
    """
    import random

    from gbx.artifacts import latest_checkpoint, load_checkpoint

    rng = random.Random(seed)
    env = dict(os.environ)
    log = log_observer()
    selected = plugins.split(",")
    selection = ",".join([*selected, log.provider.plugin] if log.provider.plugin not in selected
                         else selected)
    env.update(GBX_PLUGINS=selection, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    gbx = [sys.executable, "-m", "gbx"]
    observers = f"print,{log.name}"
    args = [*_without_observer_flag(run_args), "--observer", observers]
    full_dir, killed_dir = work_dir / "full", work_dir / "killed"
    full = subprocess.run(
        [*gbx, "run", *args, "--run-dir", str(full_dir)],
        capture_output=True, text=True, env=env, timeout=timeout, check=True,
    )
    reference = logged_records(full_dir)
    assert len(reference) == expected_records, full.stdout
    lines = full.stdout.splitlines()
    first_ckpt = next(i for i, line in enumerate(lines) if " checkpoint step=" in line)
    last_record = max(i for i, line in enumerate(lines) if "] step=" in line)
    # Kill after line ``kill_at`` (0-based) plus a delay: at the earliest just after the
    # first checkpoint, at the latest before the run's last record.
    kill_at = rng.randint(first_ckpt, max(first_ckpt, last_record - 1))
    delay = rng.uniform(0.0, 0.2)

    proc = subprocess.Popen(
        [*gbx, "run", *args, "--run-dir", str(killed_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    for i, _line in enumerate(proc.stdout):
        if i >= kill_at or time.monotonic() > deadline:
            break
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.returncode == 0:  # it finished within the delay: nothing was interrupted
        return total_steps
    assert proc.returncode == -signal.SIGKILL, proc.returncode
    ckpt_step = int(load_checkpoint(latest_checkpoint(killed_dir))["step"])
    # (the kill may land after the last checkpoint, while the process shuts down)
    assert 0 < ckpt_step <= total_steps

    resumed_run = subprocess.run(
        [*gbx, "run", "--resume", str(killed_dir), "--observer", observers],
        capture_output=True, text=True, env=env, timeout=timeout, check=True,
    )
    after = logged_records(killed_dir)
    assert set(after) == set(reference)
    for step, rec in reference.items():
        assert after[step] == rec, f"record at step {step} differs after the resume"
    resumed_evals, full_evals = logged_evals(killed_dir), logged_evals(full_dir)
    assert resumed_evals == full_evals, f"evaluations differ: {resumed_evals} vs {full_evals}"
    expected_ckpts = [s for s in printed_checkpoint_steps(full.stdout) if s > ckpt_step]
    assert printed_checkpoint_steps(resumed_run.stdout) == expected_ckpts
    final = load_checkpoint(latest_checkpoint(full_dir))
    resumed = load_checkpoint(latest_checkpoint(killed_dir))
    assert final["step"] == resumed["step"] == max(reference)
    assert_same_state(final["state"], resumed["state"])
    return ckpt_step


def failure_bundle_of_run(
    algo: str,
    run_dir: Path,
    *,
    steps: int,
    overrides: Sequence[str] = (),
    env: str = "toy",
    plugins: str | None = None,
) -> Path:
    """Run ``algo`` (expected to fail) through the real run loop on the CPU; return the
    failure bundle folder it wrote. ``plugins`` is the ``GBX_PLUGINS`` value (default:
    the algorithm's name, the usual entry-point name)."""
    from gbx.config import build_config
    from gbx.errors import RunFailedError
    from gbx.plugins import load_plugins
    from gbx.runner import execute

    host = load_plugins(environ={"GBX_PLUGINS": plugins if plugins is not None else algo})
    config = build_config(
        host.registry,
        flags={"algo": algo, "env": env, "device": "cpu", "steps": steps,
               "run_dir": str(run_dir), "observers": ("print",)},
        overrides=list(overrides),
    )
    try:
        execute(config, host)
    except RunFailedError as exc:
        return Path(run_dir) / "failures" / str(exc.trace_id)
    raise AssertionError(f"the {algo} run finished; a failure was expected")
