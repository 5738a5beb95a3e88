"""`gbx chain`: the stages of a curriculum as one job, with the test algorithm on the toy env."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from gbx_testplugins import EVENTS, RecordingObserver, ticking_stamper

from gbx.chain import parse_deadlines, stage_deadline, stage_difference, stage_limit
from gbx.errors import ConfigError


@pytest.fixture(autouse=True)
def _clear_events():
    EVENTS.clear()
    yield
    EVENTS.clear()


@pytest.fixture
def ticking(monkeypatch):
    import gbx.runner

    monkeypatch.setattr(gbx.runner, "Stamper", ticking_stamper())


def stage_file(tmp_path: Path, name: str, *, steps: int = 64, algo: str = "",
               run: str = "") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[run]\nalgo = "counter"\nenv = "toy"\ndevice = "cpu"\nsteps = {steps}\n'
        f'observers = ["recorder"]\nrun_dir = "{tmp_path / name}"\n{run}\n'
        f"[algo]\n{algo}\n")
    return str(path)


def summary_of(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / name / "summary.json").read_text())


def saved_run(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / name / "config.json").read_text())["run"]


def test_a_chain_runs_its_stages_in_order_and_reports_them(invoke, tmp_path) -> None:
    one, two = stage_file(tmp_path, "s1"), stage_file(tmp_path, "s2", steps=96)
    result = invoke("chain", one, two)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "completed"
    assert [(s["config"], s["how"], s["step"]) for s in report["stages"]] == [
        (one, "ran", 64), (two, "ran", 96)]
    starts = [v["run_id"] for k, v in EVENTS if k == "start"]
    assert len(starts) == 2 and starts == [summary_of(tmp_path, n)["run_id"]
                                           for n in ("s1", "s2")]
    assert "stage 1/2" in result.stderr and "stage 2/2" in result.stderr


def test_the_chains_clock_gives_each_stage_the_time_left(invoke, tmp_path, ticking) -> None:
    """Stage 1 ends by its deadline; stage 2 gets what is left of --max-seconds on the
    chain's clock (stage 1's whole wall clock counted)."""
    one = stage_file(tmp_path, "s1", steps=100000, algo="save = false")
    two = stage_file(tmp_path, "s2", steps=100000, algo="save = false")
    result = invoke("chain", one, two, "--deadlines", "20", "--max-seconds", "50")
    assert result.exit_code == 0, result.output
    first, second = summary_of(tmp_path, "s1"), summary_of(tmp_path, "s2")
    assert first["stop_reason"] == second["stop_reason"] == "time_limit"
    assert saved_run(tmp_path, "s1")["max_seconds"] == 20
    assert saved_run(tmp_path, "s2")["max_seconds"] == pytest.approx(50 - first["elapsed_s"])
    assert json.loads(result.stdout)["elapsed_s"] == pytest.approx(
        first["elapsed_s"] + second["elapsed_s"])


def test_a_stage_keeps_its_own_shorter_limit(invoke, tmp_path, ticking) -> None:
    one = stage_file(tmp_path, "s1", steps=100000, algo="save = false",
                     run="max_seconds = 7.0")
    assert invoke("chain", one, "--max-seconds", "50").exit_code == 0
    assert saved_run(tmp_path, "s1")["max_seconds"] == 7.0


def test_no_time_left_ends_the_chain_before_the_next_stage(invoke, tmp_path,
                                                           ticking) -> None:
    one = stage_file(tmp_path, "s1", steps=100000, algo="save = false")
    two = stage_file(tmp_path, "s2")
    result = invoke("chain", one, two, "--deadlines", "10", "--max-seconds", "10")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "out_of_time"
    assert [s["how"] for s in report["stages"]] == ["ran", "not run: no time left"]
    assert not (tmp_path / "s2").exists()


def test_a_stopped_chain_continues_where_it_stopped(invoke, tmp_path, monkeypatch) -> None:
    """A SIGTERM in stage 2 stops the chain with 143; the same command again skips the
    completed stage 1 and resumes stage 2 from its checkpoint."""
    original = RecordingObserver.on_record
    fired: list[int] = []

    def on_record(self, record):  # SIGTERM once, in stage 2 at step 64
        original(self, record)
        if self.run.run_dir.name == "s2" and record["step"] == 64 and not fired:
            fired.append(1)
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(RecordingObserver, "on_record", on_record)
    one, two = stage_file(tmp_path, "s1"), stage_file(tmp_path, "s2", steps=160)
    stopped = invoke("chain", one, two)
    assert stopped.exit_code == 143, stopped.output
    assert json.loads(stopped.stdout)["status"] == "stopped"
    assert summary_of(tmp_path, "s2")["status"] == "stopped"
    first_id = summary_of(tmp_path, "s1")["run_id"]
    EVENTS.clear()

    again = invoke("chain", one, two)
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert [s["how"] for s in report["stages"]] == ["skipped: completed before", "ran"]
    assert summary_of(tmp_path, "s1")["run_id"] == first_id
    resumed = summary_of(tmp_path, "s2")
    assert resumed["status"] == "completed" and resumed["step"] == 160
    # the resumed stage went on from its checkpoint at step 64
    assert [v["step"] for k, v in EVENTS if k == "record"][0] > 64
    assert "resuming" in again.stderr


def test_a_run_dir_holding_another_run_is_refused(invoke, tmp_path) -> None:
    one = stage_file(tmp_path, "s1")
    assert invoke("chain", one).exit_code == 0
    changed = stage_file(tmp_path, "s1", algo="lr = 0.5")
    result = invoke("chain", changed)
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line and "algo.lr differs" in line and "remove that directory" in line


def test_a_stage_without_run_dir_is_refused_before_any_runs(invoke, tmp_path) -> None:
    one = stage_file(tmp_path, "s1")
    bare = tmp_path / "bare.toml"
    bare.write_text('[run]\nalgo = "counter"\nenv = "toy"\ndevice = "cpu"\n')
    result = invoke("chain", one, str(bare))
    assert result.exit_code == 2
    assert "names no run.run_dir" in result.stderr and "add run_dir under [run]" in result.stderr
    assert not (tmp_path / "s1").exists()


def test_bad_deadlines_are_one_line_errors(invoke, tmp_path) -> None:
    stages = stage_file(tmp_path, "s1"), stage_file(tmp_path, "s2")
    for bad, words in (("abc", "comma-separated"), ("20,10", "not decreasing"),
                       ("10,20,30", "at most one per stage")):
        result = invoke("chain", *stages, "--deadlines", bad)
        assert result.exit_code == 2 and words in result.stderr, (bad, result.stderr)


def test_the_clock_arithmetic() -> None:
    assert parse_deadlines("420,1140", 3) == (420.0, 1140.0)
    assert parse_deadlines(None, 3) == ()
    with pytest.raises(ConfigError):
        parse_deadlines("0", 1)
    # the stage's own deadline, else the chain's; the shorter of both
    assert stage_deadline(0, (420.0,), 1800.0) == 420.0
    assert stage_deadline(1, (420.0,), 1800.0) == 1800.0
    assert stage_deadline(0, (420.0,), 300.0) == 300.0
    assert stage_deadline(2, (), None) is None
    # the time left, or the stage's own limit where shorter
    assert stage_limit(1800.0, 1500.0, None) == 300.0
    assert stage_limit(1800.0, 1500.0, 100.0) == 100.0
    assert stage_limit(None, 1500.0, 100.0) == 100.0
    assert stage_limit(None, 0.0, None) is None
    assert stage_limit(420.0, 500.0, None) == -80.0


def test_the_same_stage_is_told_by_what_it_learns() -> None:
    base = {"run": {"algo": "ppo", "env": "toy", "seed": 0, "steps": 10, "init_from": None,
                    "max_seconds": 0.0, "observers": ["jsonl"]},
            "env": {"max_steps": 128}, "algo": {"lr": 1e-3}, "explore": {"name": "none"}}
    assert stage_difference(base, base) is None
    later = {**base, "run": {**base["run"], "max_seconds": 300.0, "observers": []}}
    assert stage_difference(base, later) is None  # its clock and observers may change
    assert stage_difference(base, {**base, "algo": {"lr": 5e-4}}) == "algo.lr"
    assert stage_difference(base, {**base, "run": {**base["run"], "seed": 1}}) == "run.seed"
    assert stage_difference(base, {**base, "explore": {"name": "archive"}}) == "explore.name"
