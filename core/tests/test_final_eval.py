"""The run loop evaluates once when training ends and sends it to every observer."""

from __future__ import annotations

import os

import pytest
from gbx_testplugins import EVENTS


@pytest.fixture(autouse=True)
def _clear_events():
    EVENTS.clear()
    yield
    EVENTS.clear()


def _run(invoke, tmp_path, *extra: str, exit_code: int = 0):
    result = invoke("run", "--algo", "counter", "--env", "toy", "--device", "cpu", "--steps",
                    "64", "--run-dir", str(tmp_path / "r"), "--observer", "recorder", *extra)
    assert result.exit_code == exit_code, result.output
    return [v for k, v in EVENTS if k == "eval"]


def test_a_finished_run_ends_with_one_evaluation_at_its_last_step(invoke, tmp_path) -> None:
    evals = _run(invoke, tmp_path)
    assert len(evals) == 1
    final = evals[0]
    assert final["step"] == 64 and final["env_steps"] == 64 and final["final"] is True
    assert final["episodes"] == 8 and final["greedy"] is True  # run.final_eval_episodes
    assert final["steps_trained"] == 64 and final["kind"] == "eval"
    kinds = [k for k, _ in EVENTS]
    assert kinds.index("eval") > max(i for i, k in enumerate(kinds) if k == "checkpoint")
    assert kinds[-1] == "end"


def test_no_second_evaluation_when_the_trainer_just_evaluated(invoke, tmp_path) -> None:
    evals = _run(invoke, tmp_path, "--set", "algo.eval_each=true")
    assert [e["step"] for e in evals] == [32, 64]
    assert not any(e.get("final") for e in evals)


def test_final_evaluation_can_be_turned_off(invoke, tmp_path) -> None:
    assert _run(invoke, tmp_path, "--set", "run.final_eval_episodes=0") == []


def test_a_run_stopped_by_a_signal_skips_it(invoke, tmp_path) -> None:
    if os.name != "posix":
        pytest.skip("signals")
    # A run stopped by SIGTERM exits 143 (docs/observability.md), not 0.
    evals = _run(invoke, tmp_path, "--set", "algo.signal_at=32", "--steps", "1000",
                 exit_code=143)
    assert evals == []
    assert EVENTS[-1][1]["status"] == "stopped"


@pytest.mark.parametrize("old", ["eval_every", "eval_episodes", "eval_greedy",
                                 "checkpoint_every"])
def test_an_algorithm_cadence_key_is_refused_naming_the_run_key(invoke, tmp_path, old) -> None:
    """`--set algo.<old>` and a config file with it: one line naming `run.<old>`, exit 2."""
    result = invoke("run", "--algo", "counter", "--env", "toy", "--set", f"algo.{old}=1",
                    "--run-dir", str(tmp_path / "r"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"algo.{old}" in lines[0] and f"run.{old}" in lines[0]
    config = tmp_path / "old.toml"
    config.write_text(f'[run]\nalgo = "counter"\n[algo]\n{old} = 1\n')
    result = invoke("run", "--config", str(config), "--run-dir", str(tmp_path / "f"))
    assert result.exit_code == 2 and f"run.{old}" in result.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "f").exists()


def test_the_run_evaluates_and_checkpoints_on_its_schedule(invoke, tmp_path) -> None:
    """`run.eval_every`/`run.checkpoint_every` in env steps; the counter algorithm records
    every 16 env steps and neither evaluates nor checkpoints by itself (`algo.save=false`)."""
    evals = _run(invoke, tmp_path, "--set", "algo.save=false", "--set", "algo.chunk=4",
                 "--set", "run.eval_every=24",
                 "--set", "run.checkpoint_every=32", "--set", "run.eval_episodes=3")
    # due at the first record past each multiple; the final evaluation at 64 as well
    assert [(e["step"], e["episodes"], bool(e.get("final"))) for e in evals] == [
        (32, 3, False), (48, 3, False), (64, 8, True)]
    # the random baseline is played once, at the end, unless run.eval_baseline asks
    assert [e["baseline"] for e in evals] == [False, False, True]
    steps = [v[1] for k, v in EVENTS if k == "checkpoint"]
    assert steps == [32, 64]
    kinds = [(k, v[1] if k == "checkpoint" else v.get("step")) for k, v in EVENTS
             if k in ("eval", "checkpoint")]
    assert kinds.index(("eval", 32)) < kinds.index(("checkpoint", 32))


def test_a_run_saved_with_algorithm_cadence_keys_resumes_and_evaluates(invoke, tmp_path) -> None:
    """A run written when the algorithm held its cadence (config.json and the checkpoint's
    config with `algo.eval_episodes` & co.) still resumes and evaluates: the old keys are
    upgraded on reading (eval_episodes/eval_greedy move to run, old cadences are dropped)."""
    import json

    from gbx import checkpoint_file

    run_dir = tmp_path / "r"
    _run(invoke, tmp_path)
    config_json = run_dir / "config.json"
    data = json.loads(config_json.read_text())
    data["run"].pop("eval_episodes", None)
    data["algo"].update(eval_every=3, eval_episodes=5, eval_greedy=True, checkpoint_every=7)
    config_json.write_text(json.dumps(data))
    checkpoints = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))
    assert checkpoints
    for path in checkpoints:
        payload = checkpoint_file.read_file(path)
        payload["config"] = data
        checkpoint_file.write_file(path, payload)
    result = invoke("eval", "--checkpoint", str(run_dir), "--episodes", "2", "--no-baseline")
    assert result.exit_code == 0, result.output
    result = invoke("run", "--resume", str(run_dir), "--steps", "96")
    assert result.exit_code == 0, result.output
    resumed = json.loads(config_json.read_text())
    assert resumed["run"]["eval_episodes"] == 5 and "eval_every" not in resumed["algo"]


def test_evaluations_during_training_play_the_baseline_when_asked(invoke, tmp_path) -> None:
    evals = _run(invoke, tmp_path, "--set", "algo.save=false", "--set", "run.eval_every=32",
                 "--set", "run.eval_baseline=true")
    assert [(e["step"], e["baseline"]) for e in evals] == [(32, True), (64, True)]
