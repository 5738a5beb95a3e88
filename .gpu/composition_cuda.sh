#!/usr/bin/env bash
# CUDA check of the PyBoy composition, the Game Boy env's emulator injection and DreamerV3
# on the shared toolkit: the CUDA tests of those plugins, then one short dreamer_v3 run
# with the gif observer configured through the observer.gif section. Prints a table.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
row() { echo "| $1 | $([ "$2" -eq 0 ] && echo PASS || echo "FAIL (exit $2)") | $3 |"; }
echo "| check | result | detail |"
echo "| --- | --- | --- |"
for target in plugins/env_gameboy/tests/test_env.py plugins/env_gameboy/tests/test_goal.py \
              plugins/env_pyboy/tests plugins/algo_dreamer/tests/test_cuda.py \
              plugins/algo_dreamer/tests/test_engine.py; do
  out=$($PY -m pytest -q -m "cuda or not cuda" "$target" 2>&1); code=$?
  row "pytest $target" $code "$(echo "$out" | tail -1)"
done
dir=$(mktemp -d)
out=$($PY -m gbx run --algo dreamer_v3 --env toy --device "${GBX_CHECK_DEVICE:-cuda}" --steps 256 \
      --run-dir "$dir/r" --observer jsonl,gif --set observer.gif.steps=17 --set algo.size=tiny \
      --set algo.num_envs=4 --set algo.batch_size=4 --set algo.batch_length=8 \
      --set algo.train_ratio=16.0 --set algo.replay_capacity=512 --set algo.learning_starts=32 \
      2>&1); code=$?
rows=$(cat "$dir"/r/media/eval_*/rollout.jsonl 2>/dev/null | wc -l)
[ "$code" -eq 0 ] && [ "$rows" -ge 17 ] && [ $((rows % 17)) -eq 0 ]; ok=$?
row "dreamer_v3 on cuda, observer.gif.steps=17" $ok "exit $code, $rows rollout rows"
rm -rf "$dir"
