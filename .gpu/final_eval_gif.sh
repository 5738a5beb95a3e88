#!/usr/bin/env bash
# GPU check of the run loop's final evaluation: every algorithm at its default eval settings
# leaves a GIF with --observer gif on CUDA, and the final evaluation's cost is printed
# (wall time of the run with and without it). Prints one table row per run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/gbx-final-eval}
rm -rf "$OUT"; mkdir -p "$OUT"
printf '| algo | env | final_eval_episodes | wall_s | gifs | final eval line |\n|---|---|---|---|---|---|\n'
run() {
  local name=$1 algo=$2 env=$3 episodes=$4; shift 4
  local dir="$OUT/$name" t0=$SECONDS
  "$PY" -m gbx run --algo "$algo" --env "$env" --device cuda --observer jsonl,gif \
    --run-dir "$dir" --set run.final_eval_episodes="$episodes" "$@" > "$dir.log" 2>&1
  local gifs final
  gifs=$(find "$dir/media" -name '*.gif' 2>/dev/null | wc -l)
  final=$(grep -c '"final": true' "$dir/train_log.jsonl" || true)
  printf '| %s | %s | %s | %s | %s | %s |\n' "$algo" "$env" "$episodes" "$((SECONDS - t0))" "$gifs" "$final"
}
run ppo-q1 ppo gbx-quest-1 8 --steps 200000 --set algo.num_envs=1024
run ppo-q1-off ppo gbx-quest-1 0 --steps 200000 --set algo.num_envs=1024
run a2c-toy a2c toy 8 --steps 100000
run dreamer-toy dreamer_v3 toy 8 --steps 5000 --set algo.size=tiny
