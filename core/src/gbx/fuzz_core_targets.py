"""Fuzz targets of the core: checkpoint files, plugin registration and config files.

Each target is ``target(rng, workdir) -> None`` and runs ONE generated input: it
returns when the input was accepted and handled, raises :class:`gbx.errors.GbxError`
for a clean refusal, and anything else is a bug (a traceback a user would see).
:data:`TARGETS` lists them by name.
"""

from __future__ import annotations

import io
import json
import math
import random
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import torch

from gbx import checkpoint_file, hookimpl

Target = Callable[[random.Random, Path], None]

# ---------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.randint(-(2**40), 2**40)
    if kind == 1:
        return rng.choice([0.5, -1e300, math.nan, math.inf, rng.random()])
    if kind == 2:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(8)))
    if kind == 3:
        shape = [rng.randrange(4) for _ in range(rng.randrange(3))]
        dtype = rng.choice([torch.float32, torch.int64, torch.uint8, torch.bool])
        return torch.zeros(shape, dtype=dtype)
    if kind == 4:
        return rng.choice([None, True, b"\x00\xff"])
    if kind == 5:
        return torch.Size([rng.randrange(5)])
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7:
        return tuple(_random_value(rng, depth + 1) for _ in range(rng.randrange(4)))
    return {f"k{i}": _random_value(rng, depth + 1) for i in range(rng.randrange(4))}


