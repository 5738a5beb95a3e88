"""The gbx plugin contract.

Every extension point of gbx is one hook below. A plugin is a module (or
object) with functions of the same names decorated with ``gbx.hookimpl`` and
published under the ``gbx`` entry-point group::

    [project.entry-points.gbx]
    my_plugin = "my_package.plugin"

Each ``register_*`` hook receives a ``register`` callable bound to the calling
plugin, so gbx always knows which distribution provided which name and can
report clashes between two plugins by name.

Objects registered here follow the protocols in :mod:`gbx.api` (env, trainer,
observer, artifact writer). This module only states *what* can be plugged in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # imports for annotations only: the contract loads nothing heavy
    import click

    from gbx.registry import (
        AlgorithmRegistrar,
        BenchmarkRegistrar,
        EnvRegistrar,
        FuzzTargetRegistrar,
        ModelRegistrar,
        ObserverRegistrar,
        WriterRegistrar,
    )

hookspec = pluggy.HookspecMarker("gbx")


@hookspec
def register_envs(register: EnvRegistrar) -> None:
    """Register named environment backends.

    Call ``register(name, factory, config_cls, description=...)`` once per env.
    ``config_cls`` is a frozen attrs class whose fields (with defaults and
    ``metadata={"help": ...}``) form the ``env.*`` config section.
    ``factory(config, num_envs, device, seed)`` returns an object implementing
    :class:`gbx.api.Env`: batched ``reset``/``step`` on torch tensors that
    stay on ``device``.
    """


@hookspec
def register_algorithms(register: AlgorithmRegistrar) -> None:
    """Register named training algorithms.

    Call ``register(name, trainer_cls, config_cls, description=...)``.
    ``trainer_cls`` implements :class:`gbx.api.Trainer`: built from its config
    and a :class:`gbx.api.RunContext`, it trains (``train``), evaluates
    (``evaluate``) and saves/restores its whole state (``state_dict`` /
    ``load_state_dict``) so a killed run resumes exactly.
    """


@hookspec
def register_models(register: ModelRegistrar) -> None:
    """Register named policy/value network builders usable by algorithms.

    Call ``register(name, builder, description=...)``; ``builder(obs_shape,
    num_actions, **options)`` returns a ``torch.nn.Module``. Algorithms look
    models up by the name given in their config (e.g. ``algo.model=impala``).
    """


@hookspec
def register_observers(register: ObserverRegistrar) -> None:
    """Register named run observers (selected with ``--observer a,b``).

    Call ``register(name, factory, description=...)``; ``factory(run)`` gets
    the :class:`gbx.api.RunInfo` and returns an object implementing
    :class:`gbx.api.Observer`. An observer with options passes an attrs config class,
    ``register(name, factory, config_cls, description=...)``: it is the config section
    ``observer.<name>``, and the factory is called ``factory(run, options)`` with the
    resolved instance. Run events reach every selected observer in
    order: ``on_run_start`` (metadata), ``on_record`` (one metrics record per
    update), ``on_eval``, ``on_checkpoint``, ``on_failure``, ``on_run_end``.
    ``default=True`` makes it one of the observers of a run that names none;
    ``outputs={label: path}`` declares the files it writes (relative to the run
    directory), which ``gbx run`` names when it ends.
    """


@hookspec
def register_artifact_writers(register: WriterRegistrar) -> None:
    """Register writers for run artifacts.

    Call ``register(kind, writer, description=...)`` where ``kind`` is one of
    ``"meta"``, ``"checkpoint"``, ``"failure"``, ``"media"``. A writer is a
    callable ``writer(run_dir, payload) -> pathlib.Path`` that persists the
    payload atomically (write to a temporary file, then rename) and returns
    the path it wrote. Several writers may serve one kind; all are called.

    Payloads the core hands over (see :mod:`gbx.artifacts` for the built-ins):

    * ``meta``: ``{"meta": {...}, "config": {...}}`` at run start;
    * ``checkpoint``: ``{"format", "step", "run_id", "config", "state"}``;
    * ``failure``: ``{"trace_id", "run_id", "step", "error", "message",
      "traceback", "config", "records", "repro"}``;
    * ``media``: whatever the producer passes to ``Run.write_artifact("media", ...)``.
    """


@hookspec
def register_benchmarks(register: BenchmarkRegistrar) -> None:
    """Register named benchmarks run by ``gbx bench NAME``.

    Call ``register(name, command)`` with a ``click.Command``; it becomes
    ``gbx bench NAME`` and must print one JSON record per measurement.
    """


@hookspec
def register_fuzz_targets(register: FuzzTargetRegistrar) -> None:
    """Register named input generators for ``gbx fuzz`` (the robustness campaign).

    Call ``register(name, target, description=...)``. ``target(rng, workdir)`` takes a
    ``random.Random`` and an empty ``pathlib.Path`` folder it may write into, generates
    ONE input from ``rng`` (a file, a config value...) and feeds it to the real code
    that reads such inputs. Its outcome is judged by how it ends:

    * returns normally: the input was accepted and ran;
    * raises :class:`gbx.errors.GbxError`: a clean refusal (the one-line error a user
      would see);
    * raises anything else: a traceback, i.e. a bug to fix;
    * the process dies (segfault, abort, a hang past the time limit): a crash.

    The same ``rng`` state must give the same input, so ``gbx fuzz --seed S --start I
    --inputs 1`` replays input ``I``. Targets run in-process, thousands per second
    where they can, so keep them free of slow setup per input.
    """


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add top-level subcommands to the ``gbx`` CLI (``gbx <command>``).

    Use ``cli.add_command(...)`` or ``@cli.command()``/``@cli.group()``.
    """
