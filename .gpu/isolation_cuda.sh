#!/usr/bin/env bash
# CUDA checks of the emulator's bounds and cycle budget: the isolation test on CUDA, the
# conformance ROMs on CUDA, and the emulator speed at 16,384 envs before (BASE) and after.
# Run from the repository root with its .venv; test ROMs from GBX_TESTROMS (default
# ../shared/testroms). Prints a short table at the end.
set -uo pipefail
BASE=${BASE:-7966aa3}  # the commit before the bounds/budget changes
PY=${PY:-.venv/bin/python}
GBX=${GBX:-.venv/bin/gbx}
export GBX_TESTROMS=${GBX_TESTROMS:-../shared/testroms}
OUT=$(mktemp -d)

"$PY" -m pytest -q -rs plugins/env_gameboy/tests/test_isolation.py -k cuda >"$OUT/iso.txt" 2>&1
iso=$(tail -1 "$OUT/iso.txt")

"$GBX" gameboy conformance --device cuda >"$OUT/conf.txt" 2>&1
conf=$(grep -E '^[0-9]+/[0-9]+ passed' "$OUT/conf.txt" || tail -1 "$OUT/conf.txt")

bench() {  # $1: label, rest: env prefix
  local label=$1; shift
  for i in 1 2; do
    env "$@" "$GBX" bench emulator --device cuda --envs 16384 --frames 240 2>/dev/null \
      | tail -1 > "$OUT/bench_${label}_$i.json"
  done
}
mkdir -p "$OUT/base"
git archive "$BASE" plugins/env_gameboy/src core/src | tar -x -C "$OUT/base"
base_src="$OUT/base/plugins/env_gameboy/src:$OUT/base/core/src"
bench before PYTHONPATH="$base_src"
bench after PYTHONPATH=

fps() {
  "$PY" - "$@" <<'EOF'
import json, sys
vals = [json.loads(open(p).read())["steady_frames_per_s"] for p in sys.argv[1:]]
print(f"{max(vals):,.0f}")
EOF
}
echo
echo "| check | result |"
echo "|---|---|"
echo "| isolation tests [cuda] (2 expected to pass) | $iso |"
echo "| conformance --device cuda | $conf |"
echo "| bench emulator cuda 16384 envs, before ($BASE), best of 2, frames/s | $(fps "$OUT"/bench_before_*.json) |"
echo "| bench emulator cuda 16384 envs, after, best of 2, frames/s | $(fps "$OUT"/bench_after_*.json) |"
echo "(logs in $OUT)"
