#!/usr/bin/env bash
# GPU check of the OAM corruption bug and the first line after LCD on: the oam_bug and
# PPU conformance ROMs on CUDA (expected: every ROM as on the CPU, i.e. all pass but
# blargg/oam_bug/rom_singles/7-timing_effect), then the micro-ROM tests with their CUDA
# test (the sweeps on CUDA equal the CPU's bit for bit). Run from the repository root on a
# machine with a GPU; prints a short table. DEVICE=cpu runs the same on the CPU.
set -u
DEVICE="${DEVICE:-cuda}"
PY="${PYTHON:-python}"
if [ -z "${GBX_TESTROMS:-}" ]; then
  for d in ../shared/testroms shared/testroms; do
    if [ -d "$d" ]; then export GBX_TESTROMS="$d"; break; fi
  done
fi
echo "test ROMs: ${GBX_TESTROMS:-not found}   device: $DEVICE"
json=$(mktemp)
"$PY" -c 'from gbx.cli import main; main()' gameboy conformance --device "$DEVICE" --quiet \
  --json oam_bug ppu/ > "$json"
"$PY" - "$json" "$DEVICE" <<'PY'
import json
import sys

rows = json.load(open(sys.argv[1]))
print(f"{'ROM':58s} {sys.argv[2]:5s} {'frames':>6}  detail")
for r in rows:
    verdict = "pass" if r["passed"] else "FAIL"
    print(f"{r['rom']:58s} {verdict:5s} {r['frames']:>6}  {r['detail']}")
bad = [r["rom"] for r in rows if not r["passed"]]
ok = bad == ["blargg/oam_bug/rom_singles/7-timing_effect"]
print(f"{len(rows) - len(bad)}/{len(rows)} pass; as expected: {ok}")
PY
"$PY" -m pytest -q -p no:cacheprovider plugins/env_gameboy/tests/test_oam_bug.py 2>&1 | tail -3
