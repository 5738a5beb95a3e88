#!/usr/bin/env bash
# A/B of the emulator kernel on one GPU: the base tree (.gpu/base_rev) against this tree.
#
#   .gpu/emu_ab.sh                 # run in the project root on the GPU machine (< 8 min)
#   ENVS=1,64,1024 FRAMES=48 .gpu/emu_ab.sh   # a shorter curve
#
# For each batch size the two kernels run back to back (base, then this tree), each in its
# own process: `gbx bench emulator --device cuda --rom flappyboy.gb --envs N` (random
# buttons per env and step, WARMUP warm-up steps, FRAMES timed frames per env). Then the
# run kernel's registers, local memory (stack + spills) and blocks per SM of each build,
# from the CUDA driver (cuFuncGetAttribute / cuOccupancy...), plus `cuobjdump
# --dump-resource-usage` of Warp's cached cubin where cuobjdump exists.
#
# The base tree: `git archive` of the revision in .gpu/base_rev when .git is here; without
# .git, the tarball .gpu/base_src.tar.gz that .gpu/make_base_tar.sh writes (run it in the
# checkout, then carry it: carry [".gpu/base_src.tar.gz"]; do not commit the tarball).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
ENVS=${ENVS:-1,64,1024,4096,16384,65536}
FRAMES=${FRAMES:-120}
WARMUP=${WARMUP:-10}
DEVICE=${DEVICE:-cuda}  # cpu: a dry run of the script without a GPU
# MAXREG=N: build this tree's run kernel with __maxnreg__ N (GBX_GAMEBOY_CUDA_MAX_REGISTERS),
# e.g. 128 or 168, to see whether more resident warps per SM beat the extra spills
MAXREG=${MAXREG:-}
ROM=${ROM:-}
for cand in "$ROM" shared/testroms/games/flappyboy/flappyboy.gb \
    ../shared/testroms/games/flappyboy/flappyboy.gb "${GBX_TESTROMS:-/nonexistent}/games/flappyboy/flappyboy.gb"; do
  if [ -n "$cand" ] && [ -f "$cand" ]; then ROM=$(realpath "$cand"); break; fi
done
[ -f "$ROM" ] || { echo "emu_ab: flappyboy.gb not found; set ROM=/path/to/flappyboy.gb" >&2; exit 2; }

rev=$(tr -d '[:space:]' < .gpu/base_rev)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/base"
if git rev-parse --git-dir >/dev/null 2>&1 && git cat-file -e "$rev^{commit}" 2>/dev/null; then
  git archive --format=tar "$rev" plugins/env_gameboy/src core/src | tar -x -C "$work/base"
  echo "base: $rev (git archive)"
elif [ -f .gpu/base_src.tar.gz ]; then
  tar -xzf .gpu/base_src.tar.gz -C "$work/base"
  echo "base: $(cat "$work/base/BASE_REV" 2>/dev/null || echo '?') (.gpu/base_src.tar.gz)"
else
  echo "emu_ab: no .git here and no .gpu/base_src.tar.gz; run .gpu/make_base_tar.sh in the checkout first" >&2
  exit 2
fi
path_of() { # the PYTHONPATH that selects a tree's emulator package
  if [ "$1" = base ]; then echo "$work/base/plugins/env_gameboy/src:$work/base/core/src"
  else echo "$PWD/plugins/env_gameboy/src:$PWD/core/src"; fi
}

reg_env() { # the register cap applies to this tree only
  if [ "$1" = this ] && [ -n "$MAXREG" ]; then echo "GBX_GAMEBOY_CUDA_MAX_REGISTERS=$MAXREG"
  else echo "GBX_GAMEBOY_CUDA_MAX_REGISTERS="; fi
}

bench() { # tree envs -> one JSON line (the bench command of that tree, called directly)
  env "$(reg_env "$1")" PYTHONPATH="$(path_of "$1")" timeout 300 "$PY" -c '
import sys
from gbx_gameboy.bench import emulator_bench
emulator_bench(sys.argv[1:])' --device "$DEVICE" --rom "$ROM" --envs "$2" --frames "$FRAMES" \
    --warmup-steps "$WARMUP" 2>>"$work/stderr.log" | tail -n 1
}

