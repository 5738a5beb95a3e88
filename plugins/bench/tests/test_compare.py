"""gbx bench compare / plot: reading record files, keys, ratios, the scaling plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gbx.errors import GbxError
from gbx_bench.compare import compare, read_records, record_key, scaling_series


def _write(path: Path, records: list[dict], *, lines: bool = True) -> Path:
    if lines:
        path.write_text("log line that is not JSON\n"
                        + "\n".join(json.dumps(r) for r in records) + "\n")
    else:
        path.write_text(json.dumps(records))
    return path


def _rec(env: str, n: int, sps: float, device: str = "cpu") -> dict:
    return {"bench": "backends", "env": env, "num_envs": n, "device": device,
            "env_steps_per_s": sps, "step_ms": 1.0, "versions": {"torch": "x"}}


def test_compare_keys_by_bench_and_params_and_averages_repeats(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", [_rec("gbx-quest-1", 64, 100.0), _rec("gbx-quest-1", 64,
                                                                             300.0),
                                      _rec("gbx-quest-1", 256, 400.0),
                                      {"bench": "backends-ratio", "num_envs": 64, "ratio": 2}])
    b = _write(tmp_path / "b.json", [_rec("gbx-quest-1", 64, 1000.0, "cuda"),
                                     _rec("pyboy-quest-1", 64, 5.0)], lines=False)
    rows = compare(read_records(a), read_records(b))
    assert len(rows) == 1  # device is not part of the key; N=256 and pyboy only in one file
    row = rows[0]
    assert row["key"] == {"bench": "backends", "env": "gbx-quest-1", "num_envs": 64}
    assert row["metric"] == "env_steps_per_s" and row["a"] == 200.0 and row["ratio"] == 5.0


def test_cli_compare_and_plot(tmp_path: Path, invoke) -> None:
    a = _write(tmp_path / "a.jsonl", [_rec("e", 64, 100.0), _rec("e", 256, 350.0)])
    b = _write(tmp_path / "b.jsonl", [_rec("e", 64, 150.0), _rec("e", 256, 700.0)])
    result = invoke("bench", "compare", str(a), str(b), "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [r["ratio"] for r in rows] == [1.5, 2.0]
    out = tmp_path / "plots" / "scaling.png"
    result = invoke("bench", "plot", str(a), str(b), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_scaling_series_and_bad_files(tmp_path: Path) -> None:
    recs = [_rec("e", 256, 3.0), _rec("e", 64, 1.0)]
    assert scaling_series(recs, "env_steps_per_s") == {"e (cpu)": [(64, 1.0), (256, 3.0)]}
    assert record_key(recs[0]) == (("bench", "backends"), ("env", "e"), ("num_envs", 256))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("nothing here\n")
    with pytest.raises(GbxError, match="no benchmark records"):
        read_records(empty)


def _fake_run(root: Path, name: str, world: int, steps_per_s: float) -> Path:
    run = root / name
    run.mkdir()
    meta = {"config": {"run": {"algo": "ppo", "env": "toy"}, "algo": {"num_envs": 8}},
            "device_name": "cpu", "versions": {"torch": "x"}}
    if world > 1:
        meta["distributed"] = {"world_size": world}
    (run / "meta.json").write_text(json.dumps(meta))
    lines = [json.dumps({"meta": {}})]
    for i in range(1, 4):
        lines.append(json.dumps({"env_steps": int(1000 * i), "wall_time_s": 1000 * i / steps_per_s
                                 + 5.0}))
    (run / "train_log.jsonl").write_text("\n".join(lines) + "\n{\"torn")
    return run


def test_runs_reports_steady_rate_and_scaling_efficiency(tmp_path: Path, invoke) -> None:
    one = _fake_run(tmp_path, "one", 1, 100.0)
    two = _fake_run(tmp_path, "two", 2, 180.0)
    result = invoke("bench", "runs", str(one), str(two))
    assert result.exit_code == 0, result.output
    recs = [json.loads(line) for line in result.output.splitlines()]
    assert recs[0]["steady_env_steps_per_s"] == 100.0 and recs[0]["scaling_efficiency"] == 1.0
    assert recs[1]["world_size"] == 2 and recs[1]["scaling_efficiency"] == 0.9
    result = invoke("bench", "runs", str(tmp_path))
    assert result.exit_code != 0 and "--observer jsonl" in result.output
