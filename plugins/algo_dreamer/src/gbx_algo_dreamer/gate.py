"""Regression gates: capture a baseline from a run's ``train_log.jsonl`` and compare a
new run against it.

A baseline holds the key metrics at (up to) ``POINTS`` env-step marks of the run plus
the final-window success rate and median goal distance. A run passes when every key
metric is within ``TOLERANCE`` (relative) of the baseline at the same env step, its
success rate is at least ``SUCCESS_FLOOR`` x the baseline's and its median distance at
most ``DIST_CEILING`` x the baseline's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

KEY_METRICS = ("loss_model", "obs_nll", "reward_nll", "continue_nll", "kl_total",
               "prior_entropy", "posterior_entropy", "loss_critic", "action_entropy")
TOLERANCE = 0.15
ABS_FLOOR = 1e-3  # metrics this close to zero compare absolutely
SUCCESS_FLOOR = 0.6
DIST_CEILING = 1.2
POINTS = 8
FINAL_WINDOW = 0.25  # share of records averaged for the final success/distance
BASELINE_VERSION = 1


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """Training records (dicts with ``env_steps``) of ``RUN_DIR/train_log.jsonl``."""
    path = Path(run_dir) / "train_log.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; pass the run directory of a "
                                "finished run (it holds train_log.jsonl)")
    records = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n} is not JSON ({exc.msg}); the log is damaged") from exc
        if isinstance(item, dict) and isinstance(item.get("record"), dict):
            item = item["record"]
        if isinstance(item, dict) and "env_steps" in item:
            records.append(item)
    if not records:
        raise ValueError(f"{path} has no training records (lines with env_steps)")
    return records


def _final_mean(records: list[dict[str, Any]], key: str) -> float | None:
    tail = records[-max(1, math.ceil(len(records) * FINAL_WINDOW)):]
    vals = [float(r[key]) for r in tail if isinstance(r.get(key), int | float)]
    return sum(vals) / len(vals) if vals else None


def capture(records: list[dict[str, Any]]) -> dict[str, Any]:
    trained = [r for r in records if any(k in r for k in KEY_METRICS)]
    if not trained:
        raise ValueError("the log has no records with training losses; run longer")
    picks = sorted({round(i * (len(trained) - 1) / max(1, POINTS - 1))
                    for i in range(min(POINTS, len(trained)))})
    points = [{"env_steps": int(trained[i]["env_steps"]),
               **{k: float(trained[i][k]) for k in KEY_METRICS if k in trained[i]}}
              for i in picks]
    return {"version": BASELINE_VERSION, "points": points,
            "success_rate": _final_mean(records, "success_rate"),
            "dist_p50": _final_mean(records, "dist_p50")}


def compare(records: list[dict[str, Any]], baseline: dict[str, Any]) -> dict[str, Any]:
    """``{"passed": bool, "failures": [...], "checked": n}``."""
    if baseline.get("version") != BASELINE_VERSION:
        raise ValueError(f"baseline version {baseline.get('version')} is not "
                         f"{BASELINE_VERSION}; capture it again")
    by_step = {int(r["env_steps"]): r for r in records}
    failures: list[str] = []
    checked = 0
    for point in baseline["points"]:
        step = point["env_steps"]
        rec = by_step.get(step)
        if rec is None:
            failures.append(f"no record at env_steps={step} (run with the baseline's config)")
            continue
        for key, base in point.items():
            if key == "env_steps":
                continue
            got = rec.get(key)
            checked += 1
            if not isinstance(got, int | float) or not math.isfinite(got):
                failures.append(f"{key}@{step}: missing or non-finite ({got!r})")
            elif abs(got - base) > max(TOLERANCE * abs(base), ABS_FLOOR):
                failures.append(f"{key}@{step}: {got:.6g} vs baseline {base:.6g} "
                                f"(more than {TOLERANCE:.0%} off)")
    succ, base_succ = _final_mean(records, "success_rate"), baseline.get("success_rate")
    if base_succ:
        checked += 1
        if succ is None or succ < SUCCESS_FLOOR * base_succ:
            failures.append(f"success_rate {succ} < {SUCCESS_FLOOR} x baseline {base_succ:.4g}")
    dist, base_dist = _final_mean(records, "dist_p50"), baseline.get("dist_p50")
    if base_dist is not None:
        checked += 1
        if dist is None or dist > DIST_CEILING * base_dist + 1e-12:
            failures.append(f"dist_p50 {dist} > {DIST_CEILING} x baseline {base_dist:.4g}")
    return {"passed": not failures, "failures": failures, "checked": checked}

