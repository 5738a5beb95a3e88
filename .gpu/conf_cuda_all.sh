#!/usr/bin/env bash
# GPU check: every shared conformance ROM on CUDA in ONE `gbx gameboy conformance --device
# cuda --json` call (all ROMs at once, one Warp stream each), next to a `--device cpu` run
# of the same ROMs on this machine's CPU; then the CUDA tests of the PPU changes (the
# line-153 LY=LYC sweep, the OAM read/write sweep before mode 3, CPU vs CUDA equality,
# savestate bounds) and the CUDA kernel's recorded PTX digest.
#
# Prints one row per ROM (CPU result/frames, CUDA result/frames, CUDA detail), the wall
# time of each step, and the line
#   "CUDA N/117 pass; equal to CPU column: ..."
# where "equal" means result, frames at the verdict and detail equal to the CPU run's (and
# the result equal to the CPU column of docs/emulator.md when the CPU run did not finish).
# Run from the repository root on a GPU machine: python3 with gbx importable (warp on
# PYTHONPATH, no .venv needed), GBX_TESTROMS set to the shared test ROM folder. Every step
# runs under `timeout`; the whole script stays under about 8 minutes.
set -u
PY="${PYTHON:-python3}"
if [ -z "${GBX_TESTROMS:-}" ] || [ ! -d "$GBX_TESTROMS" ]; then
  echo "set GBX_TESTROMS to the shared test ROM folder (got '${GBX_TESTROMS:-}')" >&2
  exit 2
fi
export GBX_TESTROMS
T0=$(date +%s)
WORK=$(mktemp -d)
now() { echo $(( $(date +%s) - T0 )); }

s=$(date +%s)
timeout 60 "$PY" -m gbx gameboy conformance --device cpu --json --quiet > "$WORK/cpu.json" 2> "$WORK/cpu.err"
echo "cpu run: rc=$? $(( $(date +%s) - s )) s"
s=$(date +%s)
timeout 270 "$PY" -m gbx gameboy conformance --device cuda --json --quiet > "$WORK/cuda.json" 2> "$WORK/cuda.err"
rc=$?
CUDA_S=$(( $(date +%s) - s ))
echo "cuda run (every ROM in one call): rc=$rc ${CUDA_S} s"
[ $rc -ne 0 ] && tail -5 "$WORK/cuda.err"

(
"$PY" - "$WORK/cpu.json" "$WORK/cuda.json" docs/emulator.md "$CUDA_S" <<'PY'
import json
import sys


def load(path):
    try:
        return {r["rom"]: r for r in json.load(open(path))}
    except (OSError, ValueError):
        return {}


cpu, cuda = load(sys.argv[1]), load(sys.argv[2])
lines = open(sys.argv[3]).read().splitlines()
start = lines.index("| ROM | CPU | CUDA |")
docs = {}
for line in lines[start + 2:]:
    if not line.startswith("|"):
        break
    rom, c, _ = (x.strip() for x in line.strip("|").split("|"))
    docs[rom] = c
print(f"{'ROM':56s} {'cpu':5s} {'frm':>5s} {'cuda':7s} {'frm':>5s}  cuda detail")
for rom in docs:
    c = cpu.get(rom, {}).get("cpu", {})
    g = cuda.get(rom, {}).get("cuda", {})
    print(f"{rom:56s} {c.get('result', '-'):5s} {c.get('frames', '-'):>5} "
          f"{g.get('result', 'missing'):7s} {g.get('frames', '-'):>5}  {g.get('detail', '')[:60]}")
passed = sum(cuda.get(r, {}).get("cuda", {}).get("result") == "pass" for r in docs)
frames = sum(cuda.get(r, {}).get("cuda", {}).get("frames", 0) for r in docs)
print(f"CUDA frames run: {frames} in {sys.argv[4]} s (all ROMs together)")
differ = []
missing = [rom for rom in docs if rom not in cuda]
if missing:
    differ.append(f"{len(missing)} ROMs without a CUDA result ({', '.join(missing[:3])}, ...)")
for rom, want in docs.items():
    g = cuda.get(rom, {}).get("cuda")
    c = cpu.get(rom, {}).get("cpu")
    if g is None:
        continue
    elif c is not None and (g["result"], g["frames"], g["detail"]) != (
            c["result"], c["frames"], c["detail"]):
        differ.append(f"{rom} (cuda {g['result']}/{g['frames']} cpu {c['result']}/{c['frames']})")
    elif c is None and g["result"] != ("pass" if want == "pass" else "FAIL"):
        differ.append(f"{rom} (cuda {g['result']}, docs CPU column {want})")
basis = "CPU run (result, frames, detail)" if len(cpu) == len(docs) else "docs CPU column"
verdict = "yes" if not differ else "NO: " + "; ".join(differ)
print(f"CUDA {passed}/{len(docs)} pass; equal to CPU column: {verdict} [vs {basis}]")
PY
) | tee "$WORK/table.txt"

# The CUDA tests of the PPU changes, then the CUDA variant's PTX against the recorded
# digest.
s=$(date +%s)
TS=plugins/env_gameboy/tests
timeout 120 "$PY" -m pytest -q -p no:cacheprovider -m "cuda or not slow" -k cuda \
  $TS/test_ppu_quirks.py $TS/test_kernel_variants.py $TS/test_isolation.py 2>&1 | tail -3
timeout 40 "$PY" -m pytest -q -p no:cacheprovider -m slow \
  "$TS/test_kernel_variants.py::test_cuda_variant_ptx_is_the_recorded_one" 2>&1 | tail -1
echo "tests: $(( $(date +%s) - s )) s; total $(now) s"
tail -1 "$WORK/table.txt"
rm -rf "$WORK"
