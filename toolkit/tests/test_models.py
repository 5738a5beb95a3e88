"""Built-in actor-critic models: shapes, scaling, init, registration."""

from __future__ import annotations

import pytest
import torch

from gbx.errors import ConfigError
from gbx_toolkit.models import BUILTIN_MODELS, build_cnn, build_impala, build_model


@pytest.mark.parametrize("builder", [build_cnn, build_impala])
def test_shapes_and_gradients(builder) -> None:
    torch.manual_seed(0)
    model = builder((2, 72, 80), 7, hidden=32)
    obs = torch.randint(0, 4, (5, 2, 72, 80), dtype=torch.uint8)
    logits, value = model(obs)
    assert logits.shape == (5, 7) and value.shape == (5,)
    assert logits.dtype == value.dtype == torch.float32
    (logits.sum() + value.sum()).backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_cnn_scales_shades_to_unit_range() -> None:
    # Shade 3 must look like 1.0 to the first layer: compare with a float input.
    model = build_cnn((1, 72, 80), 3, hidden=16)
    obs = torch.full((1, 1, 72, 80), 3, dtype=torch.uint8)
    first = model.torso[0]
    expected = first(torch.ones(1, 1, 72, 80))
    got = first(obs.float() / 3)
    torch.testing.assert_close(got, expected)
    # And the full model accepts the raw uint8 tensor.
    logits, _ = model(obs)
    assert torch.isfinite(logits).all()


def test_orthogonal_init_and_small_policy_head() -> None:
    torch.manual_seed(0)
    model = build_cnn((1, 72, 80), 7, hidden=64)
    w = model.policy_head.weight  # [7, 64]: rows orthonormal up to the 0.01 gain
    torch.testing.assert_close(w @ w.T, 1e-4 * torch.eye(7), atol=1e-6, rtol=0)
    assert model.policy_head.bias.abs().max().item() == 0.0
    # Near-uniform first policy.
    logits, _ = model(torch.randint(0, 4, (4, 1, 72, 80), dtype=torch.uint8))
    probs = logits.softmax(-1)
    assert (probs - 1 / 7).abs().max().item() < 0.05


def test_bad_shapes_are_one_line_errors() -> None:
    with pytest.raises(ValueError, match="obs_shape"):
        build_cnn((72, 80), 7)
    with pytest.raises(ValueError, match="too small"):
        build_cnn((1, 16, 16), 7)


def test_registered_by_name_and_unknown_names_rejected() -> None:
    assert set(BUILTIN_MODELS) == {"cnn", "impala"}
    model = build_model("impala", (1, 36, 40), 4, channels=(8, 8), hidden=16)
    logits, value = model(torch.zeros(2, 1, 36, 40, dtype=torch.uint8))
    assert logits.shape == (2, 4) and value.shape == (2,)
    with pytest.raises(ConfigError, match="unknown model 'nope'.*cnn, impala"):
        build_model("nope", (1, 72, 80), 7)
    with pytest.raises(ConfigError, match="rejected its options"):
        build_model("cnn", (1, 72, 80), 7, bogus=1)
