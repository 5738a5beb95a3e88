"""Digests of the CUDA run kernel's compiled form, to show that CPU-only code paths leave it
unchanged.

The run kernel is generated per device (``cpu.HOST``): the CPU variant adds paths inside
``if wp.static(host):`` blocks. The CUDA variant's PTX, compiled through Warp's NVRTC with
the content hashes stripped from the names (so the digest depends on the code, not on the
hash of the Python source), is what the GPU runs after ptxas; the SHA-256 of its
canonical form (:func:`canonical_ptx`) is recorded in ``CUDA_PTX_SHA256``. Compiling needs
no GPU (only NVRTC, which Warp ships). A deliberate change to the GPU kernel updates the
recorded digest in the same commit (``gbx gameboy kernel-digest`` prints it).

Where the CUDA toolkit's ``ptxas`` is installed, :func:`run_ptxas` assembles that PTX
and reads back what ``ptxas -v`` reports per function: registers, stack frame and spill
stores/loads, the figures the GPU driver's JIT arrives at for the same PTX
(``gbx gameboy kernel-digest --ptxas``); :func:`sass_with_lines` disassembles it with the
Python source line of each instruction (``gbx gameboy sass-lines``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gbx_gameboy.sass_path import LoopPath, loop_path

# The architecture the digest is taken for (H100/H200).
DIGEST_ARCH = 90
# SHA-256 of the CUDA run kernel's module as sm_90 PTX (strip_hash=True) in canonical form,
# warp 1.19.0: the run kernel and the kernels beside it (the drawing kernel among them).
CUDA_PTX_SHA256 = "397e4968443e13086a35039f99376fb762cedc89e1d5e57bd9bd11640373d6d8"


def cuda_ptx(arch: int = DIGEST_ARCH, variant: str = "cuda", lineinfo: bool = False) -> str:
    """The run kernel's module compiled to PTX for ``arch``, names without hashes:
    ``variant`` "cuda" (the CUDA variant, whose digest is recorded) or "cpu" (the CPU
    variant, which a GPU runs for small batches: ``machine.launch_plan``).

    Compiled into a fresh directory, so neither the kernel cache nor an earlier build is
    read. ``lineinfo`` adds the source lines (NVRTC's ``-lineinfo``: Warp's ``#line``
    directives name the Python lines), which leaves the code as it is. Kernel-building
    options taken from the environment at import (``GBX_GAMEBOY_PHASE_CLOCKS``,
    ``GBX_GAMEBOY_CHECK_BOUNDS``, a register cap) change it.
    """
    from gbx_gameboy.cpu import run_kernel, run_kernel_host
    from gbx_gameboy.warp_setup import wp

    if variant not in ("cuda", "cpu"):
        raise ValueError(f"variant must be cuda or cpu, got {variant!r}")
    wp.init()
    module = (run_kernel if variant == "cuda" else run_kernel_host).module
    before = module.options.get("strip_hash")
    lines_before = module.options.get("lineinfo", False)
    with tempfile.TemporaryDirectory(prefix="gbx-ptx-") as tmp:
        try:
            module.options["lineinfo"] = lineinfo
            paths = wp.compile_aot_module(module, arch=arch, module_dir=tmp, use_ptx=True,
                                          strip_hash=True)
        finally:
            module.options["strip_hash"] = before  # compile_aot_module sets it on the module
            module.options["lineinfo"] = lines_before
        ptx = [p for p in paths if str(p).endswith(".ptx")]
        if len(ptx) != 1:
            raise RuntimeError(f"expected one PTX file from Warp, got {paths}")
        return Path(ptx[0]).read_text()


# A top-level definition or declaration in PTX: an entry (after its ``.globl`` comment) or
# a device function.
_PTX_ITEM = re.compile(r"^(\s*// \.globl|\.visible |\.weak |\.extern |\.func |\.entry )")
# A basic block's label: $L__BB<function number>_<block number>.
_PTX_LABEL = re.compile(r"\$L__BB\d+_")
# A function's local-memory array, which NVVM numbers by the function's place as well.
_PTX_DEPOT = re.compile(r"__local_depot\d+")


def canonical_ptx(ptx: str) -> str:
    """``ptx`` with its kernels and device functions sorted and the function numbers taken
    out of block labels and local-memory arrays (``__local_depotN``): the form
    ``CUDA_PTX_SHA256`` is the digest of.

    Warp hands a module's kernels to NVRTC in the order of a weak set, which follows where
    the kernel objects happen to lie in memory, so a change anywhere in the Python source
    (a CPU-only path too) can reorder them; NVVM numbers each function's labels and its
    local array by its place. The canonical form is the same for the same code in any
    order."""
    text = _PTX_DEPOT.sub("__local_depot", _PTX_LABEL.sub("$L__BB_", ptx.replace("\0", "")))
    head: list[str] = []
    items: list[list[str]] = []
    for line in text.split("\n"):
        if _PTX_ITEM.match(line):
            # an entry's definition belongs with the .globl comment just before it
            if (items and len(items[-1]) <= 2 and items[-1][0].lstrip().startswith("// .globl")
                    and line.startswith((".visible", ".entry"))):
                items[-1].append(line)
            else:
                items.append([line])
        elif items:
            items[-1].append(line)
        else:
            head.append(line)
    # blank lines between items belong to none of them
    body = sorted("\n".join(item).strip("\n") for item in items)
    return "\n".join(head).rstrip("\n") + "\n\n" + "\n\n".join(body) + "\n"


def sha256_of_ptx(ptx: str) -> str:
    """SHA-256 (hex) of PTX text in canonical form (:func:`canonical_ptx`), as
    ``CUDA_PTX_SHA256`` records it."""
    return hashlib.sha256(canonical_ptx(ptx).encode()).hexdigest()


def ptx_digest(arch: int = DIGEST_ARCH) -> str:
    """SHA-256 (hex) of :func:`cuda_ptx`."""
    return sha256_of_ptx(cuda_ptx(arch))


# ---- ptxas's resource figures -------------------------------------------------------------

# The run kernel's entry functions in PTX compiled with strip_hash=True: the CUDA
# variant's, and the CPU variant's compiled for a GPU.
RUN_KERNEL_ENTRY = "run_kernel_cuda_kernel_forward"
RUN_KERNEL_HOST_ENTRY = "run_kernel_host_cuda_kernel_forward"


@dataclass(frozen=True)
class FunctionUsage:
    """What ``ptxas -v`` reports for one function (bytes per thread)."""

    name: str
    stack_frame: int
    spill_stores: int
    spill_loads: int
    registers: int | None  # entry functions only: a callee shares its caller's budget

    def to_json(self) -> dict[str, object]:
        return {"registers": self.registers, "stack_frame": self.stack_frame,
                "spill_stores": self.spill_stores, "spill_loads": self.spill_loads}


@dataclass(frozen=True)
class PtxasReport:
    """``ptxas -v`` of one PTX module: the figures per function, and how it was assembled."""

    functions: dict[str, FunctionUsage]
    ptxas_version: str
    ptx_version: str  # the PTX's .version, "9.4 as 9.0" when ptxas needed an older one
    loop_path: LoopPath | None = None  # the run loop's always-run path (needs nvdisasm)

    def to_json(self, entry: str = RUN_KERNEL_ENTRY) -> dict[str, object]:
        out: dict[str, object] = {"ptxas": self.ptxas_version, "ptx_version": self.ptx_version}
        out.update(self.functions[entry].to_json())
        out["loop_path"] = self.loop_path.to_json() if self.loop_path else None
        # out-of-line helpers that spill (their stack is inside the entry's frame)
        out["callees"] = {n: f.to_json() for n, f in sorted(self.functions.items())
                          if n != entry and f.registers is None
                          and (f.stack_frame or f.spill_stores or f.spill_loads)}
        return out


_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")
_VERSION = re.compile(r"Unsupported \.version (\S+); current version is '([^']+)'")
# A device function's C++ name: ..._cu_<8 hex digits><length><name>_0E<argument codes>
_MANGLED = re.compile(r"_cu_[0-9a-f]{8}(\d+)")


def short_name(symbol: str) -> str:
    """``rd_call`` for Warp's mangled name of the device function ``rd_call``."""
    m = _MANGLED.search(symbol)
    if not m:
        return symbol
    start = m.end()
    name = symbol[start:start + int(m.group(1))]
    return name[:-2] if name.endswith("_0") else name


