"""``gbx dreamer validate``: SIGTERM/SIGINT end a scenario after the current env iteration
and the summary still comes out, saying it was stopped."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from gbx.cli import build_cli
from gbx.plugins import get_host
from gbx_algo_dreamer import validate
from gbx_algo_dreamer.validate import registry_env_factory, standing_still, tiny_config


class Unhandled(Exception):
    pass


@pytest.fixture(autouse=True)
def unhandled_signal():
    """A signal the code under test does not catch fails the test, not the whole session."""
    def unhandled(signum: int, _frame: Any) -> None:
        raise Unhandled(f"signal {signum} reached the test: validate did not handle it")

    previous = {s: signal.signal(s, unhandled) for s in (signal.SIGTERM, signal.SIGINT)}
    yield unhandled
    for s, h in previous.items():
        signal.signal(s, h)


def signalling(factory: Any, after: int, signum: int = signal.SIGTERM) -> Any:
    """``factory`` whose envs send ``signum`` to this process inside their ``after``-th step."""
    def make(num_envs: int, seed: int) -> Any:
        env = factory(num_envs, seed)
        step, calls = env.step, [0]

        def step_and_signal(actions: Any) -> Any:
            calls[0] += 1
            if calls[0] == after:
                os.kill(os.getpid(), signum)
            return step(actions)

        env.step = step_and_signal
        return env
    return make


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_standing_still_with_a_summary(signum: int, unhandled_signal) -> None:
    cpu = torch.device("cpu")
    factory = signalling(registry_env_factory("toy", cpu, height=24, width=32), 12, signum)
    cfg = tiny_config(total_env_steps=1_000_000, learning_starts=16, record_every=4)
    summary = standing_still(cpu, factory, cfg)
    assert summary["stopped_by"] == "signal" and summary["passed"] is False
    assert summary["env_steps"] == 12 * cfg.num_envs  # the signalled iteration completes
    assert any("stopped by a signal" in f for f in summary["failures"])
    assert signal.getsignal(signal.SIGTERM) is unhandled_signal  # handlers restored


def test_validate_cli_prints_the_stopped_summary(monkeypatch) -> None:
    """``gbx dreamer validate standing-still --json`` stopped by SIGTERM: JSON, FAIL line."""
    real = validate.registry_env_factory

    def factory(name: str, device: Any, **options: Any) -> Any:
        return signalling(real(name, device, height=24, width=32, **options), 5)

    monkeypatch.setattr(validate, "registry_env_factory", factory)
    cli = build_cli(get_host())
    res = CliRunner().invoke(cli, ["dreamer", "validate", "standing-still", "--device", "cpu",
                                   "--size", "tiny", "--json", "--steps", "1000000"])
    assert res.exit_code == 1, res.output
    body, last = res.output.rstrip().rsplit("\n", 1)
    summary = json.loads(body[body.index("{"):])
    assert summary["stopped_by"] == "signal" and summary["passed"] is False
    assert last == "standing-still: FAIL (stopped by a signal)"


def test_validate_stage1_runs_with_the_archive_explorer(monkeypatch) -> None:
    """``validate stage1 --set explore.name=archive``: the explorer wraps the training envs
    (its statistics reach the summary) and a key outside explore.* is refused."""
    pytest.importorskip("gbx_explore")
    real = validate.registry_env_factory

    def factory(name: str, device: Any, **options: Any) -> Any:
        return real(name, device, height=24, width=32, **options)

    monkeypatch.setattr(validate, "registry_env_factory", factory)
    cli = build_cli(get_host())
    args = ["dreamer", "validate", "stage1", "--device", "cpu", "--env", "toy", "--size",
            "tiny", "--json", "--steps", "600", "--num-envs", "4", "--train-ratio", "4"]
    res = CliRunner().invoke(cli, [*args, "--set", "explore.name=archive", "--set",
                                   "explore.cell_rows=8", "--set", "explore.cell_cols=8"])
    summary = json.loads(res.output[res.output.index("{"):res.output.rindex("}") + 1])
    assert summary["env_steps"] == 600, res.output
    assert summary["explore_archive_size"] > 1 and summary["explore_bytes"] > 0
    bad = CliRunner().invoke(cli, [*args, "--set", "algo.lr=1e-3"])
    assert bad.exit_code != 0 and "explore.KEY=VALUE" in bad.output
