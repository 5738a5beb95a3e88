from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fakes import dot_context

import gbx_algo_dreamer.world_model as world_model
from gbx_algo_dreamer.cli import dreamer_group
from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.gate import capture, compare
from gbx_algo_dreamer.trainer import DreamerTrainer

CFG = DreamerConfig(size="tiny", num_envs=4, batch_size=4, batch_length=8, train_ratio=8.0,
                    replay_capacity=512, learning_starts=32, record_every=4,
                    total_env_steps=96, model_lr=1e-3)


def _run(tmp_path, name: str):
    ctx = dot_context(tmp_path / name)
    DreamerTrainer(CFG, ctx).train()
    run_dir = tmp_path / name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "train_log.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in ctx.records))
    return run_dir, ctx.records


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("gate"), "base")


def test_capture_compare_same_run_passes_and_sabotage_fails(tmp_path, baseline_run,
                                                             monkeypatch):
    base_dir, base_records = baseline_run
    runner = CliRunner()
    out = tmp_path / "baseline.json"
    res = runner.invoke(dreamer_group, ["gate", "capture", str(base_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(json.loads(out.read_text())["points"]) >= 2

    again_dir, _ = _run(tmp_path, "again")  # same seed and config: deterministic on CPU
    res = runner.invoke(dreamer_group, ["gate", "compare", str(again_dir), "--baseline",
                                        str(out)])
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output

    # sabotage: the reward loss is silently scaled, as a broken refactor might do
    real = world_model.twohot_nll
    monkeypatch.setattr(world_model, "twohot_nll", lambda *a: 3.0 * real(*a))
    broken_dir, _ = _run(tmp_path, "broken")
    res = runner.invoke(dreamer_group, ["gate", "compare", str(broken_dir), "--baseline",
                                        str(out)])
    assert res.exit_code == 1
    assert "reward_nll" in res.output and "FAIL" in res.output


def test_success_and_distance_rules(baseline_run):
    _, records = baseline_run
    base = capture(records)
    base["success_rate"], base["dist_p50"] = 0.5, 0.2
    good = [dict(r, success_rate=0.31, dist_p50=0.23) for r in records]
    assert compare(good, base)["passed"]
    low = [dict(r, success_rate=0.29, dist_p50=0.2) for r in records]
    assert any("success_rate" in f for f in compare(low, base)["failures"])
    far = [dict(r, success_rate=0.5, dist_p50=0.25) for r in records]
    assert any("dist_p50" in f for f in compare(far, base)["failures"])


def test_compare_reports_missing_log(tmp_path):
    base = tmp_path / "b.json"
    base.write_text("{}")
    res = CliRunner().invoke(dreamer_group, ["gate", "compare", str(tmp_path), "--baseline",
                                             str(base)])
    assert res.exit_code == 1 and "train_log.jsonl" in res.output
