"""The scan's weight gradients summed over all steps at once (:mod:`scan_grads`) are the
gradients of the step-by-step backward, and the scan takes that form only with gradients
and where asked (by default on a GPU)."""

from __future__ import annotations

import pytest
import torch

from gbx_algo_dreamer.config import SIZES
from gbx_algo_dreamer.world_model import RSSM, Latent, WorldModel

B, T, ACTIONS = 4, 9, 3


def _rssm_and_inputs() -> tuple[RSSM, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    rssm = WorldModel((1, 16, 16), ACTIONS, SIZES["tiny"], 0.01, 17).rssm
    g = torch.Generator().manual_seed(1)
    embed_dim = rssm.post_net.torso[0].in_features - rssm.deter_dim
    inputs = {
        "embed": torch.randn(B, T, embed_dim, generator=g, requires_grad=True),
        "actions": torch.nn.functional.one_hot(
            torch.randint(0, ACTIONS, (B, T), generator=g), ACTIONS).float(),
        "is_first": torch.rand(B, T, generator=g) < 0.3,
        "noise": rssm.scan_noise(B, T, torch.device("cpu"), g),
    }
    return rssm, inputs


def _objective(seq: Latent, posts: torch.Tensor, priors: torch.Tensor) -> torch.Tensor:
    """A loss that reads every output differently, so no gradient is trivially shared."""
    weights = torch.arange(seq.stoch.numel(), dtype=torch.float32).reshape(seq.stoch.shape)
    return (seq.deter.sin().sum() + (seq.stoch * weights.cos()).sum() + posts.tanh().sum()
            + priors.tanh().sum())


def _step_by_step(rssm: RSSM, x: dict[str, torch.Tensor]) -> torch.Tensor:
    """The scan written out with the step's own (attached) weights: autograd sums the
    per-step gradients one step at a time."""
    init = rssm.initial(B)
    deter, stoch = init.deter, init.stoch
    deters, stochs, posts = [], [], []
    parts = rssm.posterior_inputs(x["embed"])
    for t in range(T):
        deter, stoch, post, taken = rssm.post_step(
            deter, stoch, x["actions"][:, t], parts[:, t], x["is_first"][:, t], init.deter,
            init.stoch, x["noise"][t])
        assert taken == ()  # no sinks, no layer inputs kept
        deters.append(deter)
        stochs.append(stoch)
        posts.append(post)
    seq = Latent(torch.stack(deters, 1), torch.stack(stochs, 1))
    return _objective(seq, torch.stack(posts, 1), rssm._logits(rssm.prior_net, seq.deter))


def test_summed_weight_gradients_are_the_step_by_step_gradients():
    rssm, x = _rssm_and_inputs()
    seq, posts, priors, _ = rssm.observe(x["embed"], x["actions"], x["is_first"],
                                         noise=x["noise"], sum_weight_grads=True)
    wrt = [x["embed"], *rssm.parameters()]
    summed = torch.autograd.grad(_objective(seq, posts, priors), wrt)
    stepped = torch.autograd.grad(_step_by_step(rssm, x), wrt)
    names = ["embed", *(name for name, _ in rssm.named_parameters())]
    for name, got, want in zip(names, summed, stepped, strict=True):
        assert float(want.abs().max()) > 0, f"{name}: no gradient to compare"
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()),
                                   msg=lambda m, n=name: f"{n}: {m}")


def test_the_scan_keeps_layer_inputs_only_to_sum_gradients(monkeypatch: pytest.MonkeyPatch):
    rssm, x = _rssm_and_inputs()
    seen = []
    step = rssm.post_step

    def spy(*args, **kwargs):
        out = step(*args, **kwargs)
        seen.append(len(out[3]))
        return out

    monkeypatch.setattr(rssm, "post_step", spy)
    with torch.no_grad():
        rssm.observe(x["embed"], x["actions"], x["is_first"], noise=x["noise"],
                     sum_weight_grads=True)
    assert seen == [0] * T
    seen.clear()
    rssm.observe(x["embed"], x["actions"], x["is_first"], noise=x["noise"],
                 sum_weight_grads=True)
    assert seen == [7] * T  # the seven layers of RSSM.scan_sites
    seen.clear()
    rssm.observe(x["embed"], x["actions"], x["is_first"], noise=x["noise"])
    assert seen == [0] * T  # the CPU's default: gradients step by step
