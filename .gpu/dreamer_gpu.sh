#!/usr/bin/env bash
# DreamerV3 on one GPU, in under ~9 minutes, from the repository root (no .venv: python3
# with torch, warp and the gbx packages importable):
#   1. gbx bench dreamer --compile both at size S, batch 16 x 64: updates/s eager vs
#      compiled (CUDA graphs of the posterior scan and the imagination rollout);
#   2. the CUDA tests of gbx-algo-dreamer (compiled loops against eager, no sync in the
#      hot path of both engines);
#   3. stage 2 of the bundled game with examples/dreamer_quest2_explore_gpu.toml (archive
#      start states; the compiled loops if they measured faster) for the time left,
#      stopped by SIGTERM (the run writes its final checkpoint), then
#      `gbx eval --no-baseline --episodes 64` from the real start state.
# The train log, the bench records and the eval JSON go to $OUT; a short table is printed
# last. Exit status non-zero if a step fails.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/dreamer_gpu_out}"
mkdir -p "$OUT"
PY=python3
START=$(date +%s)
BUDGET=${BUDGET:-530}   # seconds for the whole script (the device allows 600 per command)
status=0
elapsed() { echo $(( $(date +%s) - START )); }

# 1. update speed, eager vs compiled
timeout 170 $PY -m gbx bench dreamer --device cuda --size S --batch-size 16 --batch-length 64 \
  --engine none --compile both --repeats 10 > "$OUT/bench_dreamer_S.jsonl" 2> "$OUT/bench.err"
bench_rc=$?
[ $bench_rc = 0 ] || status=1

# 2. the CUDA tests
timeout 150 $PY -m pytest -q -p no:cacheprovider plugins/algo_dreamer/tests -k cuda \
  -m "slow or not slow" > "$OUT/pytest_cuda.log" 2>&1
test_rc=$?
[ $test_rc = 0 ] || status=1

# 3. stage 2 with the archive for the time left (100 s kept for the evaluation); with the
# compiled loops when the bench measured them 1.2x faster and the CUDA tests passed
ratio=$($PY -c "import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
print(next((r['value'] for r in rows if r.get('metric')=='compiled_over_eager_updates_per_s'),0))" \
  "$OUT/bench_dreamer_S.jsonl" 2>/dev/null || echo 0)
compile=false
if [ $test_rc = 0 ] && $PY -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 1.2 else 1)" "$ratio"; then
  compile=true
fi
RUN="$OUT/dreamer_quest2"
left=$(( BUDGET - $(elapsed) - 100 ))
[ $left -lt 60 ] && left=60
timeout -s TERM -k 30 $left $PY -m gbx run --config examples/dreamer_quest2_explore_gpu.toml \
  --run-dir "$RUN" --observer jsonl --set algo.compile=$compile > "$OUT/run.out" 2> "$OUT/run.err"
run_rc=$?
cp "$RUN/train_log.jsonl" "$OUT/dreamer_quest2_train_log.jsonl" 2>/dev/null
timeout 90 $PY -m gbx eval --checkpoint "$RUN" --no-baseline --episodes 64 --quiet \
  > "$OUT/dreamer_quest2_eval.json" 2> "$OUT/eval.err"
eval_rc=$?
[ $eval_rc = 0 ] || status=1
rm -rf "$RUN/checkpoints"  # large; the log and the eval JSON are what comes back

$PY - "$OUT" "$bench_rc" "$test_rc" "$run_rc" "$eval_rc" "$(elapsed)" "$compile" <<'EOF'
import json, sys
from pathlib import Path
out, bench_rc, test_rc, run_rc, eval_rc, secs, compiled = sys.argv[1:]
out = Path(out)
def rows(path):
    try:
        return [json.loads(l) for l in path.read_text().splitlines() if l.strip().startswith("{")]
    except OSError:
        return []
row = lambda k, v: print(f"{k:<52} {v}")
print("-" * 72)
bench = rows(out / "bench_dreamer_S.jsonl")
for rec in bench:
    if rec.get("metric") in ("train_steps_per_s", "update_ms", "model_fwd_bwd_ms",
                             "compiled_over_eager_updates_per_s"):
        mode = {True: "compiled", False: "eager"}.get(rec.get("compile"), rec.get("compile"))
        row(f"bench S 16x64 {mode} {rec['metric']}", f"{rec['value']:.4g}")
row("bench rc", bench_rc)
log = (out / "pytest_cuda.log").read_text().strip().splitlines() if (out / "pytest_cuda.log").exists() else []
row("pytest plugins/algo_dreamer/tests -k cuda", f"rc {test_rc}: {log[-1] if log else '-'}")
train = [r for r in rows(out / "dreamer_quest2_train_log.jsonl") if "env_steps" in r and "eval" not in r]
if train:
    last = train[-1]
    best = max((r.get("success_rate") or 0.0) for r in train)
    row("stage 2 run (rc 124/143 = stopped by timeout)", f"rc {run_rc}, algo.compile={compiled}")
    row("  env steps / updates / wall s", f"{last['env_steps']} / {last.get('opt_steps')} / "
        f"{last.get('wall_time_s', 0):.0f}")
    row("  env steps/s, replay ratio", f"{last.get('sps', 0):.1f}, {last.get('replay_ratio', 0):.1f}")
    row("  training success: best record / last", f"{best:.3f} / {last.get('success_rate') or 0.0:.3f}")
    row("  action entropy / recon acc / kl", f"{last.get('action_entropy', float('nan')):.3f} / "
        f"{last.get('recon_accuracy', float('nan')):.3f} / {last.get('kl_total', float('nan')):.2f}")
    row("  archive cells / start frac", f"{last.get('explore_archive_size')} / "
        f"{last.get('explore_archive_start_frac')}")
else:
    row("stage 2 run", f"rc {run_rc}: no records (see run.err)")
try:
    ev = json.loads((out / "dreamer_quest2_eval.json").read_text())
    row("gbx eval 64 greedy from the real start: success", ev.get("success_rate"))
    row("  median steps to goal / mean return", f"{ev.get('median_steps_to_goal')} / "
        f"{ev.get('mean_return')}")
except (OSError, ValueError):
    row("gbx eval", f"rc {eval_rc}: no JSON (see eval.err)")
row("script wall s", secs)
EOF
exit $status