def parse_ptxas(text: str) -> dict[str, FunctionUsage]:
    """The per-function figures in ``ptxas -v``'s output (its stderr)."""
    found: dict[str, FunctionUsage] = {}
    name = None
    for line in text.splitlines():
        if (m := _PROPS.search(line)) is not None:
            name = short_name(m.group(1))
        elif name is not None and (m := _FRAME.search(line)) is not None:
            stack, stores, loads = (int(v) for v in m.groups())
            found[name] = FunctionUsage(name, stack, stores, loads, None)
        elif name is not None and name in found and (m := _REGS.search(line)) is not None:
            f = found[name]
            found[name] = FunctionUsage(name, f.stack_frame, f.spill_stores, f.spill_loads,
                                        int(m.group(1)))
    return found


def find_cuda_tool(name: str, search_path: Sequence[str] | None = None) -> str | None:
    """A CUDA toolkit program (``ptxas``, ``nvdisasm``) on PATH, else under CUDA_HOME (or
    CUDA_PATH), else in one of NVIDIA's pip wheels of the toolkit (``nvidia-cuda-nvcc-cu12``
    ships ``ptxas``, ``nvidia-cuda-nvdisasm`` ships ``nvdisasm``: they unpack to
    ``site-packages/nvidia/<part>/bin/``, on no PATH); None when there is none.
    ``search_path``: the import path the wheels are looked for on (``sys.path``)."""
    found = shutil.which(name)
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    cand = Path(home, "bin", name) if home else None
    if cand is not None and cand.is_file():
        return str(cand)
    for entry in sys.path if search_path is None else search_path:
        for tool in sorted(Path(entry or ".").glob(f"nvidia/*/bin/{name}")):
            if tool.is_file() and os.access(tool, os.X_OK):
                return str(tool)
    return None


