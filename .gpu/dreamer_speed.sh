#!/usr/bin/env bash
# DreamerV3 update speed on one CUDA GPU, eager vs compiled (algo.compile: the posterior
# scan and imagination rollout as CUDA graphs), size S, batch 16 x 64, toy env; then the
# CUDA tests of the compiled path (same losses as eager) and of the no-sync hot path.
# Usage (repository root, after `make setup`): bash .gpu/dreamer_speed.sh [OUT_DIR]
set -euo pipefail
out=${1:-${OUT:-/tmp}/dreamer_speed}
mkdir -p "$out"
py=.venv/bin/python
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
$py -m gbx bench dreamer --device cuda --size S --num-envs 16 --batch-size 16 \
    --batch-length 64 --repeats 20 --engine none --compile both > "$out/bench.jsonl"
$py - "$out/bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
print(f"{'path':<10} {'update ms':>10} {'updates/s':>10} {'wm fwd+bwd ms':>14} {'peak GiB':>9}")
for compiled in (False, True):
    by = {r["metric"]: r["value"] for r in rows if r.get("compile") is compiled}
    print(f"{'compiled' if compiled else 'eager':<10} {by['update_ms']:>10.1f} "
          f"{by['train_steps_per_s']:>10.2f} {by['model_fwd_bwd_ms']:>14.1f} "
          f"{by.get('max_memory_gib', float('nan')):>9.2f}")
ratio = [r["value"] for r in rows if r["metric"] == "compiled_over_eager_updates_per_s"]
print(f"compiled / eager updates/s: {ratio[0]:.2f}x")
PY
$py -m pytest -q -p no:cacheprovider plugins/algo_dreamer/tests/test_compiled_loops.py \
    plugins/algo_dreamer/tests/test_cuda.py -m "not slow" -rs 2>&1 | tail -5
