"""``algo.matmul_precision``: torch's float32 matmul precision for the span of an update.

torch keeps the setting per process; the trainer sets it around its own work and puts the
previous value back, so a Dreamer run leaves the rest of the process (another algorithm's
run in the same process, the tests) at the precision it had.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

PRECISIONS = ("highest", "high", "medium")


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