def find_ptxas() -> str | None:
    return find_cuda_tool("ptxas")


def run_ptxas(ptx: str, arch: int = DIGEST_ARCH, ptxas: str | None = None,
              nvdisasm: str | None = None, entry: str = RUN_KERNEL_ENTRY,
              with_loop_path: bool = True) -> PtxasReport:
    """Assemble ``ptx`` with ``ptxas -v -arch=sm_<arch>`` and parse its figures; where
    ``nvdisasm`` is given or found and ``with_loop_path``, also ``entry``'s always-run
    loop path (:mod:`gbx_gameboy.sass_path`, which reads the CUDA variant's loop) in the
    assembled code.

    NVRTC may write a newer PTX ISA version than the installed ptxas reads; when ptxas
    says so, the ``.version`` line is lowered to the one it names and the PTX assembled
    again (it fails if the code uses an instruction the older ISA lacks), and
    ``ptx_version`` says both.
    """
    tool = ptxas or find_ptxas()
    if tool is None:
        raise FileNotFoundError("ptxas not found: put the CUDA toolkit's bin on PATH")
    disasm = (nvdisasm or find_cuda_tool("nvdisasm")) if with_loop_path else None
    ptx = ptx.replace("\0", "")  # Warp's PTX text ends with the C string's NUL
    declared = re.search(r"^\.version (\S+)", ptx, re.M)
    version = declared.group(1) if declared else "?"
    banner = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    tool_version = (re.findall(r"release (\S+),", banner) or ["?"])[0]
    path = None
    with tempfile.TemporaryDirectory(prefix="gbx-ptxas-") as tmp:
        cubin = Path(tmp, "kernel.cubin")
        done, older = _assemble(tool, ptx, arch, cubin, ["-v"])
        if older:
            version = f"{version} as {older}"
        if disasm:
            sass = subprocess.run([disasm, "-c", str(cubin)], capture_output=True, text=True,
                                  check=True).stdout
            path = loop_path(sass, entry)
    return PtxasReport(parse_ptxas(done.stderr), tool_version, version, path)


def _assemble(tool: str, ptx: str, arch: int, cubin: Path,
              options: Sequence[str]) -> tuple[subprocess.CompletedProcess[str], str | None]:
    """Run ptxas on ``ptx`` into ``cubin``; when ptxas reads only an older PTX ISA, with
    the ``.version`` line lowered to the one it names (returned, else None)."""
    src = cubin.with_suffix(".ptx")
    older = None
    for _ in range(2):
        src.write_text(ptx)
        done = subprocess.run([tool, *options, f"-arch=sm_{arch}", str(src), "-o", str(cubin)],
                              capture_output=True, text=True)
        found = _VERSION.search(done.stderr)
        if done.returncode == 0 or found is None:
            break
        ptx = re.sub(r"^\.version \S+", f".version {found.group(2)}", ptx, count=1, flags=re.M)
        older = found.group(2)
    if done.returncode != 0:
        raise RuntimeError(f"ptxas failed: {done.stderr.strip().splitlines()[-1:]}")
    return done, older


def sass_with_lines(ptx: str, arch: int = DIGEST_ARCH) -> str:
    """``nvdisasm -c -gi`` of ``ptx`` assembled with ``ptxas -lineinfo``: the SASS with,
    before each instruction whose place changes, its source lines, innermost first
    (:mod:`gbx_gameboy.sass_lines` reads it). ``ptx`` should carry line information
    (``cuda_ptx(lineinfo=True)``)."""
    tool = find_ptxas()
    disasm = find_cuda_tool("nvdisasm")
    if tool is None or disasm is None:
        raise FileNotFoundError("ptxas and nvdisasm not found: put the CUDA toolkit's bin "
                                "on PATH, or pip install nvidia-cuda-nvcc-cu12 "
                                "nvidia-cuda-nvdisasm")
    ptx = ptx.replace("\0", "")
    with tempfile.TemporaryDirectory(prefix="gbx-ptxas-") as tmp:
        cubin = Path(tmp, "kernel.cubin")
        _assemble(tool, ptx, arch, cubin, ["-lineinfo"])
        return subprocess.run([disasm, "-c", "-gi", str(cubin)], capture_output=True,
                              text=True, check=True).stdout
