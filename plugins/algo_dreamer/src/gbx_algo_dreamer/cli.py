"""``gbx dreamer ...``: validation scenarios and regression gates of dreamer_v3."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from gbx_algo_dreamer.config import SIZES, UPDATE_ORDERS
from gbx_algo_dreamer.precision import CONV_DTYPES, PRECISIONS


def _device(name: str) -> Any:
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise click.UsageError(f"--device {name}: CUDA is not available here; use --device cpu")
    return torch.device(name)


def _report(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary, indent=1, default=str))
    else:
        for key, value in summary.items():
            if key not in ("checks", "standing_still"):
                click.echo(f"{key}: {value}")
        for name, ok in summary.get("checks", {}).items():
            click.echo(f"  [{'ok' if ok else 'FAIL'}] {name}")
    stopped = f" (stopped by a {summary['stopped_by']})" if summary.get("stopped_by") else ""
    click.echo(f"{summary['scenario']}: {'PASS' if summary['passed'] else 'FAIL'}{stopped}")
    sys.exit(0 if summary["passed"] else 1)


@click.group("dreamer")
def dreamer_group() -> None:
    """DreamerV3 validation scenarios and regression gates."""


@dreamer_group.group("validate")
def validate_group() -> None:
    """Short self-checking runs; each prints a summary and a PASS/FAIL line."""


_common = [
    click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda"),
    click.option("--json", "as_json", is_flag=True, help="print the summary as JSON"),
    click.option("--seed", default=0, show_default=True, type=int),
]


def _with_common(fn: Any) -> Any:
    for opt in reversed(_common):
        fn = opt(fn)
    return fn


@validate_group.command("standing-still")
@_with_common
@click.option("--env", "env_name", default="toy", show_default=True)
@click.option("--size", default="XS", show_default=True, type=click.Choice(list(SIZES)))
@click.option("--steps", default=4096, show_default=True, help="env steps")
def standing_still_cmd(device: str, as_json: bool, seed: int, env_name: str, size: str,
                       steps: int) -> None:
    """Fixed actions, world model only: reconstruction must improve >= 25%."""
    from gbx_algo_dreamer.validate import registry_env_factory, standing_still, tiny_config

    dev = _device(device)
    cfg = tiny_config(size=size, num_envs=16, batch_size=16, batch_length=32,
                      total_env_steps=steps, train_ratio=256.0, learning_starts=512,
                      record_every=16, replay_capacity=16 * 1024, model_lr=1e-4 if size
                      != "tiny" else 1e-3)
    _report(standing_still(dev, registry_env_factory(env_name, dev), cfg, seed), as_json)


@validate_group.command("stage1")
@_with_common
@click.option("--env", "env_name", default="gbx-quest-1", show_default=True)
@click.option("--size", default="S", show_default=True, type=click.Choice(list(SIZES)))
@click.option("--steps", default=100_000, show_default=True, help="env steps")
@click.option("--num-envs", default=64, show_default=True)
@click.option("--train-ratio", default=32.0, show_default=True)
@click.option("--engine", default="sync", show_default=True,
              type=click.Choice(["sync", "overlapped"]), help="algo.engine of the run")
@click.option("--set", "explore_sets", multiple=True, metavar="explore.KEY=VALUE",
              help="the explorer around the training envs, as in gbx run: "
                   "--set explore.name=archive --set explore.bonus=0 (repeatable)")
def stage1_cmd(device: str, as_json: bool, seed: int, env_name: str, size: str, steps: int,
               num_envs: int, train_ratio: float, engine: str,
               explore_sets: tuple[str, ...]) -> None:
    """Full DreamerV3 on the bundled stage: reaches the goal within a short GPU run."""
    from gbx_algo_dreamer.config import DreamerConfig
    from gbx_algo_dreamer.validate import LocalContext, registry_env_factory, stage1

    dev = _device(device)
    try:
        factory = registry_env_factory(env_name, dev)
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None
    cfg = DreamerConfig(size=size, num_envs=num_envs, total_env_steps=steps,
                        train_ratio=train_ratio, replay_capacity=max(num_envs * 2048, steps),
                        record_every=32, engine=engine)
    ctx = LocalContext(factory, dev, seed, wrap_training=_explorer(explore_sets, env_name, seed))
    _report(stage1(dev, factory, cfg, seed, ctx), as_json)


def _explorer(sets: tuple[str, ...], env_name: str, seed: int) -> Any:
    """A wrapper putting the explorer of ``--set explore.*`` around a training env, or None."""
    from gbx import seeds
    from gbx.config import parse_override, structure_explore
    from gbx.errors import GbxError
    from gbx.plugins import get_host
    from gbx.resolve import wrap_explorer

    if not sets:
        return None
    data: dict[str, Any] = {}
    try:
        for text in sets:
            ov = parse_override(text)
            if ov.path[0] != "explore" or len(ov.path) != 2:
                raise GbxError(f"--set {text!r}: validate stage1 takes explore.KEY=VALUE "
                               "only (e.g. explore.name=archive)")
            data[ov.path[1]] = ov.value
        registry = get_host().registry
        explore = structure_explore(data, registry)
    except GbxError as exc:
        raise click.ClickException(str(exc)) from None
    if not explore.enabled:
        return None
    return lambda env: wrap_explorer(registry, explore, env, env_name=env_name,
                                     seed=seeds.derive(seed, seeds.Stream.EXPLORE))


@validate_group.command("cpu-gate")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
@click.option("--regen", is_flag=True, help="rewrite the fixture file from the current math")
def cpu_gate_cmd(as_json: bool, regen: bool) -> None:
    """Daily CPU gate: fixture math, a smoke update and Standing Still (tiny sizes)."""
    import torch

    from gbx_algo_dreamer.fixtures import write_fixtures
    from gbx_algo_dreamer.validate import cpu_gate, registry_env_factory

    if regen:
        click.echo(f"wrote {write_fixtures()}")
    cpu = torch.device("cpu")
    _report(cpu_gate(registry_env_factory("toy", cpu),
                     registry_env_factory("toy", cpu, height=24, width=32)), as_json)


@dreamer_group.group("gate")
def gate_group() -> None:
    """Capture a baseline from a run and compare later runs against it."""


@gate_group.command("capture")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path))
def capture_cmd(run_dir: Path, out: Path) -> None:
    """Write the baseline of RUN_DIR/train_log.jsonl to OUT."""
    from gbx.config import write_json_atomic
    from gbx_algo_dreamer.gate import capture, read_records

    try:
        baseline = capture(read_records(run_dir))
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    write_json_atomic(out, json.dumps(baseline, indent=1) + "\n")
    click.echo(f"baseline with {len(baseline['points'])} points written to {out}")


@gate_group.command("compare")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--baseline", "baseline_path", required=True,
              type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def compare_cmd(run_dir: Path, baseline_path: Path, as_json: bool) -> None:
    """Compare RUN_DIR against a baseline; exit 1 on regression."""
    from gbx_algo_dreamer.gate import compare, read_records

    try:
        result = compare(read_records(run_dir), json.loads(baseline_path.read_text()))
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        for line in result["failures"]:
            click.echo(f"  {line}")
    click.echo(f"gate: {'PASS' if result['passed'] else 'FAIL'} ({result['checked']} checks)")
    sys.exit(0 if result["passed"] else 1)


@click.command("dreamer")
@click.option("--device", default="auto", show_default=True)
@click.option("--env", "env_name", default="toy", show_default=True)
@click.option("--size", default="S", show_default=True, type=click.Choice(list(SIZES)))
@click.option("--num-envs", default=16, show_default=True)
@click.option("--batch-size", default=16, show_default=True)
@click.option("--batch-length", default=64, show_default=True)
@click.option("--repeats", default=10, show_default=True)
@click.option("--engine", default="both", show_default=True,
              type=click.Choice(["sync", "overlapped", "both", "none"]),
              help="training loops to time (algo.engine); both adds the overlapped/sync "
                   "ratio of env steps/s; none skips the loops")
@click.option("--train-ratio", default=32.0, show_default=True,
              help="replayed steps per env step in the timed loops")
@click.option("--overlap-chunk", default=16, show_default=True,
              help="env iterations per chunk of the overlapped engine")
@click.option("--loop-iterations", default=128, show_default=True,
              help="env iterations per timed loop")
@click.option("--compile", "compile_mode", default="auto", show_default=True,
              type=click.Choice(["auto", "eager", "compiled", "both"]),
              help="algo.compile of the timed updates: eager, compiled (CUDA graphs on a "
                   "GPU, torch.compile on the CPU), both (component timings of each and "
                   "compiled_over_eager_updates_per_s; the engine loops run as the first), "
                   "or auto: the device's default (compiled on CUDA, eager on the CPU)")
@click.option("--matmul-precision", default="auto", show_default=True,
              type=click.Choice(["auto", *PRECISIONS]),
              help="algo.matmul_precision of the timed updates and model passes (auto: "
                   "the device's default, TF32 on CUDA)")
@click.option("--fuse-steps/--no-fuse-steps", default=None,
              help="algo.fuse_steps of the compiled updates (CUDA: each loop step, and the "
                   "update's work around the loops, torch.compile programs); unset: the "
                   "device's default (on with CUDA)")
@click.option("--conv-dtype", default="auto", show_default=True,
              type=click.Choice(["auto", *CONV_DTYPES]),
              help="algo.conv_dtype of the timed updates and model passes (auto: the "
                   "device's default, bfloat16 on CUDA)")
@click.option("--cudnn-benchmark/--no-cudnn-benchmark", default=None,
              help="algo.cudnn_benchmark of the timed updates and model passes; unset: the "
                   "device's default (on with CUDA)")
@click.option("--update-order", default="sequential", show_default=True,
              type=click.Choice(list(UPDATE_ORDERS)),
              help="algo.update_order of the timed updates (concurrent: the actor-critic "
                   "on a second CUDA stream beside the world model's backward)")
@click.option("--update-graph/--no-update-graph", default=None,
              help="algo.update_graph of the compiled updates (CUDA: the whole update as "
                   "one CUDA graph); unset: the device's default (on with CUDA, off with "
                   "--update-order concurrent)")
@click.option("--profile", default=0, show_default=True, type=click.IntRange(min=0),
              help="after the timings, profile this many updates and add an "
                   "update_profile record: GPU kernels per update, their busy time and the "
                   "top 25 by time (on the CPU: operators by their own CPU time)")
def bench_cmd(device: str, env_name: str, size: str, num_envs: int, batch_size: int,
              batch_length: int, repeats: int, engine: str, train_ratio: float,
              overlap_chunk: int, loop_iterations: int, compile_mode: str,
              matmul_precision: str, fuse_steps: bool | None, conv_dtype: str,
              cudnn_benchmark: bool | None, update_order: str, update_graph: bool | None,
              profile: int) -> None:
    """Time dreamer_v3: env steps, replay sampling, model fwd/bwd, whole updates (eager
    and/or compiled), and the training loop of the sync and overlapped engines."""
    from gbx_algo_dreamer.bench import print_records, run_compile_variants, run_engines
    from gbx_algo_dreamer.config import DreamerConfig

    dev = _device(device)
    if compile_mode == "auto":
        compile_mode = "compiled" if DreamerConfig().for_device(dev).compile else "eager"
    if fuse_steps and compile_mode == "eager":
        raise click.BadParameter("it fuses the steps of the compiled updates: add --compile "
                                 "compiled (or both)", param_hint="--fuse-steps")
    if update_graph and compile_mode == "eager":
        raise click.BadParameter("it captures the compiled update: add --compile compiled "
                                 "(or both)", param_hint="--update-graph")
    compiled = compile_mode == "compiled"
    cfg = DreamerConfig(size=size, num_envs=num_envs, batch_size=batch_size,
                        batch_length=batch_length, replay_capacity=num_envs * 4096,
                        learning_starts=num_envs * batch_length,
                        train_ratio=train_ratio, overlap_chunk=overlap_chunk,
                        compile=compiled, fuse_steps=fuse_steps if compiled else False,
                        matmul_precision=matmul_precision, conv_dtype=conv_dtype,
                        cudnn_benchmark=cudnn_benchmark, update_order=update_order,
                        update_graph=update_graph if compiled else False)
    variants = {"eager": [False], "compiled": [True], "both": [False, True]}[compile_mode]
    print_records(run_compile_variants(dev, env_name, cfg, repeats, variants, fuse_steps,
                                       profile))
    engines = {"both": ["sync", "overlapped"], "none": []}.get(engine, [engine])
    print_records(run_engines(dev, env_name, cfg, engines, loop_iterations))
