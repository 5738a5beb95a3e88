"""gbx.records: the common fields of every record, computed in one place."""

from __future__ import annotations

import pytest

from gbx.records import COMMON_FIELDS, KINDS, SPS_FIELD, Stamper, TrainRecord, required_keys


def test_stamper_computes_the_common_fields_and_sps_per_window() -> None:
    now = [10.0]
    stamper = Stamper("r", start_step=100, clock=lambda: now[0])
    now[0] = 12.0
    first = stamper.stamp({"env_steps": 300, "loss": 1.0}, "train")
    assert {k: first[k] for k in COMMON_FIELDS} == {
        "run_id": "r", "seq": 1, "kind": "train", "step": 300, "env_steps": 300,
        "wall_time_s": 2.0, "trace_id": "r.1"}
    assert first[SPS_FIELD] == 100.0  # (300 - 100) env steps in 2 s, from the resumed step
    now[0] = 13.0
    ev = stamper.stamp({"success_rate": 1.0}, "eval")  # no step: the last one; no sps
    assert (ev["step"], ev["env_steps"], ev["seq"], ev["kind"]) == (300, 300, 2, "eval")
    assert SPS_FIELD not in ev
    stamper.restart_window()  # an evaluation's time is not training time
    now[0] = 14.0
    assert stamper.stamp({"step": 400}, "train")[SPS_FIELD] == 100.0
    assert stamper.elapsed() == 4.0
    with pytest.raises(ValueError, match="kind"):
        stamper.stamp({}, "other")
    assert KINDS == ("train", "eval")
    assert {"run_id", "trace_id", "env_steps", "wall_time_s", SPS_FIELD} <= set(
        required_keys(TrainRecord))


def test_the_run_stamps_sps_and_trainers_do_not(invoke, tmp_path) -> None:
    """Through `gbx run`: every train record carries the run's sps (the counter test
    algorithm sends none)."""
    from gbx_testplugins import EVENTS

    EVENTS.clear()
    result = invoke("run", "--algo", "counter", "--env", "toy", "--device", "cpu", "--steps",
                    "64", "--run-dir", str(tmp_path / "r"), "--observer", "recorder")
    assert result.exit_code == 0, result.output
    records = [v for k, v in EVENTS if k == "record"]
    assert records and all(r[SPS_FIELD] > 0 and r["env_steps"] == r["step"] for r in records)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    EVENTS.clear()
