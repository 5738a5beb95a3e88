"""The console observer on a pipe and on a (fake) terminal."""

from __future__ import annotations

import io

from observer_testdata import META, ppo_record

from gbx_observers.console import (
    ConsoleObserver,
    find_total_steps,
    format_eta,
    summary_line,
)
from gbx_observers.options import ConsoleConfig


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_every_n_updates() -> None:
    stream = io.StringIO()
    console = ConsoleObserver(None, ConsoleConfig(every=3), stream=stream)
    console.on_run_start(META)
    for step in range(1, 8):
        console.on_record(ppo_record(step))
    console.on_eval({"env_steps": 1792, "mean_return": 1.25, "success_rate": 0.5})
    console.on_run_end({"status": "finished"})
    lines = stream.getvalue().splitlines()
    assert lines[0] == "run run-a started, 4,096 env steps"
    progress = [line for line in lines if line.startswith("steps ")]
    # first update, then every 3rd: updates 1, 3, 6
    assert [line.split()[1] for line in progress] == ["256/4,096", "768/4,096", "1,536/4,096"]
    assert "sps 512 | reward 0.15 | success 43.0% | eta " in progress[1]
    assert "eval @ 1792 | return 1.25 | success 50.0%" in lines
    assert lines[-1].startswith("run finished after ")
    assert "steps 1,792/4,096" in lines[-1]


def test_every_comes_from_the_config_section() -> None:
    assert ConsoleObserver(stream=io.StringIO()).every == 10
    assert ConsoleObserver(None, ConsoleConfig(every=5), stream=io.StringIO()).every == 5


def test_rich_progress_on_a_terminal() -> None:
    stream = _Terminal()
    console = ConsoleObserver(None, ConsoleConfig(every=1000), stream=stream)
    console.on_run_start(META)
    assert console.interactive
    for step in range(1, 4):
        console.on_record(ppo_record(step))
    console.on_failure({"message": "loss is NaN", "trace_id": "abc"})
    console.on_run_end({"status": "failed"})
    text = stream.getvalue()
    assert "steps 768/4,096" in text  # the bar's last state, rendered by rich
    assert "FAILURE: loss is NaN (trace abc)" in text
    assert "run failed after" in text


def test_helpers() -> None:
    assert find_total_steps(META) == 4096
    assert find_total_steps({"total_env_steps": 10}) == 10
    assert find_total_steps({"run_id": "x"}) is None
    assert format_eta(3725) == "1:02:05" and format_eta(65) == "01:05"
    assert format_eta(None) == "--:--" and format_eta(float("nan")) == "--:--"
    assert summary_line({"env_steps": 5}, None, None) == "steps 5 | sps - | reward - | success -"
