"""The jsonl observer, the schema and ``gbx log validate`` end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from observer_testdata import META, NUM_ENVS, a2c_record, dreamer_record, ppo_record

from gbx.records import SchemaError, TrainRecord, parse, required_keys
from gbx.testing import InMemoryRunContext
from gbx_observers.cli import log_group
from gbx_observers.jsonl import JsonlObserver
from gbx_observers.logfile import load_log, validate_log


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_run(run: InMemoryRunContext, make_record: Any, updates: int = 5) -> Path:
    observer = JsonlObserver(run)
    observer.on_run_start(META)
    for step in range(1, updates + 1):
        observer.on_record(make_record(step))
        if step % 2 == 0:
            observer.on_eval({  # shaped like gbx_toolkit.evaluation.evaluate_policy's summary
                "env_steps": 256 * step, "episodes": 8, "greedy": True, "success_rate": 0.5,
                "mean_return": 1.0, "median_steps_to_goal": None, "random_success_rate": 0.1,
            })
    observer.on_run_end({"status": "finished"})
    return observer.path


@pytest.mark.parametrize("make_record", [ppo_record, a2c_record, dreamer_record])
def test_records_of_each_algorithm_validate(
    run: InMemoryRunContext, make_record: Any
) -> None:
    path = _write_run(run, make_record)
    lines = _lines(path)
    assert list(lines[0]) == ["meta"] and lines[0]["meta"]["log_schema"] == 1
    assert lines[1]["env_steps"] == 256 and lines[1]["action_hist"][3] == 50
    summary = validate_log(path)
    assert summary.to_dict() == {
        "ok": True, "file": str(path), "lines": 8, "records": 5, "evals": 2, "errors": 0,
        "resumes": 0, "last_env_steps": 1280, "problems": 0, "first_problem": None,
    }


def test_required_keys_are_listed_in_the_schema() -> None:
    assert required_keys(TrainRecord) == (
        "run_id", "trace_id", "env_steps", "opt_steps", "wall_time_s", "sps",
        "done_rate", "trunc_rate", "reset_rate", "reward_mean",
    )
    record = parse(TrainRecord, ppo_record(1))
    assert record.extras["approx_kl"] == 0.004 and record.entropy_mean == pytest.approx(1.89)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"reward_mean": float("nan")}, "finite"),
        ({"done_rate": 1.5}, "rate"),
        ({"env_steps": -1}, "non-negative integer"),
        ({"per_env_return": [0.0] * NUM_ENVS}, "one entry per env"),
        ({"big": list(range(65))}, "at most 64"),
        ({"dist_p10": 0.9}, "out of order"),
        ({"note": {"nested": float("inf")}}, "finite"),
    ],
)
def test_bad_records_are_rejected(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        parse(TrainRecord, {**ppo_record(1), **change}, num_envs=NUM_ENVS)


def test_observer_turns_a_bad_record_into_an_error_line(
    run: InMemoryRunContext, capsys: pytest.CaptureFixture[str]
) -> None:
    observer = JsonlObserver(run)
    observer.on_run_start(META)
    observer.on_record(ppo_record(1))
    observer.on_record({**ppo_record(2), "policy_loss": float("nan")})
    observer.on_record(ppo_record(3))
    observer.on_run_end({})
    lines = _lines(observer.path)
    assert lines[2]["error"]["kind"] == "invalid_record"
    assert "policy_loss" in lines[2]["error"]["message"]
    assert lines[2]["error"]["trace_id"] == "run-a:2"
    assert "rejected" in capsys.readouterr().err
    summary = validate_log(observer.path)
    assert summary.ok and summary.records == 2 and summary.errors == 1


def test_observer_writes_the_runs_common_fields_and_computes_none(
    run: InMemoryRunContext
) -> None:
    """The run loop stamps the common fields (gbx.records.Stamper); a record without them
    (not from a run) is rejected, not completed with numbers of the observer's own."""
    from gbx.records import Stamper

    observer = JsonlObserver(run)
    observer.on_run_start({"run_id": "run-a"})
    bare = {k: v for k, v in ppo_record(1).items()
            if k not in ("run_id", "trace_id", "sps", "wall_time_s")}
    observer.on_record(bare)
    clock = iter([0.0, 2.0])
    observer.on_record(Stamper("run-a", clock=lambda: next(clock)).stamp(bare, "train"))
    observer.on_run_end({})
    lines = _lines(observer.path)
    error = lines[1]["error"]
    assert error["kind"] == "invalid_record" and "run_id" in error["message"]
    line = lines[2]
    assert line["run_id"] == "run-a" and line["trace_id"] == "run-a.1" and line["seq"] == 1
    assert line["wall_time_s"] == 2.0 and line["sps"] == 128.0  # 256 env steps in 2 s
    assert validate_log(observer.path).ok


