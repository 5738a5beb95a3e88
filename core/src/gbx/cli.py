"""The ``gbx`` command line: run, chain, eval, bench, plugins, config, plus plugin commands."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from gbx import __version__
from gbx.errors import GbxError


class GbxGroup(click.Group):
    """A click group that turns :class:`GbxError` into one line and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GbxError as exc:
            click.echo(f"gbx: error: {exc}", err=True)
            ctx.exit(exc.exit_code)


def _host(ctx: click.Context) -> Any:
    return ctx.find_root().obj


# The arguments this process was started with (set by main; sys.argv otherwise).
_ARGV: list[str] | None = None


def torchrun_command(args: list[str], gpus: int) -> list[str]:
    """``python -m torch.distributed.run --nproc-per-node G -m gbx <args without --gpus>``."""
    rest: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--gpus":
            skip = True
        elif not arg.startswith("--gpus="):
            rest.append(arg)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={gpus}", "-m", "gbx", *rest]


def _run_flags(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _config_options(f: Any) -> Any:
    options = [
        click.option("--algo", help="algorithm name (run.algo)"),
        click.option("--env", help="environment name (run.env)"),
        click.option("--observer", "observers", help="observers, comma separated (run.observers)"),
        click.option("--device", help="auto | cpu | cuda | cuda:INDEX (run.device); some "
                     "algorithm defaults depend on it (`gbx config --explain` lists them)"),
        click.option("--seed", type=int, help="random seed (run.seed)"),
        click.option("--steps", type=int, help="total environment steps (run.steps)"),
        click.option("--run-dir", help="run directory (run.run_dir)"),
        click.option("--init-from", "init_from",
                     help="start from the weights of this run directory or checkpoint "
                          "(run.init_from)"),
        click.option("--tag", help="label appended to the run directory name (run.tag)"),
        click.option("--config", "config_file", type=click.Path(dir_okay=False),
                     help="TOML or JSON file with run/env/algo/explore sections"),
        click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
                     help="override one value, e.g. --set algo.lr=3e-4 (repeatable; "
                          "sections run, env, algo, explore)"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _build(host: Any, config_file: str | None, overrides: tuple[str, ...],
           base: dict[str, Any] | None = None, **flags: Any) -> Any:
    from gbx.config import build_config, read_config_file

    data = dict(base or {})
    if config_file:
        data = read_config_file(config_file)
    return build_config(host.registry, base=data, flags=_run_flags(**flags), overrides=overrides)


def _saved_base(host: Any, run_dir: Path) -> dict[str, Any]:
    """A run directory's saved ``config.json``, upgraded to today's keys (what a resume
    builds its config from)."""
    from gbx.config import read_config_file, upgrade_saved

    return upgrade_saved(read_config_file(run_dir / "config.json"), host.registry)


def build_cli(host: Any) -> click.Group:
    """The CLI for a loaded plugin host (plugins add their commands here)."""

    @click.group(cls=GbxGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="gbx")
    @click.pass_context
    def cli(ctx: click.Context) -> None:
        """gbx: GPU-native reinforcement learning on the Game Boy."""
        ctx.obj = host

    @cli.command()
    @_config_options
    @click.option("--resume", type=click.Path(file_okay=False, exists=True),
                  help="continue the run in this directory from its latest checkpoint")
    @click.option("--debug", is_flag=True, default=None,
                  help="check every env output against the env contract (run.debug)")
    @click.option("--gpus", type=click.IntRange(min=1), default=None,
                  help="data-parallel ranks on this machine: relaunch under torchrun with "
                       "one process per GPU (with --device cpu: CPU processes, gloo)")
    @click.pass_context
    def run(ctx: click.Context, config_file: str | None, overrides: tuple[str, ...],
            resume: str | None, gpus: int | None, **flags: Any) -> None:
        """Train an algorithm on an environment.

        Exit status: 0 when the step budget is done, when an evaluation during
        training reached run.stop_at_success (summary.json: "stop_reason": "solved"), or
        when run.max_seconds of wall clock passed ("stop_reason": "time_limit");
        143 (SIGTERM) or 130 (SIGINT) when a signal stopped the run, with its checkpoint
        written (summary.json says "stopped"); 1 when training failed; 2 for bad input.
        """
        import subprocess

        from gbx.distributed import launched_by_torchrun
        from gbx.runner import SOLVED, TIME_LIMIT, execute, run_outputs

        if gpus is not None and gpus > 1 and not launched_by_torchrun():
            args = _ARGV if _ARGV is not None else sys.argv[1:]
            command = torchrun_command(list(args), gpus)
            click.echo(f"gbx: launching {gpus} ranks: {' '.join(command)}", err=True)
            ctx.exit(subprocess.run(command, check=False).returncode)

        base = None
        if resume:
            if config_file:
                raise GbxError("--resume reloads DIR/config.json; drop --config")
            base = _saved_base(_host(ctx), Path(resume))
            flags.pop("run_dir", None)
        config = _build(_host(ctx), config_file, overrides, base=base, **flags)

        def announce(r: Any) -> None:
            verb = "resuming" if resume else "starting"
            click.echo(f"gbx: {verb} run {r.run_id} in {r.run_dir} on {r.device}", err=True)

        summary = execute(config, _host(ctx), resume_dir=Path(resume) if resume else None,
                          argv=["gbx", *sys.argv[1:]], on_prepared=announce)
        if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 speaks for the job
            how = summary["status"]
            if summary.get("stop_reason") == SOLVED:
                how = "solved (an evaluation reached run.stop_at_success)"
            elif summary.get("stop_reason") == TIME_LIMIT:
                how = "completed its time (run.max_seconds)"
            click.echo(f"gbx: run {how} at step {summary['step']} "
                       f"in {summary['wall_time_s']}s: {summary['run_dir']}", err=True)
            outputs = run_outputs(Path(summary["run_dir"]), _host(ctx).registry,
                                  config.run.observers)
            for label, path in outputs.items():
                click.echo(f"gbx:   {label:<10} {path}", err=True)
        # 0 completed; 128 + N when signal N stopped it (143 SIGTERM, 130 SIGINT).
        if summary.get("exit_code"):
            ctx.exit(int(summary["exit_code"]))

    @cli.command()
    @click.argument("configs", nargs=-1, required=True,
                    type=click.Path(exists=True, dir_okay=False))
    @click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), default=None,
                  help="the whole chain's wall clock: the last stage ends by then")
    @click.option("--deadlines", metavar="S1,S2,...",
                  help="the chain's second by which each of the first stages ends, "
                       "e.g. 420,1140")
    @click.option("--seed", type=int, help="random seed of every stage (run.seed)")
    @click.option("--device", help="device of every stage (run.device)")
    @click.option("--observer", "observers",
                  help="observers of every stage, comma separated (run.observers)")
    @click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
                  help="override one value in every stage (repeatable)")
    @click.pass_context
    def chain(ctx: click.Context, configs: tuple[str, ...], max_seconds: float | None,
              deadlines: str | None, overrides: tuple[str, ...], **flags: Any) -> None:
        """Run the stages of a curriculum in order, as one job with one clock.

        Each CONFIG is a stage's config file and names the stage's run.run_dir; a
        stage starts from an earlier one by naming that directory in run.init_from and
        env.start_states. Each stage is an ordinary run (it ends at run.stop_at_success,
        its steps or its time); --max-seconds and --deadlines give each its
        run.max_seconds, the time left on the chain's clock (the sum of its stages'
        wall clocks). Run the same command again after a kill: completed stages are
        skipped, a stopped one resumes from its checkpoint. Prints a JSON summary.

        Exit status: 0 when every stage completed or the chain's time ran out; that of
        the stage a signal stopped (143, 130); 1 when a stage failed; 2 for bad input.
        """
        import attrs

        from gbx.chain import Stage, parse_deadlines, run_chain
        from gbx.config import to_dict
        from gbx.runner import execute

        host = _host(ctx)
        stages = [Stage(path, _build(host, path, overrides, **flags)) for path in configs]

        def saved_config(run_dir: Path) -> Any:
            return _build(host, None, (), base=_saved_base(host, run_dir))

        def with_limit(config: Any, seconds: float | None) -> Any:
            return attrs.evolve(config, run=attrs.evolve(config.run, max_seconds=seconds or 0.0))

        def run_stage(config: Any, resume_dir: Path | None) -> Any:
            import gc

            import torch

            try:
                return execute(config, host, resume_dir=resume_dir,
                               argv=["gbx", *sys.argv[1:]])
            finally:
                # the stage's envs and model go before the next stage takes the device
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()

        report = run_chain(stages, execute=run_stage, saved_config=saved_config,
                           to_dict=to_dict, with_limit=with_limit,
                           deadlines=parse_deadlines(deadlines, len(stages)),
                           max_seconds=max_seconds, say=lambda line: click.echo(line, err=True))
        click.echo(json.dumps(report))
        if report["exit_code"]:
            ctx.exit(int(report["exit_code"]))

    @cli.command(name="eval")
    @click.option("--checkpoint", required=True, type=click.Path(exists=True),
                  help="checkpoint file, checkpoints/ folder or run directory")
    @click.option("--episodes", type=click.IntRange(min=1), default=10, show_default=True,
                  help="episodes, played at once as one batch of envs (up to 1024 per "
                       "round) from the task's real start state")
    @click.option("--greedy/--sample", default=True, show_default=True,
                  help="take the most likely action, or sample from the policy")
    @click.option("--device", help="override the device the run's config names (run.device)")
    @click.option("--baseline/--no-baseline", default=True, show_default=True,
                  help="also play the same episodes with a random policy (random_* keys)")
    @click.option("--quiet", is_flag=True,
                  help="no progress and no summary table on stderr (the JSON stays)")
    @click.pass_context
    def eval_cmd(ctx: click.Context, checkpoint: str, episodes: int, greedy: bool,
                 device: str | None, baseline: bool, quiet: bool) -> None:
        """Evaluate a checkpoint; print a JSON summary (stdout) and a table (stderr)."""
        from gbx.eval_report import print_summary
        from gbx.progress import progress
        from gbx.runner import evaluate_checkpoint

        what = f"evaluating {episodes} episodes" + (" (+ random baseline)" if baseline else "")
        try:
            with progress(what, quiet=quiet):
                summary = evaluate_checkpoint(Path(checkpoint), _host(ctx), episodes=episodes,
                                              greedy=greedy, device=device, baseline=baseline)
        except (FileNotFoundError, ValueError) as exc:
            raise GbxError(str(exc)) from exc
        click.echo(json.dumps(summary, default=str))
        if not quiet:
            print_summary(summary)

    @cli.group(cls=GbxGroup)
    def checkpoint() -> None:
        """Checkpoint files: convert the earlier format."""

    @checkpoint.command(name="migrate")
    @click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
    @click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
                  help="write the converted checkpoint here (default: replace FILE)")
    @click.option("--yes", is_flag=True, help="do not ask for confirmation (scripts)")
    def migrate(file: Path, out: Path | None, yes: bool) -> None:
        """Convert a checkpoint of the earlier format (a pickle) to the safe format.

        Reading the earlier format unpickles FILE, which runs any code it holds:
        migrate only files from a source you trust.
        """
        from gbx.checkpoint_file import migrate_file

        click.echo(f"gbx: migrating unpickles {file}, which runs any code it holds; "
                   "do it only for a file from a source you trust", err=True)
        try:
            confirmed = yes or click.confirm("unpickle it?", default=False, err=True)
        except click.Abort:  # no terminal to ask on
            confirmed = False
        if not confirmed:
            raise GbxError(f"{file} not migrated (pass --yes to confirm without a prompt)")
        dest = migrate_file(file, out or file)
        click.echo(str(dest))

    @cli.group(cls=GbxGroup)
    @click.option("--quiet", is_flag=True, help="no progress spinner on stderr")
    @click.pass_context
    def bench(ctx: click.Context, quiet: bool) -> None:
        """Benchmarks registered by plugins (each prints JSON records on stdout)."""
        from gbx.progress import progress

        if ctx.invoked_subcommand:  # a spinner with the elapsed time until the bench ends
            ctx.with_resource(progress(f"gbx bench {ctx.invoked_subcommand}", quiet=quiet))

    for spec in sorted(host.registry.benchmarks.values(), key=lambda s: s.name):
        bench.add_command(spec.command, spec.name)

    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="machine-readable output")
    @click.pass_context
    def plugins(ctx: click.Context, as_json: bool) -> None:
        """List installed plugins and what each provides."""
        from gbx.plugin_report import print_table, report

        data = report(_host(ctx))
        if as_json:
            click.echo(json.dumps(data, indent=2))
        else:
            print_table(data)

    @cli.command(name="config")
    @_config_options
    @click.option("--format", "fmt", type=click.Choice(["toml", "json"]), default="toml",
                  show_default=True)
    @click.option("--explain", is_flag=True, help="list every field with its default and help")
    @click.pass_context
    def config_cmd(ctx: click.Context, config_file: str | None, overrides: tuple[str, ...],
                   fmt: str, explain: bool, **flags: Any) -> None:
        """Print the resolved configuration (a starting point for --config files)."""
        from gbx.config import ExploreConfig, dumps_json, dumps_toml, field_docs

        config = _build(_host(ctx), config_file, overrides, **flags)
        if explain:
            sections: list[tuple[str, Any]] = [(s, type(getattr(config, s)))
                                               for s in ("run", "env", "algo")]
            sections.append(("explore", ExploreConfig))
            if config.explore.settings is not None:
                sections.append(("explore", type(config.explore.settings)))
            # Every installed observer's options, selected or not: this is where they are found.
            sections += [(f"observer.{name}", spec.config_cls)
                         for name, spec in sorted(_host(ctx).registry.observers.items())
                         if spec.config_cls is not None]
            for section, cls in sections:
                for name, tp, default, help_text in field_docs(cls):
                    if cls is ExploreConfig and name == "settings":
                        continue  # the selected explorer's fields follow, flat
                    click.echo(f"{section}.{name} ({tp}, default {default!r}): {help_text}")
            return
        click.echo(dumps_json(config) if fmt == "json" else dumps_toml(config), nl=False)

    host.add_commands(cli)
    return cli


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: load plugins, build the CLI, run it."""
    from gbx.plugins import get_host

    global _ARGV
    _ARGV = list(argv) if argv is not None else sys.argv[1:]
    try:
        host = get_host()
        cli = build_cli(host)
    except GbxError as exc:
        click.echo(f"gbx: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    cli.main(args=argv, prog_name="gbx")
