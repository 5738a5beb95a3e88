#!/usr/bin/env bash
# CUDA check of the run's schedule (run.eval_every / run.checkpoint_every, env steps):
# every algorithm on the toy env on the GPU evaluates and checkpoints during the run at
# the due records, evaluates at the end, leaves a GIF with --observer gif, and its log
# validates; DreamerV3 with both engines (the overlapped one evaluates between chunks).
# Then `gbx eval` and `gbx gif` of each run through load_trainer. Prints one table row each.
set -uo pipefail
cd "$(dirname "$0")/.."
GBX=".venv/bin/python -m gbx"
TMP=$(mktemp -d /tmp/gbx-gpu-schedule.XXXX)
SMALL_CNN="algo.model_options={channels=[8,16,16],hidden=32}"
declare -A SETS=(
  [ppo]="--set algo.num_envs=64 --set algo.rollout_steps=16 --set algo.minibatches=2 --set $SMALL_CNN"
  [ppo-graphs]="--set algo.num_envs=64 --set algo.rollout_steps=16 --set algo.minibatches=2 --set algo.cuda_graphs=true"
  [a2c]="--set algo.num_envs=64 --set algo.log_every=2 --set $SMALL_CNN"
  [dreamer-sync]="--set algo.size=tiny --set algo.num_envs=8 --set algo.batch_size=4 --set algo.batch_length=8 --set algo.learning_starts=64 --set algo.record_every=8 --set algo.replay_capacity=2048"
  [dreamer-overlapped]="--set algo.size=tiny --set algo.num_envs=8 --set algo.batch_size=4 --set algo.batch_length=8 --set algo.learning_starts=64 --set algo.record_every=8 --set algo.replay_capacity=2048 --set algo.engine=overlapped --set algo.overlap_chunk=4"
)
echo "| case | result | evals (step) | checkpoints (step) | eval of the run |"
echo "| --- | --- | --- | --- | --- |"
for name in ppo ppo-graphs a2c dreamer-sync dreamer-overlapped; do
  algo=${name%%-*}; [ "$algo" = dreamer ] && algo=dreamer_v3
  dir=$TMP/$name
  # shellcheck disable=SC2086
  IFS=' ' read -r -a extra <<< "${SETS[$name]}"
  out=$($GBX run --algo "$algo" --env toy --device cuda --steps 4096 --run-dir "$dir" \
        --observer print,jsonl,gif --set run.eval_every=1024 --set run.eval_episodes=4 \
        --set run.checkpoint_every=2048 "${extra[@]}" 2>&1)
  code=$?
  evals=$(echo "$out" | grep -o "] eval step=[0-9]*" | cut -d= -f2 | paste -sd, -)
  ckpts=$(echo "$out" | grep -o "] checkpoint step=[0-9]*" | cut -d= -f2 | paste -sd, -)
  gifs=$(find "$dir/media" -name rollout.gif 2>/dev/null | wc -l)
  valid=$($GBX log validate "$dir/train_log.jsonl" >/dev/null 2>&1 && echo valid || echo INVALID)
  ev=$($GBX eval --checkpoint "$dir" --episodes 4 --quiet 2>/dev/null | .venv/bin/python -c \
       "import json,sys; d=json.load(sys.stdin); print(d['step'], d['success_rate'])" 2>&1)
  $GBX gif --checkpoint "$dir" --out "$dir/gif" --steps 8 --device cuda --quiet >/dev/null 2>&1
  ok="PASS"
  [ $code -eq 0 ] && [ "$gifs" -ge 1 ] && [ "$valid" = valid ] && [ -f "$dir/gif/rollout.gif" ] \
    && [ -n "$evals" ] || ok="FAIL (exit $code, gifs $gifs, log $valid)"
  echo "| $name | $ok | $evals | $ckpts | step, success: $ev |"
done
rm -rf "$TMP"
