"""``algo.matmul_precision``, ``algo.cudnn_benchmark`` and ``algo.conv_dtype``: the
updates run with the configured numerics and leave the process's own settings as they
were."""

from __future__ import annotations

import pytest
import torch
from fakes import dot_context, small_cfg

from gbx_algo_dreamer.config import SIZES
from gbx_algo_dreamer.precision import matmul_precision, update_numerics
from gbx_algo_dreamer.trainer import DreamerTrainer
from gbx_algo_dreamer.world_model import WorldModel


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



def test_the_cudnn_search_is_set_for_the_block_and_put_back():
    before = torch.backends.cudnn.benchmark
    with update_numerics("high", not before):
        assert torch.backends.cudnn.benchmark is (not before)
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.backends.cudnn.benchmark is before
    assert torch.get_float32_matmul_precision() == "highest"


def test_updates_run_with_the_configured_cudnn_search(tmp_path):
    tr = DreamerTrainer(small_cfg(cudnn_benchmark=True), dot_context(tmp_path))
    seen: list[bool] = []
    loss = tr.wm.loss

    def spy(*args, **kwargs):
        seen.append(torch.backends.cudnn.benchmark)
        return loss(*args, **kwargs)

    tr.wm.loss = spy  # type: ignore[method-assign]
    tr.ctx.run(tr)
    assert tr.opt_steps >= 1 and seen == [True] * tr.opt_steps
    assert torch.backends.cudnn.benchmark is False


def _frames_model(conv_dtype: torch.dtype) -> WorldModel:
    torch.manual_seed(0)
    return WorldModel((1, 16, 16), 3, SIZES["tiny"], 0.01, 17, conv_dtype)


def test_bfloat16_convolutions_give_float32_outputs_near_the_float32_layers():
    """``algo.conv_dtype=bfloat16``: the encoder's and decoder's layers run in an autocast
    region; their outputs come back as float32 and stay within bfloat16's rounding of the
    float32 model's, and gradients reach every layer."""
    wide, narrow = _frames_model(torch.float32), _frames_model(torch.bfloat16)
    assert not any(p.dtype != torch.float32 for p in narrow.parameters())  # weights stay
    frames = torch.randint(0, 4, (6, 1, 16, 16), generator=torch.Generator().manual_seed(1))
    frames = frames.to(torch.uint8)
    embed_wide, embed_narrow = wide.embed(frames), narrow.embed(frames)
    assert embed_narrow.dtype == torch.float32
    assert not torch.equal(embed_narrow, embed_wide)  # the convolutions did run in bfloat16
    torch.testing.assert_close(embed_narrow, embed_wide, rtol=0.05, atol=0.05)
    feat = torch.randn(6, narrow.rssm.feat_dim, generator=torch.Generator().manual_seed(2))
    logits_wide, logits_narrow = wide.decode_logits(feat), narrow.decode_logits(feat)
    assert logits_narrow.dtype == torch.float32 and logits_narrow.shape == logits_wide.shape
    torch.testing.assert_close(logits_narrow, logits_wide, rtol=0.05, atol=0.05)
    (embed_narrow.square().sum() + logits_narrow.square().sum()).backward()
    for name, p in [*narrow.encoder.named_parameters(), *narrow.decoder.named_parameters()]:
        assert p.grad is not None and p.grad.dtype == torch.float32, name
        assert p.grad.abs().sum() > 0, name


def test_an_unknown_conv_dtype_is_refused():
    with pytest.raises(ValueError, match="conv_dtype"):
        small_cfg(conv_dtype="float16")


def test_a_run_with_bfloat16_layers_trains_them_in_bfloat16(tmp_path):
    """``algo.conv_dtype`` reaches the trainer's world model: its encoder and decoder run
    in bfloat16 (here on the CPU, where autocast has bfloat16 too) and the run trains."""
    tr = DreamerTrainer(small_cfg(conv_dtype="bfloat16"), dot_context(tmp_path))
    assert tr.wm.encoder.conv_dtype == tr.wm.decoder.conv_dtype == torch.bfloat16
    conv_out: list[torch.dtype] = []
    first_conv = tr.wm.encoder.net[0]
    first_conv.register_forward_hook(lambda _m, _i, out: conv_out.append(out.dtype))
    tr.ctx.run(tr)
    assert tr.opt_steps >= 1 and tr.ctx.records[-1]["nonfinite_seen"] == 0
    assert conv_out and set(conv_out) == {torch.bfloat16}
