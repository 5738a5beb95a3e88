"""Plugins used by the core tests: a counting algorithm and a recording observer."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from typing import Any

import attrs
import torch

from gbx import hookimpl
from gbx.config import option
from gbx.plugins import PluginHost, load_plugins


@attrs.frozen
class FakeDist:
    name: str
    version: str = "9.9.9"

    @property
    def metadata(self) -> dict[str, str]:
        return {"Name": self.name}


class FakeEntryPoint:
    """Stands in for an importlib.metadata entry point (name, dist, load())."""

    def __init__(self, name: str, obj: Any, dist: str, error: Exception | None = None) -> None:
        self.name = name
        self.dist = FakeDist(dist)
        self._obj = obj
        self._error = error

    def load(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._obj


@attrs.frozen
class CounterConfig:
    num_envs: int = option(4, "envs stepped together", attrs.validators.ge(1))
    lr: float = option(1e-3, "unused learning rate", attrs.validators.gt(0.0))
    mode: str = option("fast", "fast or slow", attrs.validators.in_(["fast", "slow"]))
    chunk: int = option(8, "env steps per env between records", attrs.validators.ge(1))
    fail_at: int = option(-1, "raise once this many env steps were taken (-1: never)")
    signal_at: int = option(-1, "send SIGTERM to itself at this step (-1: never)")
    name: str = option("c", "a text field")
    save: bool = option(True, "checkpoint after every record")
    eval_each: bool = option(False, "record an evaluation after every record")
    solve_at: int = option(-1, "evaluations score success_rate 1 from this step on, 0 "
                           "before (-1: they score none)")


class CounterTrainer:
    """Steps the env with action 0, records and checkpoints; optional failure for tests."""

    def __init__(self, config: CounterConfig, ctx: Any) -> None:
        self.config = config
        self.ctx = ctx
        self.env = ctx.make_env(config.num_envs)
        self.steps = 0
        self.reward_sum = 0.0

    def act(self, obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
        return torch.zeros(obs.shape[0], dtype=torch.int64, device=obs.device)

    def train(self) -> None:
        obs = self.env.reset()
        while not self.ctx.should_stop():
            for _ in range(self.config.chunk):
                obs, reward, *_ = self.env.step(self.act(obs))
                self.reward_sum += float(reward.sum())
            self.steps += self.config.chunk * self.env.num_envs
            if 0 <= self.config.fail_at <= self.steps:
                raise RuntimeError(f"boom at {self.steps}")
            if 0 <= self.config.signal_at <= self.steps:
                os.kill(os.getpid(), signal.SIGTERM)
            self.ctx.record({"step": self.steps, "reward_sum": torch.tensor(self.reward_sum)})
            if self.config.save:
                self.ctx.checkpoint(self.state_dict(), step=self.steps)
            if self.config.eval_each:
                self.ctx.record_eval({"step": self.steps, **self.evaluate(2)})

    def evaluate(
        self, episodes: int, *, greedy: bool = True, baseline: bool = True
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"episodes": episodes, "greedy": greedy, "baseline": baseline,
                               "steps_trained": self.steps}
        if self.config.solve_at >= 0:
            out["success_rate"] = float(self.steps >= self.config.solve_at)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "reward_sum": self.reward_sum}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.steps = int(state["steps"])
        self.reward_sum = float(state["reward_sum"])


def ticking_stamper() -> Any:
    """A :class:`gbx.records.Stamper` factory whose wall clock moves one second every time
    it is read: put in place of ``gbx.runner.Stamper``, a run's records come at known
    times, whatever the machine's speed (``run.max_seconds`` tests)."""
    import functools
    import itertools

    from gbx.records import Stamper

    ticks = itertools.count(1)
    return functools.partial(Stamper, clock=lambda: float(next(ticks)))


EVENTS: list[tuple[str, Any]] = []


class RecordingObserver:
    """Appends every event to :data:`EVENTS`."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def on_run_start(self, meta: Mapping[str, Any]) -> None:
        EVENTS.append(("start", dict(meta)))

    def on_record(self, record: Mapping[str, Any]) -> None:
        EVENTS.append(("record", dict(record)))

    def on_eval(self, record: Mapping[str, Any]) -> None:
        EVENTS.append(("eval", dict(record)))

    def on_checkpoint(self, path: Any, step: int) -> None:
        EVENTS.append(("checkpoint", (path, step)))

    def on_failure(self, error: Mapping[str, Any]) -> None:
        EVENTS.append(("failure", dict(error)))

    def on_run_end(self, summary: Mapping[str, Any]) -> None:
        EVENTS.append(("end", dict(summary)))


@hookimpl
def _register_algorithms(register: Any) -> None:
    register("counter", CounterTrainer, CounterConfig, description="test algorithm")


@hookimpl
def _register_observers(register: Any) -> None:
    register("recorder", RecordingObserver, description="test observer")


class PluginObject:
    """A plugin made of attributes; compared by identity, as pluggy needs."""

    def __init__(self, **hooks: Any) -> None:
        self.__dict__.update(hooks)


def make_counter_plugin() -> PluginObject:
    return PluginObject(
        register_algorithms=_register_algorithms, register_observers=_register_observers
    )


counter_plugin = make_counter_plugin()


def single_hook_plugin(hook: str, fn: Any) -> PluginObject:
    return PluginObject(**{hook: hookimpl(fn)})


def make_host(*entry_points: FakeEntryPoint, environ: dict[str, str] | None = None,
              warnings: list[str] | None = None) -> PluginHost:
    """Built-ins plus the given fake entry points; warnings go to ``warnings``."""
    sink = warnings if warnings is not None else []
    return load_plugins(entry_points=list(entry_points), environ=environ or {},
                        warn=sink.append)
