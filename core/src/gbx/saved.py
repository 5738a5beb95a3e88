"""Finished, stopped or killed runs: their newest intact checkpoint, and the trainer in it.

:func:`load_trainer` is the one way a trainer is rebuilt from a run: ``gbx eval``,
``gbx gif`` (and any plugin command that replays a policy) and ``gbx run --resume`` all
go through it, so no caller rebuilds a trainer from the run loop's internals.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from gbx.api import WeightInit
from gbx.artifacts import load_latest_good
from gbx.checkpoint_file import CheckpointError, read_file
from gbx.errors import GbxError

if TYPE_CHECKING:
    from gbx.plugins import PluginHost
    from gbx.runner import Run

__all__ = ["LoadedTrainer", "SavedCheckpoint", "init_from_checkpoint", "load_trainer",
           "newest_checkpoint", "restore_trainer"]


def _warn(line: str) -> None:
    print(line, file=sys.stderr)


@attrs.frozen
class SavedCheckpoint:
    """One checkpoint file and its checked payload ``{format, step, run_id, config, state}``."""

    path: Path
    payload: Mapping[str, Any]

    @property
    def step(self) -> int:
        return int(self.payload["step"])

    @property
    def run_dir(self) -> Path:
        """The run directory the file belongs to (``<run_dir>/checkpoints/<file>``)."""
        return self.path.parent.parent

    @property
    def run_id(self) -> str:
        return str(self.payload.get("run_id") or self.run_dir.name)


def newest_checkpoint(source: Path, warn: Callable[[str], None] = _warn) -> SavedCheckpoint:
    """The checkpoint ``source`` names: that file, or a run directory's newest intact one
    (each damaged newer file is named through ``warn`` and skipped).

    Raises FileNotFoundError when there is none, and
    :class:`gbx.checkpoint_file.CheckpointError` (one line) when none loads.
    """
    source = Path(source)
    if source.is_file() and source.name != "latest":
        return SavedCheckpoint(source, read_file(source))
    path, payload = load_latest_good(source, warn)
    return SavedCheckpoint(path, payload)


def restore_trainer(trainer: Any, state: Any, source: str) -> None:
    """``trainer.load_state_dict(state)``, with a state that does not fit as a one-line error.

    A checkpoint's file format is checked on load; whether its state fits the
    trainer (keys, shapes, versions) only the trainer knows.
    """
    try:
        trainer.load_state_dict(state)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise CheckpointError(
            f"{source}: its state does not fit this {type(trainer).__name__} "
            f"({type(exc).__name__}: {first})"
        ) from exc


def init_from_checkpoint(trainer: Any, algo: str, path: Path) -> Path:
    """Load the policy weights of the checkpoint at ``path`` (a run directory, its
    checkpoints/ folder or a file: its newest intact one) into a new ``trainer``
    (:class:`gbx.api.WeightInit`, ``run.init_from``); return the file. Every refusal is
    one line."""
    try:
        saved = newest_checkpoint(Path(path))
    except FileNotFoundError as exc:
        raise GbxError(f"run.init_from: {exc} (name a run directory or a checkpoint file)") \
            from None
    theirs = str(saved.payload.get("config", {}).get("run", {}).get("algo"))
    if theirs != algo:
        raise GbxError(f"run.init_from: {saved.path} is a {theirs} checkpoint and this run "
                       f"trains {algo}: start from a run of the same algorithm")
    if not isinstance(trainer, WeightInit):
        raise GbxError(f"run.init_from: the {algo} trainer cannot start from another run's "
                       "weights (it lacks gbx.api.WeightInit.init_weights); drop --init-from")
    try:
        trainer.init_weights(saved.payload["state"], str(saved.path))
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise CheckpointError(f"run.init_from: the weights of {saved.path} do not fit this "
                              f"run ({type(exc).__name__}: {first})") from exc
    _warn(f"gbx: policy weights from {saved.path} (step {saved.step})")
    return saved.path


@attrs.frozen
class LoadedTrainer:
    """A trainer restored from a checkpoint, the run context it was built with (its
    ``make_env`` builds the run's env) and the checkpoint it came from."""

    trainer: Any
    run: Run
    checkpoint: SavedCheckpoint

    @property
    def config(self) -> Any:
        """The run's resolved config (``gbx.config.Config``)."""
        return self.run.config


def load_trainer(
    source: Path | SavedCheckpoint,
    host: PluginHost,
    *,
    run: Run | None = None,
    device: str | None = None,
    seed: int | None = None,
) -> LoadedTrainer:
    """Build the trainer of a run from its saved config and newest intact checkpoint.

    ``source`` is a run directory, its ``checkpoints/`` folder, a checkpoint file or a
    :class:`SavedCheckpoint` already read. Without ``run``, the trainer gets a run
    context of its own for the checkpoint's config (``device``/``seed`` replace the
    saved ones): no observers, no files written, for evaluation and replays. With
    ``run`` (``gbx run --resume``) it is built in that run, whose config it keeps.
    """
    from gbx.config import from_dict, upgrade_saved
    from gbx.resolve import require_algorithm, resolve_device
    from gbx.runner import Run

    saved = source if isinstance(source, SavedCheckpoint) else newest_checkpoint(Path(source))
    if run is None:
        config = from_dict(upgrade_saved(saved.payload["config"], host.registry),
                           host.registry, observers=False)
        run_config = config.run
        if device is not None:
            run_config = attrs.evolve(run_config, device=device)
        if seed is not None:
            run_config = attrs.evolve(run_config, seed=seed)
        config = attrs.evolve(config, run=run_config)
        run = Run(config, host, run_dir=saved.run_dir, run_id=saved.run_id,
                  device=resolve_device(config.run.device))
        run.mark_started()  # evaluation and replays write no run metadata
    algo = require_algorithm(host.registry, run.config.run.algo)
    trainer = algo.trainer_cls(run.config.algo, run)
    restore_trainer(trainer, saved.payload["state"], str(saved.path))
    return LoadedTrainer(trainer, run, saved)
