"""``gbx log validate|plot`` and ``gbx gif`` commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from gbx.errors import GbxError
from gbx_observers.logfile import validate_log
from gbx_observers.plot import X_AXES, plot_runs


@click.group("log")
def log_group() -> None:
    """Inspect train_log.jsonl files (schema v1)."""


@log_group.command("validate")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def validate_command(file: Path) -> None:
    """Check FILE's schema, counter monotonicity and numbers; print a JSON summary.

    Exits 0 when the log is valid, 1 otherwise.
    """
    summary = validate_log(file)
    click.echo(json.dumps(summary.to_dict()))
    sys.exit(0 if summary.ok else 1)


@log_group.command("plot")
@click.argument("runs", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=Path("train.png"),
    show_default=True, help="PNG file to write",
)
@click.option("--x", "x_axis", type=click.Choice(list(X_AXES)), default="env_steps",
              show_default=True, help="x axis: env steps, or the run's wall clock in seconds")
@click.option("--name", "names", multiple=True,
              help="legend name of each run, in the order of RUNS (repeat once per run)")
def plot_command(runs: tuple[Path, ...], out: Path, x_axis: str, names: tuple[str, ...]) -> None:
    """Draw training curves into one PNG: one run, or several overlaid (one colour each).

    RUNS are train_log.jsonl files or run directories.
    """
    try:
        path = plot_runs(list(runs), out, x=x_axis, names=names)
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(str(path))


@click.command("gif")
@click.option(
    "--checkpoint", "checkpoint", required=True,
    type=click.Path(exists=True, path_type=Path), help="checkpoint file of a run",
)
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="folder for rollout.gif, rollout.jsonl and meta.json")
@click.option("--greedy/--sample", default=True, show_default=True,
              help="most likely action, or sample from the policy")
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--scale", type=click.IntRange(1, 8), default=2, show_default=True,
              help="pixel scale of the GIF")
@click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:INDEX")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the rollout env")
@click.option("--quiet", is_flag=True, help="no progress bar on stderr")
def gif_command(
    checkpoint: Path, out: Path, greedy: bool, steps: int, scale: int, device: str, seed: int,
    quiet: bool,
) -> None:
    """Play one env with a trained policy and write a GIF of it (DMG greens)."""
    from gbx.progress import progress
    from gbx_observers.rollout import record_rollout

    loaded = load_policy(checkpoint, device=device, seed=seed)
    meta: dict[str, Any] = {"checkpoint": str(checkpoint), "seed": seed, **loaded.meta}
    with progress("rollout steps", total=steps, quiet=quiet) as bar:
        paths = record_rollout(
            loaded.make_env(1), loaded.policy, out, steps=steps,
            greedy=greedy, scale=scale, meta=meta, on_step=bar.advance,
        )
    click.echo(json.dumps({k: str(v) for k, v in paths.items()}))


class LoadedPolicy:
    """What ``gbx gif`` needs from a checkpoint: a policy, an env factory and metadata."""

    def __init__(self, policy: Any, make_env: Any, meta: dict[str, Any]) -> None:
        self.policy = policy
        self.make_env = make_env
        self.meta = meta


def load_policy(checkpoint: Path, *, device: str, seed: int) -> LoadedPolicy:
    """The policy of a run or checkpoint, rebuilt by the core's ``gbx.saved.load_trainer``
    (as ``gbx eval`` does) for one rollout."""
    from gbx.plugins import get_host
    from gbx.saved import load_trainer

    root = click.get_current_context(silent=True)
    host = root.find_root().obj if root is not None else None
    if host is None or not hasattr(host, "registry"):
        host = get_host()
    try:
        loaded = load_trainer(checkpoint, host, device=device, seed=seed)
    except FileNotFoundError as exc:
        raise GbxError(str(exc)) from exc
    config = loaded.config
    meta = {"run_id": loaded.run.run_id, "algo": config.run.algo, "env": config.run.env,
            "env_steps": loaded.checkpoint.step,
            "checkpoint_file": str(loaded.checkpoint.path)}
    return LoadedPolicy(loaded.trainer.act, loaded.run.make_env, meta)
