"""The device memory check: the byte formatting, the one-line refusal, free memory."""

from __future__ import annotations

import pytest
import torch

from gbx import memory
from gbx.memory import MemoryBudgetError, check_memory, format_bytes


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 1024**2) == "3.0 MiB"
    assert format_bytes(5 * 1024**4) == "5120.0 GiB"


def test_check_memory_fits_refuses_and_handles_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1000 * 1024)
    assert check_memory(100 * 1024, cpu, algo="x", fix="lower y") == (
        "needs ~100.0 KiB on cpu, 1000.0 KiB free")
    with pytest.raises(MemoryBudgetError) as info:
        check_memory(950 * 1024, cpu, algo="a2c", fix="the window will not fit; lower z")
    assert str(info.value) == (
        "a2c needs ~950.0 KiB on cpu, 1000.0 KiB free: the window will not fit; lower z")
    monkeypatch.setattr(memory, "available_bytes", lambda device: None)
    assert "free memory unknown" in check_memory(10**15, cpu, algo="x", fix="y")


def test_available_bytes_on_cpu_is_positive() -> None:
    free = memory.available_bytes(torch.device("cpu"))
    assert free is None or free > 0
