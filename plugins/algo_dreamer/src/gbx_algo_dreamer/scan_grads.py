"""The posterior scan's weight gradients, summed over all steps at once.

Each of the scan's 64 steps runs the RSSM's layers on the same weights. Backpropagated as
written, every step computes its own gradient of each weight (a matrix product of a
16-row batch per linear layer, a reduction per LayerNorm) and autograd adds it into the
weight's gradient: hundreds of kernels per update too small to fill a GPU, one after the
other. A weight's gradient is a sum over steps of one product: the gradient at the
layer's output times the layer's input. So in a scan that needs gradients every step
reads its layers' weights detached and adds, at each layer's output, a slice of a zero
"sink" tensor ``[T, B, out]``; the sink's gradient is then the layer's output gradient at
every step, and the sink's own backward turns it into the weights' gradients in one
product (linear layers) or one reduction (LayerNorm's scale and shift) over all steps,
using the layers' inputs the steps return (:class:`SiteInputs`, stacked after the scan).
The gradients are those of the step-by-step backward, summed in another order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class SiteInputs:
    """What one layer read at every step of a scan ``[T, B, in]``, set after the scan and
    read by its sink's backward (which runs after every step's backward)."""

    def __init__(self) -> None:
        self.value: torch.Tensor | None = None


class _Sink(torch.autograd.Function):
    """Zeros ``[T, B, out]`` whose gradient becomes the layer's parameter gradients."""

    @staticmethod
    def forward(ctx: Any, inputs: SiteInputs, norm: bool, shape: tuple[int, ...],
                *params: torch.Tensor) -> torch.Tensor:
        ctx.inputs, ctx.norm, ctx.count = inputs, norm, len(params)
        return params[0].new_zeros(shape)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        value = ctx.inputs.value
        assert value is not None, "a sink's inputs are set when the scan ends"
        g = grad.reshape(-1, grad.shape[-1])
        x = value.reshape(-1, value.shape[-1])
        if ctx.norm:  # scale, shift of a LayerNorm whose normalised input is x
            grads: tuple[torch.Tensor, ...] = ((g * x).sum(0), g.sum(0))
        else:  # weight [out, in], then the bias if the layer has one
            grads = (g.t() @ x, g.sum(0))[:ctx.count]
        return (None, None, None, *grads)


class Site:
    """One layer of the step whose parameters' gradients are summed after the scan."""

    def __init__(self, params: Sequence[torch.Tensor], out_dim: int, norm: bool) -> None:
        self.params, self.out_dim, self.norm = tuple(params), out_dim, norm
        self.inputs = SiteInputs()

    def sink(self, length: int, batch: int) -> torch.Tensor:
        return _Sink.apply(self.inputs, self.norm, (length, batch, self.out_dim),
                           *self.params)


def linear_site(weight: torch.Tensor, bias: torch.Tensor | None = None) -> Site:
    return Site([weight] if bias is None else [weight, bias], weight.shape[0], norm=False)


def norm_site(norm: nn.LayerNorm) -> Site:
    return Site([norm.weight, norm.bias], norm.normalized_shape[-1], norm=True)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           sink: torch.Tensor | None) -> torch.Tensor:
    """``F.linear``; with a sink, on the detached weights plus the sink's step slice."""
    if sink is None:
        return F.linear(x, weight, bias)
    out = F.linear(x, weight.detach(), None if bias is None else bias.detach())
    return out + sink


def layer_norm(x: torch.Tensor, norm: nn.LayerNorm, sink: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``norm(x)`` and, with a sink, the normalised input its sink's backward reads."""
    if sink is None:
        return norm(x), None
    unit = F.layer_norm(x, norm.normalized_shape, None, None, norm.eps)
    return unit * norm.weight.detach() + norm.bias.detach() + sink, unit
