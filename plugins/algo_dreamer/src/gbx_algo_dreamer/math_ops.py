"""Pure tensor math of DreamerV3: symlog, two-hot targets, KL balancing, lambda-returns,
percentile return normalisation. No state except :class:`ReturnNorm`'s two EMA scalars."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def symlog(x: torch.Tensor) -> torch.Tensor:
    """sign(x) * log(1 + |x|): compresses large magnitudes, identity-like near 0."""
    return torch.sign(x) * torch.log1p(torch.abs(x))


def symexp(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`symlog`."""
    return torch.sign(x) * torch.expm1(torch.abs(x))


def make_bins(num_bins: int = 255, low: float = -20.0, high: float = 20.0) -> torch.Tensor:
    """Bin centres (in symlog space) of the two-hot distribution, float32 ``[num_bins]``."""
    if num_bins < 2:
        raise ValueError(f"two-hot needs at least 2 bins, got {num_bins}")
    return torch.linspace(low, high, num_bins, dtype=torch.float32)


def twohot_encode(y: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Two-hot target of ``symlog(y)`` over ``bins``: weight split between the two nearest
    bins so the target's expectation equals ``symlog(y)`` (clipped to the bin range)."""
    x = symlog(y.to(torch.float32)).clamp(bins[0], bins[-1])
    # index of the bin at or below x; searchsorted keeps it branch-free on device
    hi = torch.searchsorted(bins, x.contiguous(), right=False).clamp(1, bins.numel() - 1)
    lo = hi - 1
    b_lo, b_hi = bins[lo], bins[hi]
    w_hi = ((x - b_lo) / (b_hi - b_lo)).clamp(0.0, 1.0)
    target = torch.zeros(*x.shape, bins.numel(), dtype=torch.float32, device=x.device)
    target.scatter_(-1, lo.unsqueeze(-1), (1.0 - w_hi).unsqueeze(-1))
    target.scatter_add_(-1, hi.unsqueeze(-1), w_hi.unsqueeze(-1))
    return target


def twohot_mean(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Prediction of a two-hot head in the original scale: symexp(E[bin])."""
    probs = torch.softmax(logits.to(torch.float32), dim=-1)
    return symexp((probs * bins).sum(-1))


def twohot_nll(logits: torch.Tensor, y: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the two-hot head against the two-hot target of ``y`` (shape of ``y``)."""
    target = twohot_encode(y, bins)
    return -(target * torch.log_softmax(logits.to(torch.float32), dim=-1)).sum(-1)


def unimix_logits(logits: torch.Tensor, unimix: float) -> torch.Tensor:
    """Logits of ``(1 - unimix) * softmax(logits) + unimix / classes`` (keeps every class
    probability above ``unimix / classes``, which bounds KL terms and log-probs)."""
    probs = torch.softmax(logits.to(torch.float32), dim=-1)
    if unimix > 0.0:
        probs = (1.0 - unimix) * probs + unimix / logits.shape[-1]
    return torch.log(probs)


def categorical_kl(lhs_logits: torch.Tensor, rhs_logits: torch.Tensor) -> torch.Tensor:
    """KL(lhs || rhs) of independent categoricals ``[..., S, C]`` summed over ``S``: ``[...]``."""
    lp = torch.log_softmax(lhs_logits, -1)
    rp = torch.log_softmax(rhs_logits, -1)
    return (lp.exp() * (lp - rp)).sum((-1, -2))


def kl_balanced(
    post_logits: torch.Tensor,
    prior_logits: torch.Tensor,
    free_bits: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dynamics and representation KL terms with free bits.

    ``dyn = max(free, KL(sg(post) || prior))`` trains the prior;
    ``rep = max(free, KL(post || sg(prior)))`` trains the encoder. Returns
    ``(dyn, rep, raw_kl, clipped)`` where ``clipped`` flags steps under the floor.
    """
    dyn_raw = categorical_kl(post_logits.detach(), prior_logits)
    rep_raw = categorical_kl(post_logits, prior_logits.detach())
    dyn = torch.clamp(dyn_raw, min=free_bits)
    rep = torch.clamp(rep_raw, min=free_bits)
    return dyn, rep, dyn_raw.detach(), (dyn_raw.detach() < free_bits)


def lambda_returns(
    rewards: torch.Tensor,
    values: torch.Tensor,
    discounts: torch.Tensor,
    lam: float,
) -> torch.Tensor:
    """TD(lambda) returns of an imagined trajectory (time-major).

    ``rewards``, ``discounts``: ``[H, ...]`` for steps 1..H (reward and
    ``gamma * continue`` of arriving at step t+1); ``values``: ``[H+1, ...]`` for
    steps 0..H. ``R_H = v_H`` and
    ``R_t = r_{t+1} + d_{t+1} * ((1 - lam) * v_{t+1} + lam * R_{t+1})``.
    Returns ``[H, ...]`` for steps 0..H-1.
    """
    horizon = rewards.shape[0]
    if values.shape[0] != horizon + 1 or discounts.shape[0] != horizon:
        raise ValueError(
            f"lambda_returns needs values with one more step than rewards: "
            f"rewards {tuple(rewards.shape)}, values {tuple(values.shape)}"
        )
    out = []
    ret = values[-1]
    for t in reversed(range(horizon)):
        ret = rewards[t] + discounts[t] * ((1.0 - lam) * values[t + 1] + lam * ret)
        out.append(ret)
    return torch.stack(out[::-1])


class ReturnNorm:
    """EMA of the 5th-95th percentile range of returns; the advantage scale is
    ``max(limit, hi - lo)`` so small returns are never scaled up."""

    def __init__(
        self,
        device: torch.device | str,
        decay: float = 0.99,
        limit: float = 1.0,
        low_q: float = 0.05,
        high_q: float = 0.95,
    ) -> None:
        self.decay, self.limit = decay, limit
        self._q = torch.tensor([low_q, high_q], dtype=torch.float32, device=device)
        self.low = torch.zeros((), dtype=torch.float32, device=device)
        self.high = torch.zeros((), dtype=torch.float32, device=device)

    def update(self, returns: torch.Tensor) -> torch.Tensor:
        """Fold this batch's percentiles into the EMA; return the current scale (0-d)."""
        q = torch.quantile(returns.detach().reshape(-1).to(torch.float32), self._q)
        self.low.mul_(self.decay).add_((1.0 - self.decay) * q[0])
        self.high.mul_(self.decay).add_((1.0 - self.decay) * q[1])
        return self.scale()

    def scale(self) -> torch.Tensor:
        return torch.clamp(self.high - self.low, min=self.limit)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"low": self.low.clone(), "high": self.high.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.low.copy_(state["low"])
        self.high.copy_(state["high"])


def uniform_noise(shape: tuple[int, ...] | torch.Size, device: torch.device,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """The uniform draws one categorical sample of ``shape`` (logits' shape) consumes."""
    return torch.rand(shape, device=device, generator=generator)


def sample_categorical(logits: torch.Tensor, generator: torch.Generator | None = None,
                       noise: torch.Tensor | None = None) -> torch.Tensor:
    """Indices ``[...]`` sampled from ``logits [..., C]`` by the Gumbel-max trick.

    ``noise`` (uniforms of ``logits``' shape, :func:`uniform_noise`) replaces the draw from
    ``generator``: a captured graph takes its randomness as an input, drawn beforehand in
    the order the eager path draws it. Unlike ``torch.multinomial`` it never raises a
    device assert on NaN input, so a non-finite model reaches the guard instead of killing
    the CUDA context.
    """
    u = noise if noise is not None else uniform_noise(logits.shape, logits.device, generator)
    gumbel = -torch.log(-torch.log(u.clamp(1e-20, 1.0 - 1e-7)))
    return (logits.detach() + gumbel).argmax(-1)


def straight_through_sample(logits: torch.Tensor, generator: torch.Generator | None = None,
                            noise: torch.Tensor | None = None) -> torch.Tensor:
    """One-hot sample of categoricals ``[..., C]`` with straight-through gradients."""
    probs = torch.softmax(logits, -1)
    index = sample_categorical(logits, generator, noise)
    onehot = F.one_hot(index, probs.shape[-1]).to(probs.dtype)
    return onehot + probs - probs.detach()
