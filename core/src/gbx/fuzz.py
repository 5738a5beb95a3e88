"""``gbx fuzz``: the robustness campaign over every registered fuzz target.

A target (hook ``register_fuzz_targets``, contract in :mod:`gbx.hookspecs`) turns a
``random.Random`` into one input and feeds it to the code that reads such inputs. The
campaign runs the inputs of a target in chunks, each chunk in a child process that
calls the target in-process input after input and reports one JSON line per input;
when a child dies (a segfault, an abort, a hang past ``--timeout``) the parent counts
the input it was on as a crash and starts a new child after it, so the campaign goes on.

Input ``i`` of target ``NAME`` under ``--seed S`` always draws from
``random.Random(f"{S}:{NAME}:{i}")``: ``gbx fuzz --target NAME --seed S --start i
--inputs 1`` replays it.

This module also holds the core's own target, ``config-values``: random ``--set``
values for every field of every registered config class, through the real config
resolution (:func:`gbx.config.build_config`).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import click

from gbx import fuzz_core_targets, hookimpl
from gbx.errors import GbxError
from gbx.registry import register_target_table

OUTCOMES = ("ran", "clean_errors", "tracebacks", "crashes")
DEFAULT_CHUNK = 2000
DEFAULT_TIMEOUT_S = 60.0

Target = Callable[[random.Random, Path], None]


# ---------------------------------------------------------------------------
# One input, in this process
# ---------------------------------------------------------------------------


def input_rng(seed: int, name: str, index: int) -> random.Random:
    """The random stream of input ``index`` of target ``name`` in campaign ``seed``."""
    return random.Random(f"{seed}:{name}:{index}")


def run_one(target: Target, rng: random.Random, workdir: Path) -> tuple[str, str | None]:
    """Run one input; return its outcome (``ran``, ``clean_errors``, ``tracebacks``) and,
    for a traceback, its text."""
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        target(rng, workdir)
    except GbxError:
        return "clean_errors", None
    except Exception:  # noqa: BLE001 - an uncaught exception is what the campaign counts
        return "tracebacks", traceback.format_exc()
    finally:
        # The next input gets the folder empty; emptied only when used (rmdir is slow).
        for entry in list(workdir.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    return "ran", None


def traceback_kind(text: str) -> str:
    """``ExcType at file:line`` of a traceback's innermost frame: one key per bug."""
    lines = text.strip().splitlines()
    exc = lines[-1].split(":", 1)[0] if lines else "?"
    frames = [ln.strip() for ln in lines if ln.strip().startswith("File ")]
    where = frames[-1].split(", in ")[0] if frames else "?"
    return f"{exc} at {where.removeprefix('File ')}"


def _worker(name: str, seed: int, start: int, count: int, workdir: Path) -> None:
    """Child process: run inputs ``start .. start + count - 1``, one JSON line each."""
    from gbx.plugins import get_host

    target = get_host().registry.fuzz_targets[name].target
    out = sys.stdout
    for i in range(start, start + count):
        print(json.dumps({"i": i, "start": True}), file=out, flush=True)
        outcome, tb = run_one(target, input_rng(seed, name, i), workdir)
        print(json.dumps({"i": i, "outcome": outcome, "traceback": tb}), file=out, flush=True)


# ---------------------------------------------------------------------------
# The campaign (parent process)
# ---------------------------------------------------------------------------


@attrs.define
class TargetSummary:
    """What a target's inputs did."""

    inputs: int = 0
    ran: int = 0
    clean_errors: int = 0
    tracebacks: int = 0
    crashes: int = 0
    seconds: float = 0.0
    first: dict[str, dict[str, Any]] = attrs.field(factory=dict)  # kind -> first example

    def add(self, index: int, outcome: str, detail: str | None) -> None:
        self.inputs += 1
        setattr(self, outcome, getattr(self, outcome) + 1)
        if detail is not None:
            kind = traceback_kind(detail) if outcome == "tracebacks" else detail.splitlines()[0]
            self.first.setdefault(kind, {"input": index, "outcome": outcome, "text": detail})

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs, "clean_errors": self.clean_errors, "ran": self.ran,
            "tracebacks": self.tracebacks, "crashes": self.crashes,
            "seconds": round(self.seconds, 1),
            "first_of_each_kind": [{"kind": k, **v} for k, v in self.first.items()],
        }


def _chunk_lines(cmd: list[str], timeout_s: float) -> Iterator[dict[str, Any] | int]:
    """Run one worker; yield its JSON lines, then its exit code (negative: killed).

    The pipe is read in raw blocks (a buffered reader would hold lines the poll cannot
    see); no output for ``timeout_s`` kills the worker and yields ``-9``.
    """
    import os
    import selectors

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    pending = b""
    try:
        while True:
            if not sel.select(timeout_s):  # no output for timeout_s: a hang
                proc.kill()
                proc.wait()
                yield -9
                return
            block = os.read(fd, 1 << 16)
            if not block:
                break
            *lines, pending = (pending + block).split(b"\n")
            for line in lines:
                yield json.loads(line)
    finally:
        sel.close()
        proc.stdout.close()
    yield proc.wait()


