#!/usr/bin/env bash
# CUDA check of the StatefulEnv capability and of the env memory refusal:
# a gbx-quest-1 batch on the GPU restored from env_state_dict() must replay the same
# future bit for bit, and an env count needing ~1 TB must be a one-line refusal (exit 2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
$PY - <<'PYEOF'
import torch
from gbx_gameboy.tasks import make_stage_env

def make():
    return make_stage_env("gbx-quest-1", 256, "cuda", seed=1, max_steps=5, random_noop_max=2,
                          stack_k=2, info_mode="full", shaping=1.0)

env = make(); env.reset()
gen = torch.Generator(device="cuda").manual_seed(0)
for _ in range(7):
    env.step(torch.randint(0, env.num_actions, (256,), device="cuda", generator=gen))
saved = env.env_state_dict()
acts = [torch.randint(0, env.num_actions, (256,), device="cuda", generator=gen) for _ in range(12)]
first = [tuple(x.clone() for x in env.step(a)[:4]) for a in acts]
other = make(); other.reset(); other.load_env_state_dict(saved)
second = [tuple(x.clone() for x in other.step(a)[:4]) for a in acts]
same = all(torch.equal(x, y) for a, b in zip(first, second) for x, y in zip(a, b))
resets = int(sum(int(f[2].sum() + f[3].sum()) for f in first))
print(f"| stateful env restore on cuda | {'PASS' if same else 'FAIL'} | {resets} resets in the window |")
PYEOF
set +e
out=$($PY -m gbx run --algo ppo --env gbx-quest-1 --device cuda --steps 1000000000000 \
      --set algo.num_envs=30000000 --run-dir /tmp/gbx-gpu-mem-check 2>&1)
code=$?
set -e
rm -rf /tmp/gbx-gpu-mem-check
line=$(echo "$out" | grep "gbx: error:" | head -1)
echo "| 30M-env memory refusal on cuda | $([ $code -eq 2 ] && echo PASS || echo "FAIL (exit $code)") | ${line} |"
