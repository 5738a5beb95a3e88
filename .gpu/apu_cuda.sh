#!/usr/bin/env bash
# CUDA check of the APU state machine: the whole conformance table (dmg_sound and oam_bug
# included) on the GPU, then the emulator benchmark at 16,384 envs (busy micro-ROM and
# flappyboy) to compare with the previous kernel's figures (budget: within 5%).
# Run from the repository root on a GPU machine after `make setup`.
set -euo pipefail
PY=${PY:-.venv/bin/python}
GBX=${GBX:-.venv/bin/gbx}
export GBX_TESTROMS=${GBX_TESTROMS:-../shared/testroms}
out=$(mktemp -d)

"$GBX" gameboy conformance --device cuda --json > "$out/conf.json"
"$GBX" bench emulator --device cuda --envs 16384 > "$out/bench_busy.json"
"$GBX" bench emulator --device cuda --envs 16384 \
  --rom "$GBX_TESTROMS/games/flappyboy/flappyboy.gb" > "$out/bench_game.json"

"$PY" - "$out" <<'PYEOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
conf = json.loads((out / "conf.json").read_text())
print("| ROM | CUDA | frames | detail |")
print("|---|---|---|---|")
for r in conf:
    if "dmg_sound" in r["rom"] or "oam_bug" in r["rom"] or not r["passed"]:
        print(f"| {r['rom']} | {'pass' if r['passed'] else 'FAIL'} | {r['frames']} | {r['detail']} |")
print(f"\nCUDA conformance: {sum(r['passed'] for r in conf)}/{len(conf)} pass")
for name in ("bench_busy", "bench_game"):
    b = json.loads((out / f"{name}.json").read_text())
    print(f"{name}: envs {b['envs']} frames/s {b['frames_per_s']:.0f} "
          f"steady {b['steady_frames_per_s']:.0f} device {b['device']}")
PYEOF
