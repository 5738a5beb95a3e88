"""`gbx run` end to end with the test algorithm on the toy env."""

from __future__ import annotations

import json

import pytest
import torch
from gbx_testplugins import EVENTS, ticking_stamper

from gbx.artifacts import latest_checkpoint, load_checkpoint
from gbx.config import from_dict


@pytest.fixture(autouse=True)
def _clear_events():
    EVENTS.clear()
    yield
    EVENTS.clear()


def run_args(run_dir, *extra: str) -> list[str]:
    return ["run", "--algo", "counter", "--env", "toy", "--device", "cpu", "--steps", "64",
            "--run-dir", str(run_dir), "--observer", "recorder", *extra]


def test_run_writes_resolved_config_meta_and_checkpoints(invoke, host, tmp_path) -> None:
    run_dir = tmp_path / "r"
    result = invoke(*run_args(run_dir, "--seed", "3", "--set", "algo.lr=0.5"))
    assert result.exit_code == 0, result.output
    for sub in ("checkpoints", "media", "failures"):
        assert (run_dir / sub).is_dir()
    saved = json.loads((run_dir / "config.json").read_text())
    cfg = from_dict(saved, host.registry)
    assert cfg.algo.lr == 0.5 and cfg.run.seed == 3 and cfg.run.run_dir == str(run_dir)
    assert from_dict(json.loads(json.dumps(saved)), host.registry) == cfg
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["seed"] == 3 and meta["config"] == saved
    assert meta["versions"]["torch"] == torch.__version__
    assert meta["env"]["action_names"][3] == "UP"
    ckpt = latest_checkpoint(run_dir)
    assert ckpt.name == "ckpt_000000000064.pt"
    assert load_checkpoint(run_dir)["state"]["steps"] == 64


