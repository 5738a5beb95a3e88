#!/usr/bin/env bash
# CUDA check after the toolkit and bench tools left the core: the fast tests (CUDA ones
# included) of the core, toolkit, bench plugin and algorithms pass, and `gbx bench train`/`profile`
# still measure PPO on gbx-quest-1 on the GPU (figures comparable to docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
$PY -m pytest -q -n 8 core/tests toolkit/tests plugins/bench/tests \
  plugins/algo_ppo/tests plugins/algo_a2c/tests plugins/algo_dreamer/tests 2>&1 | tail -3
$PY -m gbx bench --quiet train --algo ppo --env gbx-quest-1 --device cuda --envs 4096 \
  --steps 2000000 > /tmp/bench_train.json
$PY -m gbx bench --quiet profile --algo ppo --env gbx-quest-1 --device cuda --envs 4096 \
  > /tmp/bench_profile.json
$PY - <<'PYEOF'
import json
t = json.loads(open("/tmp/bench_train.json").read().splitlines()[-1])
p = json.loads(open("/tmp/bench_profile.json").read().splitlines()[-1])
print("| bench | envs | steady env steps/s |")
print("| --- | --- | --- |")
print(f"| train ppo gbx-quest-1 | 4096 | {t['steady_env_steps_per_s']:.0f} |")
print(f"| profile ppo gbx-quest-1 | 4096 | phases: {sorted(p.get('phases', {}))} |")
PYEOF
