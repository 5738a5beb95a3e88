#!/usr/bin/env bash
# On a GPU box, from the repository root after `make setup`:
#   1. the CUDA run kernel's sm_90 PTX is the recorded one (the CPU variant's code paths
#      did not change what the GPU runs): gbx gameboy kernel-digest + its slow test;
#   2. CPU-vs-CUDA bit-for-bit equality: the CPU device now runs the CPU variant, CUDA the
#      CUDA variant (test_machine::test_cuda_matches_cpu, test_isolation, acid2 on both,
#      the variant tests, the CPU thread tests);
#   3. a short A/B of env-frames/s on the GPU (same kernel expected: ratio ~1.00).
# Prints a short table; exit status non-zero if any check fails.
set -u
cd "$(dirname "$0")/.."
PY=.venv/bin/python
GBX=.venv/bin/gbx
export GBX_TESTROMS="${GBX_TESTROMS:-$(cd .. && pwd)/shared/testroms}"
status=0
row() { printf '%-58s %s\n' "$1" "$2"; }

digest=$($GBX gameboy kernel-digest 2>/dev/null); rc=$?
row "CUDA run kernel PTX (sm_90) = recorded digest" "$([ $rc = 0 ] && echo PASS || echo "FAIL $digest")"
[ $rc = 0 ] || status=1

$PY -m pytest -q -p no:cacheprovider \
  "plugins/env_gameboy/tests/test_kernel_variants.py::test_cuda_variant_ptx_is_the_recorded_one" \
  -m "slow or not slow" > /tmp/cpu_variant_ptx.log 2>&1 || status=1
$PY -m pytest -q -p no:cacheprovider \
  plugins/env_gameboy/tests/test_kernel_variants.py \
  plugins/env_gameboy/tests/test_cpu_threads.py \
  "plugins/env_gameboy/tests/test_machine.py::test_cuda_matches_cpu" \
  plugins/env_gameboy/tests/test_isolation.py \
  plugins/env_gameboy/tests/test_acid2.py > /tmp/cpu_variant_pytest.log 2>&1; rc=$?
row "CPU-vs-CUDA equality + variant tests (pytest)" \
  "$([ $rc = 0 ] && echo PASS || echo FAIL) ($(tail -1 /tmp/cpu_variant_pytest.log))"
[ $rc = 0 ] || status=1
grep -E "SKIPPED|FAILED" /tmp/cpu_variant_pytest.log | head -20

$GBX gameboy conformance --device cuda --fast --quiet > /tmp/cpu_variant_conf_cuda.txt 2>&1; rc=$?
row "conformance --fast on CUDA" "$([ $rc = 0 ] && echo PASS || echo FAIL) ($(tail -1 /tmp/cpu_variant_conf_cuda.txt))"

ROM="$GBX_TESTROMS/games/flappyboy/flappyboy.gb"
if [ -f "$ROM" ]; then
  for n in 1024 16384; do
    $GBX bench emulator --device cuda --rom "$ROM" --envs $n --frames 240 2>/dev/null \
      | $PY -c "import json,sys; d=json.loads(sys.stdin.read()); print(f'{d[\"envs\"]:>6} envs: {d[\"frames_per_s\"]:,.0f} env-frames/s (steady {d[\"steady_frames_per_s\"]:,.0f}), kernel {d[\"kernel\"]}')"
  done
fi
exit $status