def worker_command(name: str, *, seed: int, start: int, count: int, workdir: Path) -> list[str]:
    """The child process that runs inputs ``start .. start + count - 1`` of ``name``."""
    return [sys.executable, "-m", "gbx", "fuzz", "--worker", "--target", name,
            "--seed", str(seed), "--start", str(start), "--inputs", str(count),
            "--workdir", str(workdir)]


def run_target(name: str, *, seed: int, start: int, inputs: int, chunk: int,
               timeout_s: float, workdir: Path) -> TargetSummary:
    """All inputs of one target, in child processes of ``chunk`` inputs each."""
    summary = TargetSummary()
    t0 = time.monotonic()
    nxt, end = start, start + inputs
    while nxt < end:
        count = min(chunk, end - nxt)
        cmd = worker_command(name, seed=seed, start=nxt, count=count, workdir=workdir)
        current: int | None = None
        for item in _chunk_lines(cmd, timeout_s):
            if isinstance(item, int):
                if current is not None:  # died inside an input: a crash
                    how = f"signal {-item}" if item < 0 else f"exit {item}"
                    if item == -9:
                        how += f" (killed: no progress for {timeout_s:g} s)"
                    summary.add(current, "crashes", f"process died with {how}")
                    nxt = current + 1
                elif item != 0:  # died between inputs (e.g. while starting)
                    summary.add(nxt, "crashes", f"worker exited with {item} before input {nxt}")
                    nxt += 1
                break
            if item.get("start"):
                current = int(item["i"])
            else:
                summary.add(int(item["i"]), str(item["outcome"]), item.get("traceback"))
                current = None
                nxt = int(item["i"]) + 1
    summary.seconds = time.monotonic() - t0
    return summary


def campaign(names: list[str], *, seed: int, start: int, inputs: int, chunk: int,
             timeout_s: float) -> dict[str, Any]:
    """Run every named target; return the JSON-ready summary."""
    with tempfile.TemporaryDirectory(prefix="gbx-fuzz-") as tmp:
        per = {n: run_target(n, seed=seed, start=start, inputs=inputs, chunk=chunk,
                             timeout_s=timeout_s, workdir=Path(tmp) / n) for n in names}
    totals = {k: sum(getattr(s, k) for s in per.values()) for k in ("inputs", *OUTCOMES)}
    return {"seed": seed, "start": start, "inputs_per_target": inputs,
            "targets": {n: s.to_dict() for n, s in per.items()}, "totals": totals}


def format_summary(result: dict[str, Any]) -> str:
    """The human-readable table plus the first traceback of each kind."""
    head = f"{'target':<20} {'inputs':>8} {'clean':>8} {'ran':>8} {'tracebacks':>10} " \
           f"{'crashes':>8} {'seconds':>8}"
    lines = [head]
    for name, s in result["targets"].items():
        lines.append(f"{name:<20} {s['inputs']:>8} {s['clean_errors']:>8} {s['ran']:>8} "
                     f"{s['tracebacks']:>10} {s['crashes']:>8} {s['seconds']:>8}")
    t = result["totals"]
    lines.append(f"{'total':<20} {t['inputs']:>8} {t['clean_errors']:>8} {t['ran']:>8} "
                 f"{t['tracebacks']:>10} {t['crashes']:>8}")
    for name, s in result["targets"].items():
        for ex in s["first_of_each_kind"]:
            lines.append(f"\n{name} input {ex['input']} ({ex['outcome']}): {ex['kind']}\n"
                         f"{ex['text']}".rstrip())
    return "\n".join(lines)


@click.command("fuzz")
@click.option("--target", "targets", default="",
              help="comma-separated target names (default: every registered target)")
@click.option("--inputs", type=click.IntRange(min=1), default=1000, show_default=True,
              help="inputs per target")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True,
              help="index of the first input (to replay one: --start I --inputs 1)")
@click.option("--chunk", type=click.IntRange(min=1), default=DEFAULT_CHUNK, show_default=True,
              help="inputs per child process")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1),
              default=DEFAULT_TIMEOUT_S, show_default=True,
              help="seconds without progress after which an input counts as a crash (hang)")