class _Marker:
    """Unpickling it would create a file: proof that a checkpoint ran code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def _checkpoint_bytes(rng: random.Random, marker: Path) -> bytes:
    payload = {"format": checkpoint_file.FORMAT_VERSION, "step": rng.randrange(10**6),
               "run_id": "fuzz", "config": {"run": {"algo": "ppo"}},
               "state": _random_value(rng)}
    choice = rng.randrange(6)
    if choice == 0:  # a pickle that runs code, bare or behind a valid header
        import hashlib

        buf = io.BytesIO()
        torch.save({**payload, "state": _Marker(marker)}, buf)
        body = buf.getvalue()
        if rng.random() < 0.5:
            return body
        return checkpoint_file._header(hashlib.sha256(body).hexdigest(), len(body)) + body
    if choice == 1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(600)))
    raw = bytearray(checkpoint_file.dumps(payload))
    if choice == 2:  # flipped bytes
        for _ in range(rng.randrange(1, 4)):
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    elif choice == 3:  # cut or extended
        cut = rng.randrange(len(raw) + 64)
        raw = raw[:cut] if cut < len(raw) else raw + bytes(cut - len(raw))
    elif choice == 4:  # a header field rewritten
        header = raw[: checkpoint_file.HEADER_SIZE].decode("ascii", "replace")
        new = header.replace('"format": 2', rng.choice(['"format": "2"', '"format": 1', ""]))
        raw[: checkpoint_file.HEADER_SIZE] = new.encode("ascii", "replace")[
            : checkpoint_file.HEADER_SIZE].ljust(checkpoint_file.HEADER_SIZE, b" ")
    return bytes(raw)


def fuzz_checkpoint(rng: random.Random, workdir: Path) -> None:
    """Load one generated, damaged or crafted checkpoint file, as eval/gif/resume do."""
    from gbx.artifacts import load_checkpoint, load_latest_good

    marker = workdir / "ran-code"
    folder = workdir / "run" / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ckpt_{rng.randrange(10**6):012d}.pt"
    path.write_bytes(_checkpoint_bytes(rng, marker))
    try:
        if rng.random() < 0.5:
            load_checkpoint(path)
        else:
            load_latest_good(workdir / "run", warn=lambda _line: None)
    finally:
        if marker.exists():
            raise AssertionError(f"loading {path} ran code (it created {marker})")


# ---------------------------------------------------------------------------
# Plugin registration
# ---------------------------------------------------------------------------


class _FakeDist:
    def __init__(self, name: str) -> None:
        self.metadata = {"Name": name}
        self.version = "0.0.1"


class _FakeEntryPoint:
    def __init__(self, name: str, obj: Any, dist: str, error: Exception | None) -> None:
        self.name, self.dist = name, _FakeDist(dist)
        self._obj, self._error = obj, error

    def load(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._obj


class _Plugin:
    def __init__(self, **hooks: Any) -> None:
        self.__dict__.update(hooks)


@attrs.frozen
class _FuzzConfig:
    n: int = 1


_NAMES = ("ppo", "toy", "print", "fuzz", "fuzz-a", "Bad Name", "", "x" * 3, "run", "plugins")


def _registration(rng: random.Random, kind: str) -> Callable[[Any], None]:
    calls = []
    for _ in range(rng.randrange(4)):
        name: Any = rng.choice([*_NAMES, 3, None])
        cfg: Any = rng.choice([_FuzzConfig, dict, None])
        calls.append((name, cfg))
    raises = rng.random() < 0.2

    def register_hook(register: Any) -> None:
        for name, cfg in calls:
            if kind in ("register_envs", "register_algorithms"):
                register(name, object, cfg)
            elif kind == "register_artifact_writers":
                register(rng.choice(["meta", "media", "nope"]), lambda *a: None)
            else:
                register(name, lambda *a: None)
        if raises:
            raise RuntimeError("registration exploded")

    return register_hook


def _random_plugin(rng: random.Random) -> Any:
    hooks: dict[str, Any] = {}
    for kind in ("register_envs", "register_algorithms", "register_observers",
                 "register_models", "register_artifact_writers"):
        if rng.random() < 0.4:
            fn = _registration(rng, kind)
            fn.__name__ = kind
            hooks[kind] = hookimpl(fn)
    if rng.random() < 0.2:
        import click

        name = rng.choice(["run", "plugins", "fuzzcmd"])

        def register_commands(cli: Any) -> None:
            if rng.random() < 0.3:
                raise ValueError("commands exploded")
            cli.add_command(click.Command(name, callback=lambda: None))

        hooks["register_commands"] = hookimpl(register_commands)
    return _Plugin(**hooks)


def fuzz_plugin_registration(rng: random.Random, workdir: Path) -> None:
    """Load a random set of fake plugins; `gbx plugins` must work, lookups fail cleanly."""
    from click.testing import CliRunner

    from gbx.cli import build_cli
    from gbx.plugins import load_plugins
    from gbx.resolve import require_algorithm, require_env

    entry_points: list[Any] = []
    for i in range(rng.randrange(1, 5)):
        error = ImportError("no module named fuzz_dep") if rng.random() < 0.15 else None
        name = rng.choice([f"fuzz{i}", "fuzz0"])  # the same entry-point name twice, at times
        entry_points.append(_FakeEntryPoint(name, _random_plugin(rng), f"gbx-fuzz-{i}", error))
    warnings: list[str] = []
    host = load_plugins(entry_points=entry_points, environ={}, warn=warnings.append)
    if any("\n" in w for w in warnings):
        raise AssertionError(f"a plugin warning spans lines: {warnings}")
    result = CliRunner().invoke(build_cli(host), ["plugins", "--json"])
    if result.exit_code != 0:
        raise AssertionError(f"`gbx plugins` exited {result.exit_code}: {result.output[-500:]}")
    json.loads(result.output)
    lookup = rng.choice([require_algorithm, require_env])
    lookup(host.registry, rng.choice(_NAMES[:5]))  # found, or a GbxError (missing, clash)


# ---------------------------------------------------------------------------
# Config files
# ---------------------------------------------------------------------------


def _config_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([0, -1, 1, 2**63, -(2**70), 10**30, 7])
    if kind == 1:
        return rng.choice([math.nan, math.inf, -math.inf, 1e308, 3e-4, -0.0, 0.5])
    if kind == 2:
        return rng.choice(["", "ppo", "toy", "cpu", "cuda:99", "auto", "x" * 300, "\u00e9"])
    if kind == 3:
        return rng.choice([True, False])
    if kind == 4:
        return rng.choice(["console,jsonl", "a,b"])
    if kind == 5:
        return [_config_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["lr", "num_envs", "seed", "steps", "grid", "x"]):
            _config_value(rng, depth + 1) for _ in range(rng.randrange(3))}


_FIELDS = {
    "run": ["algo", "env", "seed", "steps", "device", "observers", "tag", "keep_checkpoints",
            "debug", "nope"],
    "env": ["grid", "height", "tau", "max_steps", "goal_bonus", "stack_k", "nope"],
    "algo": ["lr", "num_envs", "gamma", "rollout_steps", "model", "clip", "nope"],
    "explore": ["name", "bonus", "capacity", "start_fraction", "nope"],
}


def _config_text(rng: random.Random, suffix: str) -> bytes:
    data: dict[str, Any] = {}
    for section in rng.sample(sorted(_FIELDS), rng.randrange(len(_FIELDS) + 1)):
        table: dict[str, Any] = {}
        for key in rng.sample(_FIELDS[section], rng.randrange(1, 4)):
            table[key] = _config_value(rng)
        if section == "run" and rng.random() < 0.7:
            table["algo"] = rng.choice(["ppo", "a2c", "dreamer_v3", "nope"])
            table["env"] = "toy"
            table["device"] = "cpu"
        data[section] = table
    if suffix == ".json":
        text = json.dumps(data)  # NaN and Infinity included, as Python writes them
    else:
        import tomli_w

        try:
            text = tomli_w.dumps(data)
        except (TypeError, ValueError):
            text = "[run]\nseed = 'x'\n"
    raw = text.encode("utf-8")
    mutation = rng.randrange(6)
    if mutation == 0 and raw:  # a byte flipped: possibly no longer UTF-8 or no longer valid
        pos = rng.randrange(len(raw))
        raw = raw[:pos] + bytes([raw[pos] ^ (1 << rng.randrange(8))]) + raw[pos + 1:]
    elif mutation == 1:  # deeply nested
        depth = rng.choice([20, 1000, 100_000])
        raw = (b"[" * depth + b"]" * depth) if suffix == ".json" else \
            b"a = " + b"[" * depth + b"]" * depth
    elif mutation == 2:
        raw = raw[: rng.randrange(len(raw) + 1)]
    return raw


_HOST: Any = None


def fuzz_config_file(rng: random.Random, workdir: Path) -> None:
    """Read one generated config file and resolve it against the installed plugins."""
    from gbx.config import build_config, read_config_file
    from gbx.plugins import load_plugins

    global _HOST
    if _HOST is None:
        _HOST = load_plugins(warn=lambda _line: None)
    suffix = rng.choice([".toml", ".json"])
    path = workdir / f"config{suffix}"
    path.write_bytes(_config_text(rng, suffix))
    data = read_config_file(path)
    build_config(_HOST.registry, base=data, flags={"device": "cpu"})


TARGETS: tuple[tuple[str, Target], ...] = (
    ("checkpoint", fuzz_checkpoint),
    ("plugin-registration", fuzz_plugin_registration),
    ("config-file", fuzz_config_file),
)
