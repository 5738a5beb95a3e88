#!/usr/bin/env bash
# ptxas -v figures of the CUDA run kernel for several revisions, no GPU needed.
#
#   .gpu/ptxas_history.sh 7966aa3 80c2b36 main HEAD      # revisions, or "." for the work tree
#   PTX_DIR=/tmp/ptx .gpu/ptxas_history.sh main          # also keep each revision's PTX there
#
# Each revision's plugins/env_gameboy/src and core/src are git-archived into /tmp and its
# run kernel compiled to sm_90 PTX with that tree on PYTHONPATH (Warp's NVRTC, names without
# hashes, as gbx_gameboy.kernel_digest does); this tree's kernel_digest.run_ptxas then runs
# ptxas -v on it (and nvdisasm, where found, for the always-run loop path: SASS
# instructions, local loads, local stores). One table row per revision. Needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
work=$(mktemp -d /tmp/ptxas-history.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "| revision | registers | stack frame | spill stores | spill loads | loop path | PTX sha256 (12) |"
echo "|---|---:|---:|---:|---:|---|---|"
for rev in "$@"; do
  if [ "$rev" = . ]; then tree=$PWD; label="work tree"
  else
    tree=$work/$rev; mkdir -p "$tree"
    git archive --format=tar "$rev" plugins/env_gameboy/src core/src | tar -x -C "$tree"
    label="$(git log -1 --format='%h %s' "$rev" | cut -c1-60)"
  fi
  ptx=${PTX_DIR:-$work}/${rev//\//_}.ptx
  mkdir -p "$(dirname "$ptx")"
  env -u GBX_GAMEBOY_CUDA_MAX_REGISTERS PYTHONPATH="$tree/plugins/env_gameboy/src:$tree/core/src" \
    "$PY" - "$ptx" 2>>"$work/stderr.log" <<'PYEOF'
import sys, tempfile
from pathlib import Path
from gbx_gameboy.cpu import run_kernel
from gbx_gameboy.warp_setup import wp
wp.init()
module = run_kernel.module
with tempfile.TemporaryDirectory() as tmp:
    paths = wp.compile_aot_module(module, arch=90, module_dir=tmp, use_ptx=True, strip_hash=True)
    text = Path([p for p in paths if str(p).endswith(".ptx")][0]).read_text()
Path(sys.argv[1]).write_text(text)
PYEOF
  PYTHONPATH="$PWD/plugins/env_gameboy/src:$PWD/core/src" "$PY" - "$ptx" "$label" <<'PYEOF'
import hashlib, sys
from pathlib import Path
from gbx_gameboy.kernel_digest import RUN_KERNEL_ENTRY, run_ptxas
ptx = Path(sys.argv[1]).read_text()
report = run_ptxas(ptx)
f = report.functions[RUN_KERNEL_ENTRY]
p = report.loop_path
path = f"{p.instructions}, {p.local_loads}, {p.local_stores}" if p else "no nvdisasm"
digest = hashlib.sha256(ptx.encode()).hexdigest()[:12]
print(f"| {sys.argv[2]} | {f.registers} | {f.stack_frame} | {f.spill_stores} | {f.spill_loads}"
      f" | {path} | {digest} |")
PYEOF
done