[ -n "$MAXREG" ] && echo "this tree built with GBX_GAMEBOY_CUDA_MAX_REGISTERS=$MAXREG"
echo "| envs | base env-frames/s (steady) | this tree (steady) | this / base | base fps/env | this fps/env |"
echo "|---:|---:|---:|---:|---:|---:|"
IFS=, read -r -a sizes <<< "$ENVS"
for n in "${sizes[@]}"; do
  a=$(bench base "$n" || true)
  b=$(bench this "$n" || true)
  echo "$a" >> "$work/base.jsonl"; echo "$b" >> "$work/this.jsonl"
  "$PY" - "$n" "$a" "$b" <<'PYEOF'
import json, sys
n, a, b = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def rec(s):
    try:
        return json.loads(s)
    except ValueError:
        return None
ra, rb = rec(a), rec(b)
def cell(r):
    return f"{r['frames_per_s']:,.0f} ({r['steady_frames_per_s']:,.0f})" if r else "failed"
ratio = f"{rb['frames_per_s'] / ra['frames_per_s']:.2f}" if ra and rb else "-"
per = lambda r: f"{r['frames_per_s'] / n:,.1f}" if r else "-"
print(f"| {n:,} | {cell(ra)} | {cell(rb)} | {ratio} | {per(ra)} | {per(rb)} |")
PYEOF
done

echo
echo "| build | registers/thread | local bytes/thread (stack+spill) | 32-thread blocks/SM | cuobjdump |"
echo "|---|---:|---:|---:|---|"
for tree in base this; do
  env "$(reg_env "$tree")" PYTHONPATH="$(path_of "$tree")" "$PY" - "$tree" "$ROM" 2>>"$work/stderr.log" <<'PYEOF' || echo "| $tree | query failed (see stderr) | | | |"
import ctypes, glob, os, shutil, subprocess, sys
from gbx_gameboy.warp_setup import wp
from gbx_gameboy.cpu import run_kernel
from gbx_gameboy.machine import GameBoyBatch
tree, rom = sys.argv[1], sys.argv[2]
batch = GameBoyBatch(rom, 32, "cuda")
batch.compile()
dev = wp.get_device("cuda")
func = ctypes.c_void_p(run_kernel.module.get_kernel_hooks(run_kernel, dev).forward)
cuda = ctypes.CDLL("libcuda.so.1")
def attr(code):  # CU_FUNC_ATTRIBUTE_*: 4 NUM_REGS, 3 LOCAL_SIZE_BYTES
    v = ctypes.c_int()
    with wp.ScopedDevice(dev):
        rc = cuda.cuFuncGetAttribute(ctypes.byref(v), ctypes.c_int(code), func)
    return v.value if rc == 0 else f"rc={rc}"
blocks = ctypes.c_int()
with wp.ScopedDevice(dev):
    rc = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(blocks), func, ctypes.c_int(32), ctypes.c_size_t(0))
obj = "cuobjdump not found"
tool = shutil.which("cuobjdump")
cubins = sorted(glob.glob(os.path.join(wp.config.kernel_cache_dir, "**", "*gbx_gameboy.cpu*.cubin"),
                          recursive=True), key=os.path.getmtime)
if tool and cubins:
    out = subprocess.run([tool, "--dump-resource-usage", cubins[-1]], capture_output=True,
                         text=True).stdout.splitlines()
    # "Function <name>:" then the resource line (REG, STACK, SHARED, LOCAL, ...)
    hits = [out[i + 1].strip() for i, ln in enumerate(out[:-1])
            if "Function" in ln and "run_kernel" in ln]
    obj = hits[0] if hits else "no run_kernel entry in the cubin"
elif tool:
    obj = "no cached cubin (PTX JIT)"
print(f"| {tree} | {attr(4)} | {attr(3)} | {blocks.value if rc == 0 else f'rc={rc}'} | {obj} |")
PYEOF
done
echo
echo "raw records: base"; cat "$work/base.jsonl"
echo "raw records: this tree"; cat "$work/this.jsonl"
if [ -s "$work/stderr.log" ]; then echo "stderr (last 15 lines):"; tail -n 15 "$work/stderr.log"; fi
