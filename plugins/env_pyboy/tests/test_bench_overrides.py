"""``gbx bench backends --set``: which env gets which override (no emulator started)."""

from __future__ import annotations

import attrs
import click
import pytest

from gbx.config import option
from gbx.registry import EnvSpec, Provider, Registry
from gbx_env_pyboy.bench import measured_runs, route_overrides


@attrs.frozen
class Inner:
    width: int = option(1, "w")


@attrs.frozen
class WarpCfg:
    tau: float = option(0.05, "tau")
    cpu_threads: int = option(0, "threads")
    model: Inner = option(Inner(), "nested")


@attrs.frozen
class PyBoyCfg:
    tau: float = option(0.05, "tau")
    cpu_threads: int = option(0, "inherited, unused")
    workers: int = option(0, "workers")


def _registry() -> Registry:
    reg = Registry()
    for name, cls in (("warp", WarpCfg), ("pyboy", PyBoyCfg)):
        reg.envs[name] = EnvSpec(name, lambda *a: None, cls, "", Provider("t", "t", "0"))
    return reg


def test_a_key_goes_to_every_env_that_has_it() -> None:
    routed = route_overrides(_registry(), ["warp", "pyboy"],
                             ("workers=2", "tau=0.1", "model.width=3"))
    assert routed == {"warp": ("tau=0.1", "model.width=3"), "pyboy": ("workers=2", "tau=0.1")}


def test_env_prefix_sets_one_env_only() -> None:
    routed = route_overrides(_registry(), ["warp", "pyboy"], ("pyboy:tau=0.2", "tau=0.1"))
    assert routed == {"warp": ("tau=0.1",), "pyboy": ("tau=0.2", "tau=0.1")}


@pytest.mark.parametrize(("text", "match"), [
    ("nope=1", "no env among warp, pyboy has the key 'nope'"),
    ("model.depth=1", "no env among"),
    ("other:tau=1", "'other' is not among the envs compared"),
    ("workers", "expected KEY=VALUE"),
])
def test_errors_name_the_problem(text: str, match: str) -> None:
    with pytest.raises(click.BadParameter, match=match):
        route_overrides(_registry(), ["warp", "pyboy"], (text,))


def test_cpu_runs_the_warp_env_once_per_thread_count_and_pyboy_once() -> None:
    reg = _registry()
    routed = route_overrides(reg, ["warp", "pyboy"], ("tau=0.1",))
    runs = measured_runs(reg, ["warp", "pyboy"], routed, [1, 0], "cpu")
    assert runs == [("warp@threads=1", "warp", ("tau=0.1", "cpu_threads=1")),
                    ("warp@threads=all", "warp", ("tau=0.1", "cpu_threads=0")),
                    ("pyboy", "pyboy", ("tau=0.1",))]
