"""``algo.matmul_precision``: the updates run at the configured float32 matmul precision
and leave the process's own setting as it was."""

from __future__ import annotations

import pytest
import torch
from fakes import dot_context, small_cfg

from gbx_algo_dreamer.precision import matmul_precision
from gbx_algo_dreamer.trainer import DreamerTrainer


def test_the_block_sets_the_precision_and_puts_the_previous_one_back():
    assert torch.get_float32_matmul_precision() == "highest"
    with matmul_precision("medium"):
        assert torch.get_float32_matmul_precision() == "medium"
    assert torch.get_float32_matmul_precision() == "highest"
    with pytest.raises(RuntimeError), matmul_precision("high"):
        raise RuntimeError("an update that fails")
    assert torch.get_float32_matmul_precision() == "highest"


@pytest.mark.parametrize("precision", ["high", "highest"])
def test_updates_run_at_the_configured_precision(tmp_path, precision):
    tr = DreamerTrainer(small_cfg(matmul_precision=precision), dot_context(tmp_path))
    seen: list[str] = []
    loss = tr.wm.loss

    def spy(*args, **kwargs):
        seen.append(torch.get_float32_matmul_precision())
        return loss(*args, **kwargs)

    tr.wm.loss = spy  # type: ignore[method-assign]
    tr.ctx.run(tr)
    assert tr.opt_steps >= 1 and seen == [precision] * tr.opt_steps
    assert torch.get_float32_matmul_precision() == "highest"


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="matmul_precision"):
        small_cfg(matmul_precision="tf32")

