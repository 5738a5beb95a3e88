"""The goal-file fuzz target: every generated goal resolves or is refused in one line."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gbx.errors import GbxError
from gbx_gameboy.fuzz_goal import fuzz_goal_file


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_generated_goals_resolve_or_give_a_clean_error(tmp_path_factory, seed) -> None:
    workdir = tmp_path_factory.mktemp("goal")
    try:
        fuzz_goal_file(random.Random(seed), workdir)
    except GbxError as exc:
        assert "\n" not in str(exc)  # one line


def test_the_target_generates_both_outcomes(tmp_path: Path) -> None:
    """Not only refusals: some generated goals are valid and resolve."""
    outcomes = set()
    for seed in range(60):
        work = tmp_path / str(seed)
        work.mkdir()
        try:
            fuzz_goal_file(random.Random(seed), work)
            outcomes.add("ran")
        except GbxError:
            outcomes.add("clean")
    assert outcomes == {"ran", "clean"}


@pytest.mark.slow
def test_short_campaign_has_no_traceback_and_no_crash() -> None:
    """`gbx fuzz` over every registered target (2,000 inputs each)."""
    done = subprocess.run(
        [sys.executable, "-m", "gbx", "fuzz", "--inputs", "2000", "--seed", "11", "--json"],
        capture_output=True, text=True, timeout=1200,
    )
    summary = json.loads(done.stdout)
    assert {"config-values", "goal-file"} <= set(summary["targets"])
    assert summary["totals"]["tracebacks"] == 0, done.stdout
    assert summary["totals"]["crashes"] == 0, done.stdout
    assert done.returncode == 0
