"""``gbx bench dreamer --profile N``: where N updates spend their time, as one record."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gbx_algo_dreamer.cli import bench_cmd


def test_the_bench_adds_a_profile_of_the_updates_when_asked():
    args = ["--device", "cpu", "--size", "tiny", "--num-envs", "2", "--batch-size", "2",
            "--batch-length", "4", "--repeats", "1", "--engine", "none"]
    res = CliRunner().invoke(bench_cmd, [*args, "--profile", "2"])
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    (prof,) = [r for r in records if r["metric"] == "update_profile"]
    assert prof["profiled_updates"] == 2 and prof["clock"] == "cpu"
    assert prof["value"] == prof["busy_ms_per_update"] > 0
    top = prof["top"]
    assert 0 < len(top) <= 25
    times = [row["ms_per_update"] for row in top]
    assert times == sorted(times, reverse=True)
    assert sum(times) <= prof["busy_ms_per_update"] + 1e-9
    # the update's own work is there: the encoder's convolutions and their gradients
    assert any("convolution" in row["name"] for row in top)
    plain = CliRunner().invoke(bench_cmd, args)
    assert "update_profile" not in plain.output
