"""torch's process-wide numerics settings for the span of an update: the float32 matmul
precision (``algo.matmul_precision``) and cuDNN's algorithm search
(``algo.cudnn_benchmark``), and the convolutions' dtype (``algo.conv_dtype``).

torch keeps the first two per process; the trainer sets them around its own work and puts
the previous values back, so a Dreamer run leaves the rest of the process (another
algorithm's run in the same process, the tests) as it found it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

PRECISIONS = ("highest", "high", "medium")
CONV_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@contextlib.contextmanager
def matmul_precision(value: str) -> Iterator[None]:
    """float32 matmuls at ``value`` inside the block: ``highest`` (float32), ``high``
    (TF32 tensor cores on CUDA) or ``medium`` (bfloat16 internally where supported)."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@contextlib.contextmanager
def cudnn_benchmark(value: bool) -> Iterator[None]:
    """``torch.backends.cudnn.benchmark`` at ``value`` inside the block: with it, cuDNN
    times its algorithms for each new convolution shape once and keeps the fastest."""
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = value
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before


@contextlib.contextmanager
def update_numerics(precision: str, benchmark: bool) -> Iterator[None]:
    """Both process-wide settings of an update (:func:`matmul_precision`,
    :func:`cudnn_benchmark`)."""
    with matmul_precision(precision), cudnn_benchmark(benchmark):
        yield


def conv_autocast(device: torch.device, dtype: torch.dtype) -> contextlib.AbstractContextManager[
        object]:
    """The convolutions of the frame encoder and decoder at ``dtype``: an autocast region
    (float32: none). Autocast keeps the normalisation layers in float32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