def test_failure_lines(run: InMemoryRunContext) -> None:
    observer = JsonlObserver(run)
    observer.on_run_start(META)
    observer.on_record(ppo_record(1))
    observer.on_failure({  # shaped like the core's failure dict
        "trace_id": "abc", "run_id": "run-a", "step": 256,
        "error": "NonFiniteError: loss is NaN [trace abc]", "traceback": "Traceback ...",
        "config": META["config"], "records": [ppo_record(1)] * 50,
        "repro": "gbx run --config failures/abc/config.json", "paths": ["run/failures/abc"],
    })
    observer.on_run_end({})
    error = _lines(observer.path)[2]["error"]
    assert error == {
        "message": "NonFiniteError: loss is NaN [trace abc]", "trace_id": "abc",
        "kind": "failure", "env_steps": 256, "bundle": "run/failures/abc",
        "repro": "gbx run --config failures/abc/config.json",
    }
    assert validate_log(observer.path).errors == 1


def test_core_stamped_records_and_evals(run: InMemoryRunContext) -> None:
    """The core adds step, kind, seq, wall_time_s and trace_id; evals may lack env_steps."""
    observer = JsonlObserver(run)
    observer.on_run_start({**META, "num_envs": None, "config": {"algo": {"num_envs": 16}}})
    stamp = {"kind": "train", "seq": 1, "step": 256, "trace_id": "run-a.1", "updates": 1}
    observer.on_record({**ppo_record(1), **stamp})
    observer.on_eval({"kind": "eval", "seq": 2, "step": 256, "success_rate": 1.0})
    observer.on_record({**ppo_record(2), **stamp, "seq": 3, "per_env": [0.0] * 16})
    observer.on_run_end({})
    lines = _lines(observer.path)
    assert lines[1]["trace_id"] == "run-a.1" and lines[1]["kind"] == "train"
    assert lines[2]["eval"]["env_steps"] == 256
    assert "one entry per env (16)" in lines[3]["error"]["message"]


def test_validator_reports_the_first_problem_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "train_log.jsonl"
    good = [json.dumps({"meta": META}), json.dumps(ppo_record(1)), json.dumps(ppo_record(3))]
    backwards = json.dumps(ppo_record(2))
    path.write_text("\n".join([*good, backwards, '{"reward_mean": NaN}']) + "\n")
    summary = validate_log(path)
    assert not summary.ok and summary.problems == 2
    assert summary.first_problem == {
        "line": 4, "message": "record: env_steps went backwards: 768 -> 512",
    }


def test_validator_needs_meta_first_and_matching_run_id(tmp_path: Path) -> None:
    path = tmp_path / "train_log.jsonl"
    path.write_text(json.dumps(ppo_record(1)) + "\n")
    assert validate_log(path).first_problem["line"] == 1  # type: ignore[index]
    path.write_text(json.dumps({"meta": META}) + "\n" + json.dumps(
        {**ppo_record(1), "run_id": "other"}) + "\n")
    assert "differs" in validate_log(path).first_problem["message"]  # type: ignore[index]


def test_resume_repairs_a_torn_line_and_appends(run: InMemoryRunContext) -> None:
    path = _write_run(run, ppo_record, updates=4)
    with open(path, "a") as handle:  # a run killed in the middle of a write
        handle.write('{"run_id": "run-a", "env_st')
    torn = validate_log(path)
    assert not torn.ok and "torn" in torn.first_problem["message"]  # type: ignore[index]
    observer = JsonlObserver(run)
    observer.on_run_start({**META, "resume": {"from": "ckpt_512.pt", "step": 512}})
    for step in (3, 4, 5):  # resumed from the checkpoint at 512: steps 768.. again
        observer.on_record(ppo_record(step))
    observer.on_run_end({})
    lines = _lines(path)
    assert sum(1 for line in lines if "meta" in line) == 1
    resume = next(line["resume"] for line in lines if "resume" in line)
    assert resume["env_steps"] == 512 and resume["last_logged_env_steps"] == 1024
    assert resume["repaired_bytes"] == len('{"run_id": "run-a", "env_st')
    assert resume["checkpoint"] == "ckpt_512.pt"
    summary = validate_log(path)
    assert summary.ok and summary.resumes == 1 and summary.records == 7
    steps = [r["env_steps"] for r in load_log(path).records]
    assert steps == [256, 512, 768, 1024, 1280]  # the resumed records supersede 768, 1024


def test_records_before_the_resume_step_are_flagged(tmp_path: Path) -> None:
    path = tmp_path / "train_log.jsonl"
    resume = {"resume": {"run_id": "run-a", "time": "t", "env_steps": 1000}}
    path.write_text("\n".join(json.dumps(x) for x in [{"meta": META}, resume, ppo_record(1)]))
    problem = validate_log(path).first_problem
    assert problem is not None and "before the resume step" in problem["message"]


def test_cli_validate_exit_codes(run: InMemoryRunContext, tmp_path: Path) -> None:
    path = _write_run(run, dreamer_record)
    result = CliRunner().invoke(log_group, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["records"] == 5
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"meta": META}) + "\n" + json.dumps({"env_steps": 1}) + "\n")
    result = CliRunner().invoke(log_group, ["validate", str(bad)])
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["ok"] is False and report["first_problem"]["line"] == 2
    assert "missing required key" in report["first_problem"]["message"]


def test_docs_example_log_is_valid() -> None:
    example = Path(__file__).resolve().parents[3] / "docs" / "examples" / "train_log.jsonl"
    if not example.exists():
        pytest.skip(f"{example} is not in this checkout")
    summary = validate_log(example)
    assert summary.ok, summary.first_problem
    assert summary.records >= 5 and summary.evals >= 1
