#!/usr/bin/env bash
# GPU check of the PPU/DMA edge cases, the blank LCD screens and the lockstep: the
# conformance ROMs these touch on CUDA next to the CPU (every CUDA result must equal the
# CPU's: all pass), then the CUDA variants of the changed tests (micro-ROM sweeps, CUDA vs
# CPU equality, the lockstep on CUDA), then 10,000 frames of lockstep with PyBoy on CUDA.
# FULL=1 runs every shared ROM on both devices (the
# CUDA column of docs/emulator.md). Run from the repository root on a machine with a GPU;
# prints a short table.
set -u
PY="${PYTHON:-python}"
if [ -z "${GBX_TESTROMS:-}" ]; then
  for d in ../shared/testroms shared/testroms; do
    if [ -d "$d" ]; then export GBX_TESTROMS="$d"; break; fi
  done
fi
echo "test ROMs: ${GBX_TESTROMS:-not found}"
NAMES=(mooneye/acceptance/ppu/ oam_dma di_timing intr_timing halt_ime dmg-acid2 sprite_priority
       flappyboy lcdon oam_bug)
if [ "${FULL:-0}" = "1" ]; then NAMES=(); fi
json=$(mktemp)
"$PY" -c 'from gbx.cli import main; main()' gameboy conformance --device all --quiet --json \
  "${NAMES[@]}" > "$json"
"$PY" - "$json" <<'PY'
import json
import sys

rows = json.load(open(sys.argv[1]))
print(f"{'ROM':58s} {'cpu':5s} {'cuda':7s} frames  cuda detail")
for r in rows:
    c, g = r["cpu"], r["cuda"]
    print(f"{r['rom']:58s} {c['result']:5s} {g['result']:7s} {g['frames']:>6}  {g['detail']}")
differ = [r["rom"] for r in rows if r["cuda"]["result"] != r["cpu"]["result"]]
passed = sum(r["cuda"]["result"] == "pass" for r in rows)
print(f"CUDA {passed}/{len(rows)} pass; CUDA == CPU on every ROM: {not differ} {differ or ''}")
PY
T=plugins/env_gameboy/tests
"$PY" -m pytest -q -p no:cacheprovider -m "cuda or not slow" -k "cuda" \
  $T/test_ppu_quirks.py $T/test_cpu_control.py $T/test_dma_edges.py $T/test_machine.py \
  $T/test_acid2.py $T/test_isolation.py $T/test_lockstep.py $T/test_oam_bug.py 2>&1 | tail -3
# The lockstep with PyBoy on CUDA (the CPU's result: every compared screen equal).
for rom in plugins/env_gameboy/src/gbx_gameboy/roms/gbx_quest/gbx_quest.gb \
           "${GBX_TESTROMS:-../shared/testroms}/games/flappyboy/flappyboy.gb"; do
  [ -f "$rom" ] || continue
  out=$("$PY" -c 'from gbx.cli import main; main()' gameboy lockstep "$rom" --device cuda 2>&1)
  echo "$out" | tail -1 | "$PY" -c "
import json, sys
line = sys.stdin.read().strip()
try:
    d = json.loads(line)
    print(f\"lockstep cuda {d['rom'].rsplit('/', 1)[-1]}: {d['equal']}/{d['checks']} screens equal\")
except ValueError:
    print(f'lockstep cuda $(basename "$rom"): not run ({line})')
"
done