@click.option("--json", "as_json", is_flag=True, help="print the summary as one JSON object")
@click.option("--list", "list_only", is_flag=True, help="list the registered targets and exit")
@click.option("--worker", is_flag=True, hidden=True)
@click.option("--workdir", type=click.Path(path_type=Path), default=None, hidden=True)
def fuzz_cmd(targets: str, inputs: int, seed: int, start: int, chunk: int, timeout_s: float,
             as_json: bool, list_only: bool, worker: bool, workdir: Path | None) -> None:
    """Feed generated inputs to every fuzz target; count clean errors, tracebacks, crashes.

    Exit 0 when no input gave a traceback or a crash, 1 otherwise.
    """
    from gbx.plugins import get_host

    registry = get_host().registry
    if list_only:
        for name, spec in sorted(registry.fuzz_targets.items()):
            click.echo(f"{name}: {spec.description} [{spec.provider.distribution}]")
        return
    names = [n.strip() for n in targets.split(",") if n.strip()] or sorted(registry.fuzz_targets)
    unknown = [n for n in names if n not in registry.fuzz_targets]
    if unknown or not names:
        known = ", ".join(sorted(registry.fuzz_targets)) or "none"
        raise GbxError(f"unknown fuzz target {', '.join(unknown) or '(none given)'}; "
                       f"registered: {known}")
    if worker:
        if len(names) != 1 or workdir is None:
            raise GbxError("--worker runs one --target with a --workdir")
        _worker(names[0], seed, start, inputs, workdir)
        return
    result = campaign(names, seed=seed, start=start, inputs=inputs, chunk=chunk,
                      timeout_s=timeout_s)
    click.echo(json.dumps(result) if as_json else format_summary(result))
    if result["totals"]["tracebacks"] or result["totals"]["crashes"]:
        sys.exit(1)


# ---------------------------------------------------------------------------
# The core's target: config values
# ---------------------------------------------------------------------------

_ODD_TEXT = ("", " ", "nan", "inf", "-inf", "NaN", "1e999", "-1e999", "0x10", "1_000",
             "true", "false", "null", "None", "[]", "{}", "[1, 2", "{a=1", "{a = {b = 1}}",
             "'quoted'", '"x"', "é", "\\", "\x00", "a" * 300, "[[[[[[[[1]]]]]]]]",
             "[" * 200 + "]" * 200, "{x=[1,{y=2}]}", "1.5.2", "--steps", "=", "==1")


def _random_value(rng: random.Random, depth: int = 0) -> str:
    """A random ``--set`` value text: numbers at the edges, odd strings, lists, tables."""
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return str(rng.choice((0, 1, -1, 2, 7, 2**31, -(2**31), 2**63, 10**30, -(10**30))))
    if kind == 1:
        return str(rng.randint(-(10**6), 10**6))
    if kind == 2:
        return repr(rng.choice((0.0, -0.0, 0.5, 1.0, 1.5, -0.5, 1e-300, 1e300,
                                math.nan, math.inf, -math.inf, rng.uniform(-10, 10))))
    if kind == 3:
        return rng.choice(_ODD_TEXT)
    if kind == 4:
        return rng.choice(("true", "false", "cnn", "impala", "cpu", "cuda", "toy", "ppo"))
    if kind == 5:
        alphabet = "abcxyz019_-.=[]{},\"' é\t"
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if kind == 6:
        items = ", ".join(_random_value(rng, depth + 1) for _ in range(rng.randrange(4)))
        return f"[{items}]"
    if kind == 7:
        items = ", ".join(f"{rng.choice('abhc')} = {_random_value(rng, depth + 1)}"
                          for _ in range(rng.randrange(3)))
        return "{" + items + "}"
    return str(rng.choice((3, 16, 64, 1024)))


def fuzz_config_values(rng: random.Random, workdir: Path) -> None:
    """Random ``--set`` overrides of random fields of a random algorithm and env (plus
    the run section and the observers' sections), resolved by
    :func:`gbx.config.build_config` as ``gbx run`` does."""
    from gbx.config import RunConfig, build_config
    from gbx.plugins import get_host

    registry = get_host().registry
    algo = rng.choice(sorted(registry.algorithms))
    env = rng.choice(sorted(registry.envs))
    sections = {
        "run": RunConfig,
        "algo": registry.algorithms[algo].config_cls,
        "env": registry.envs[env].config_cls,
    }
    sections.update({f"observer.{name}": spec.config_cls
                     for name, spec in sorted(registry.observers.items()) if spec.config_cls})
    overrides = []
    for _ in range(rng.randrange(1, 4)):
        section = rng.choice(tuple(sections))
        fields = [f.name for f in attrs.fields(sections[section])]
        field = rng.choice(fields) if rng.random() < 0.95 else rng.choice(("nope", "", "a.b"))
        overrides.append(f"{section}.{field}={_random_value(rng)}")
    if rng.random() < 0.03:
        overrides.append(rng.choice(("algo", "=1", "algo.=1", ".x=1", "run.algo")))
    build_config(registry, flags={"algo": algo, "env": env}, overrides=overrides)


@hookimpl
def register_fuzz_targets(register: Any) -> None:
    register("config-values", fuzz_config_values,
             description="random --set values for every registered config class")
    register_target_table(register, fuzz_core_targets.TARGETS)


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_command(fuzz_cmd)
