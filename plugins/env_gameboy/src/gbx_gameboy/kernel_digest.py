"""Digests of the CUDA run kernel's compiled form, to show that CPU-only code paths leave it
unchanged.

The run kernel is generated per device (``cpu.HOST``): the CPU variant adds
paths inside ``if wp.static(host):`` blocks. The CUDA variant's PTX, compiled through
Warp's NVRTC with the content hashes stripped from the names (so the digest depends on
the code, not on the hash of the Python source), is what the GPU runs after ptxas; its
SHA-256 is recorded in ``CUDA_PTX_SHA256``. Compiling needs no GPU (only NVRTC, which Warp
ships). A deliberate change to the GPU kernel updates the recorded digest in the same
commit (``gbx gameboy kernel-digest`` prints it).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

# The architecture the digest is taken for (H100/H200).
DIGEST_ARCH = 90
# SHA-256 of the CUDA run kernel's sm_90 PTX (strip_hash=True), warp 1.19.0.
CUDA_PTX_SHA256 = "ddffc7315e5b58d761bc4dce3feb39a1ffa9bf1aab1bcf58928313cf345de7e3"


def cuda_ptx(arch: int = DIGEST_ARCH) -> str:
    """The CUDA variant's module compiled to PTX for ``arch``, names without hashes.

    Compiled into a fresh directory, so neither the kernel cache nor an earlier build is
    read. Kernel-building options taken from the environment at import
    (``GBX_GAMEBOY_PHASE_CLOCKS``, ``GBX_GAMEBOY_CHECK_BOUNDS``, a register cap) change it.
    """
    from gbx_gameboy.cpu import run_kernel
    from gbx_gameboy.warp_setup import wp

    wp.init()
    module = run_kernel.module
    before = module.options.get("strip_hash")
    with tempfile.TemporaryDirectory(prefix="gbx-ptx-") as tmp:
        try:
            paths = wp.compile_aot_module(module, arch=arch, module_dir=tmp, use_ptx=True,
                                          strip_hash=True)
        finally:
            module.options["strip_hash"] = before  # compile_aot_module sets it on the module
        ptx = [p for p in paths if str(p).endswith(".ptx")]
        if len(ptx) != 1:
            raise RuntimeError(f"expected one PTX file from Warp, got {paths}")
        return Path(ptx[0]).read_text()


def ptx_digest(arch: int = DIGEST_ARCH) -> str:
    """SHA-256 (hex) of :func:`cuda_ptx`."""
    return hashlib.sha256(cuda_ptx(arch).encode()).hexdigest()
