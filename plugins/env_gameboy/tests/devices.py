"""``DEVICES``: parametrize a test over the CPU and, where a GPU exists, CUDA."""

from __future__ import annotations

import pytest
import torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    ]),
]