def test_observers_get_events_in_order_with_stamped_records(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r", "--steps", "96"))
    assert result.exit_code == 0, result.output
    kinds = [k for k, _ in EVENTS]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert kinds.count("record") == 3 and kinds.count("checkpoint") == 3
    records = [v for k, v in EVENTS if k == "record"]
    assert [r["step"] for r in records] == [32, 64, 96]
    first = records[0]
    assert first["run_id"] == EVENTS[0][1]["run_id"]
    assert isinstance(first["reward_sum"], float)  # 0-d tensors become host numbers
    assert first["wall_time_s"] >= 0 and first["trace_id"] and first["kind"] == "train"
    assert EVENTS[-1][1]["status"] == "completed" and EVENTS[-1][1]["step"] == 96


def test_resume_continues_in_the_same_directory(invoke, tmp_path) -> None:
    run_dir = tmp_path / "r"
    assert invoke(*run_args(run_dir)).exit_code == 0
    EVENTS.clear()
    result = invoke("run", "--resume", str(run_dir), "--steps", "128")
    assert result.exit_code == 0, result.output
    start = EVENTS[0][1]
    assert start["resume"]["step"] == 64 and start["resume"]["from"].endswith(".pt")
    steps = [v["step"] for k, v in EVENTS if k == "record"]
    assert steps == [96, 128]  # continued from the checkpointed counter
    assert latest_checkpoint(run_dir).name == "ckpt_000000000128.pt"
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["run"]["steps"] == 128 and saved["run"]["resume"] == str(run_dir)


def test_trainer_exception_writes_failure_bundle_and_exits_1(invoke, tmp_path) -> None:
    run_dir = tmp_path / "r"
    result = invoke(*run_args(run_dir, "--set", "algo.fail_at=64"))
    assert result.exit_code == 1
    line = result.stderr.strip().splitlines()[-1]
    assert "trace_id=" in line and "boom at 64" in line
    trace_id = line.split("trace_id=")[1].split("]")[0]
    bundle = run_dir / "failures" / trace_id
    assert "boom at 64" in (bundle / "error.txt").read_text()
    assert json.loads((bundle / "config.json").read_text())["algo"]["fail_at"] == 64
    records = [json.loads(x) for x in (bundle / "records.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [32]
    assert (bundle / "repro.txt").read_text().startswith("gbx run --config ")
    failures = [v for k, v in EVENTS if k == "failure"]
    assert len(failures) == 1 and failures[0]["trace_id"] == trace_id
    assert EVENTS[-1][0] == "end" and EVENTS[-1][1]["status"] == "failed"


def test_trace_id_of_the_exception_names_the_bundle(host, tmp_path) -> None:
    from gbx.config import build_config
    from gbx.errors import RunFailedError
    from gbx.runner import prepare

    class Guarded(RuntimeError):
        trace_id = "nan-at-step-7"

    run, _ = prepare(build_config(host.registry, flags={"algo": "counter",
                                                          "run_dir": str(tmp_path / "r")}), host)
    err = run.fail(Guarded("loss is NaN"))
    assert isinstance(err, RunFailedError) and err.trace_id == "nan-at-step-7"
    assert (tmp_path / "r" / "failures" / "nan-at-step-7" / "error.txt").is_file()


def test_sigterm_stops_the_run_cleanly(invoke, tmp_path) -> None:
    """Exit 143 (not 0), the checkpoint of the step it stopped at, summary.json 'stopped'."""
    result = invoke(*run_args(tmp_path / "r", "--steps", "100000",
                              "--set", "algo.signal_at=64"))
    assert result.exit_code == 143, result.output
    end = EVENTS[-1][1]
    assert end["status"] == "stopped" and end["step"] == 64 and end["signal"] == "SIGTERM"
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "stopped" and summary["exit_code"] == 143
    assert load_checkpoint(latest_checkpoint(tmp_path / "r"))["step"] == 64


def test_completed_run_exits_0_and_says_completed(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r", "--steps", "32"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["exit_code"] == 0
    assert "signal" not in summary


def test_stop_at_success_ends_the_run_at_the_evaluation_that_reached_it(invoke,
                                                                           tmp_path) -> None:
    """The run stops at the first evaluation during training that reaches the target;
    its latest checkpoint is that step's (the evaluated policy) and no final evaluation
    follows; summary.json says why it stopped."""
    run_dir = tmp_path / "r"
    result = invoke(*run_args(run_dir, "--steps", "100000", "--set", "algo.save=false",
                              "--set", "algo.solve_at=96", "--set", "run.eval_every=32",
                              "--set", "run.checkpoint_every=0",
                              "--set", "run.stop_at_success=0.95"))
    assert result.exit_code == 0, result.output
    assert "solved" in result.stderr and "at step 96" in result.stderr
    evals = [v for k, v in EVENTS if k == "eval"]
    assert [(e["step"], e["success_rate"]) for e in evals] == [(32, 0.0), (64, 0.0), (96, 1.0)]
    assert [v for k, v in EVENTS if k == "checkpoint"][-1][1] == 96
    assert load_checkpoint(latest_checkpoint(run_dir))["step"] == 96
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["stop_reason"] == "solved"
    assert summary["step"] == 96 and summary["exit_code"] == 0


def test_without_stop_at_success_a_solved_run_goes_on(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r", "--steps", "160", "--set", "algo.solve_at=32",
                              "--set", "run.eval_every=32"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["step"] == 160 and summary["stop_reason"] == "steps"


@pytest.fixture
def ticking(monkeypatch):
    import gbx.runner

    monkeypatch.setattr(gbx.runner, "Stamper", ticking_stamper())


def _train_times(offset: float = 0.0) -> list[tuple[int, float]]:
    return [(v["step"], offset + v["wall_time_s"]) for k, v in EVENTS if k == "record"]


def test_max_seconds_ends_the_run_at_the_first_record_past_it(invoke, tmp_path,
                                                              ticking) -> None:
    """The run stops at the first training record whose wall time reached
    run.max_seconds, checkpointed there, with the final evaluation of a finished run;
    summary.json says why, and gbx run exits 0."""
    run_dir = tmp_path / "r"
    result = invoke(*run_args(run_dir, "--steps", "100000", "--set", "algo.save=false",
                              "--set", "run.checkpoint_every=0",
                              "--set", "run.max_seconds=12.5"))
    assert result.exit_code == 0, result.output
    assert "completed its time (run.max_seconds)" in result.stderr
    times = _train_times()
    assert times[-1][1] >= 12.5 and all(t < 12.5 for _, t in times[:-1])
    last = times[-1][0]
    assert last < 100000
    assert [v for k, v in EVENTS if k == "checkpoint"][-1][1] == last
    assert [v["step"] for k, v in EVENTS if k == "eval" and v.get("final")] == [last]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["stop_reason"] == "time_limit"
    assert summary["step"] == last and summary["exit_code"] == 0


def test_a_resumed_run_counts_on_from_its_checkpoints_time(invoke, tmp_path,
                                                           ticking) -> None:
    """The wall clock a run had used when its checkpoint was written counts towards
    run.max_seconds after --resume: the resumed run stops at the first record where the
    two together reach it."""
    run_dir = tmp_path / "r"
    first = invoke(*run_args(run_dir, "--steps", "100000", "--set", "algo.signal_at=96",
                             "--set", "run.max_seconds=40"))
    assert first.exit_code == 143, first.output  # stopped by SIGTERM, checkpoint written
    saved = load_checkpoint(latest_checkpoint(run_dir))
    before = saved["elapsed_s"]
    assert before > 0
    EVENTS.clear()
    resumed = invoke("run", "--resume", str(run_dir), "--set", "algo.signal_at=-1")
    assert resumed.exit_code == 0, resumed.output
    times = _train_times(before)
    assert times[0][0] > saved["step"]
    assert times[-1][1] >= 40 and all(t < 40 for _, t in times[:-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "time_limit"
    # without the earlier time the resumed run would have gone on past that record
    assert times[-1][1] - before < 40
    # the summary counts the whole run's time, and this segment's apart
    assert summary["elapsed_s"] == pytest.approx(before + summary["wall_time_s"])
    assert summary["elapsed_s"] >= 40 > summary["wall_time_s"]


def test_without_max_seconds_a_run_has_no_time_limit(invoke, tmp_path, ticking) -> None:
    result = invoke(*run_args(tmp_path / "r", "--steps", "1600"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["step"] == 1600 and summary["stop_reason"] == "steps"
    assert summary["wall_time_s"] > 40  # the ticking clock passed any limit set above


def test_default_run_dir_name(invoke, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "--algo", "counter", "--env", "toy", "--steps", "32",
                    "--tag", "try1", "--observer", "print")
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.endswith("__counter__toy__try1")
    assert "step=32" in result.stdout  # the print observer's line


def test_unknown_algorithm_is_one_line_exit_2(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r")[:1], "--algo", "ppo")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "'ppo' is not installed" in result.stderr and "`gbx plugins`" in result.stderr
    assert "counter" in result.stderr
    assert not (tmp_path / "r").exists()


def test_unknown_observer_is_one_line_exit_2(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r"), "--observer", "jsonl")
    assert result.exit_code == 2 and "observer 'jsonl' is not installed" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error shown without a GPU")
def test_cuda_without_gpu_is_one_line_exit_2(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r"), "--device", "cuda")
    assert result.exit_code == 2
    assert "CUDA is not available" in result.stderr and result.stderr.count("\n") == 1


def test_bad_config_value_exits_2_naming_the_path(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r"), "--set", "env.grid=1")
    assert result.exit_code == 2
    assert "env.grid = 1: must be >= 2" in result.stderr


def test_debug_mode_checks_env_outputs(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r"), "--debug")
    assert result.exit_code == 0, result.output


def test_auto_device_picks_cpu_without_cuda(host) -> None:
    from gbx.resolve import resolve_device

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected


def test_core_saves_a_final_checkpoint_when_the_trainer_did_not(invoke, tmp_path) -> None:
    run_dir = tmp_path / "r"
    result = invoke(*run_args(run_dir, "--set", "algo.save=false"))
    assert result.exit_code == 0, result.output
    assert [k for k, _ in EVENTS].count("checkpoint") == 1
    payload = load_checkpoint(run_dir)
    assert payload["step"] == 64 and payload["state"]["steps"] == 64


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_run_on_cuda_keeps_env_outputs_on_the_device(invoke, tmp_path) -> None:
    run_dir = tmp_path / "r"
    result = invoke(*run_args(run_dir, "--device", "cuda", "--debug"))
    assert result.exit_code == 0, result.output
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["device"].startswith("cuda") and meta["versions"]["cuda"]
    assert EVENTS[0][1]["device_name"] == torch.cuda.get_device_name(0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_missing_cuda_index_is_one_line_exit_2(invoke, tmp_path) -> None:
    result = invoke(*run_args(tmp_path / "r"), "--device", "cuda:99")
    assert result.exit_code == 2 and "only" in result.stderr and "CUDA device" in result.stderr


def test_rerunning_a_saved_config_needs_a_new_directory(invoke, tmp_path) -> None:
    run_dir = tmp_path / "r"
    assert invoke(*run_args(run_dir)).exit_code == 0
    again = invoke("run", "--config", str(run_dir / "config.json"))
    assert again.exit_code == 2 and "--resume" in again.stderr
    fresh = invoke("run", "--config", str(run_dir / "config.json"), "--run-dir",
                   str(tmp_path / "r2"))
    assert fresh.exit_code == 0, fresh.output
    saved = json.loads((tmp_path / "r2" / "config.json").read_text())
    assert saved["run"]["run_dir"] == str(tmp_path / "r2")


def test_run_ends_by_saying_where_its_outputs_are(invoke, tmp_path) -> None:
    run_dir = tmp_path / "r"
    result = invoke(*run_args(run_dir))
    assert result.exit_code == 0, result.output
    latest = latest_checkpoint(run_dir)
    assert f"checkpoint {latest}" in " ".join(result.output.split())
    assert f"config {run_dir / 'config.json'}" in " ".join(result.output.split())


class _NoteObserver:
    """Writes ``notes/end.txt`` when the run ends (a stand-in for a log or plot writer)."""

    def __init__(self, run) -> None:
        self.run = run

    def on_run_end(self, summary) -> None:
        (self.run.run_dir / "notes").mkdir(exist_ok=True)
        (self.run.run_dir / "notes" / "end.txt").write_text("done\n", encoding="utf-8")


def test_a_run_without_observers_uses_the_default_ones_and_names_their_outputs(tmp_path) -> None:
    from click.testing import CliRunner
    from gbx_testplugins import FakeEntryPoint, counter_plugin, make_host, single_hook_plugin

    from gbx.cli import build_cli

    def register_observers(register) -> None:
        register("notes", _NoteObserver, default=True, outputs={"notes": "notes/end.txt"})
        register("unused", _NoteObserver, outputs={"unused": "unused.txt"})

    host = make_host(FakeEntryPoint("counter", counter_plugin, "gbx-test-counter"),
                     FakeEntryPoint("notes", single_hook_plugin("register_observers",
                                                                register_observers),
                                    "gbx-test-notes"))
    run_dir = tmp_path / "r"
    args = run_args(run_dir)[:-2]  # no --observer
    result = CliRunner().invoke(build_cli(host), args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads((run_dir / "config.json").read_text())["run"]["observers"] == ["notes"]
    lines = result.stderr.splitlines()
    assert f"gbx:   notes      {run_dir / 'notes' / 'end.txt'}" in lines
    assert not any("unused" in line for line in lines)
