"""``algo.matmul_precision``: the updates run at the configured float32 matmul precision
and leave the process's own setting as it was."""

from __future__ import annotations

import pytest
import torch
from fakes import dot_context

from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.precision import matmul_precision
from gbx_algo_dreamer.trainer import DreamerTrainer


def _cfg(**kw) -> DreamerConfig:
    base = dict(size="tiny", num_envs=4, batch_size=4, batch_length=8, train_ratio=16.0,
                replay_capacity=512, learning_starts=32, record_every=8, total_env_steps=48)
    base.update(kw)
    return DreamerConfig(**base)


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
    tr = DreamerTrainer(_cfg(matmul_precision=precision), dot_context(tmp_path))
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
        _cfg(matmul_precision="tf32")
