"""The world model: RSSM (LayerNorm GRU + 32x32 categorical latents), shade encoder/decoder,
reward and continue heads, and its loss on a replayed batch."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gbx_algo_dreamer import scan_grads
from gbx_algo_dreamer.config import SizePreset
from gbx_algo_dreamer.math_ops import (
    kl_balanced,
    straight_through_sample,
    twohot_nll,
    uniform_noise,
    unimix_logits,
)
from gbx_algo_dreamer.networks import (
    NUM_SHADES,
    Head,
    LayerNormGRUCell,
    ShadeDecoder,
    ShadeEncoder,
    gru_gates,
    mlp,
)
from gbx_toolkit.metrics import categorical_entropy


@dataclass
class Latent:
    """RSSM state: deterministic ``deter [B, D]`` (float32) and one-hot ``stoch [B, S, C]``."""

    deter: torch.Tensor
    stoch: torch.Tensor

    def feat(self) -> torch.Tensor:
        return torch.cat([self.deter, self.stoch.flatten(-2)], -1)

    def detach(self) -> Latent:
        return Latent(self.deter.detach(), self.stoch.detach())


def embed_frames(encoder: nn.Module, obs: torch.Tensor) -> torch.Tensor:
    """``uint8 [..., K, H, W]`` -> ``[..., E]`` through ``encoder`` (shared with the player's
    weight copy)."""
    lead = obs.shape[:-3]
    out: torch.Tensor = encoder(obs.reshape(-1, *obs.shape[-3:]))
    return out.reshape(*lead, -1)


# RSSM.post_step without its generator: (deter, stoch, action, the embedding's posterior
# input, is_first, initial deter, initial stoch, noise, sinks) -> (deter, stoch, posterior
# logits, the sites' inputs)
PostStep = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                tuple[torch.Tensor, ...]]]


class RSSM(nn.Module):
    def __init__(self, size: SizePreset, num_actions: int, embed_dim: int, unimix: float) -> None:
        super().__init__()
        self.deter_dim, self.stoch, self.classes = size.deter, size.stoch, size.classes
        self.num_actions, self.unimix = num_actions, unimix
        flat = size.stoch * size.classes
        self.img_in = mlp(flat + num_actions, size.units, 1)
        self.gru = LayerNormGRUCell(size.units, size.deter)
        self.prior_net = Head(size.deter, size.units, 1, flat)
        self.post_net = Head(size.deter + embed_dim, size.units, 1, flat)
        # learned initial deterministic state; its stochastic part is the prior's mode
        self.init_deter = nn.Parameter(torch.zeros(size.deter))

    @property
    def feat_dim(self) -> int:
        return self.deter_dim + self.stoch * self.classes

    def _logits(self, net: Head, x: torch.Tensor) -> torch.Tensor:
        return self._categorical(net(x))

    def _categorical(self, raw: torch.Tensor) -> torch.Tensor:
        """A head's flat output ``[..., S * C]`` as the latents' mixed logits ``[..., S, C]``."""
        return unimix_logits(raw.reshape(*raw.shape[:-1], self.stoch, self.classes),
                             self.unimix)

    def initial(self, batch: int) -> Latent:
        deter = torch.tanh(self.init_deter).expand(batch, -1)
        logits = self._logits(self.prior_net, deter)
        stoch = F.one_hot(logits.argmax(-1), self.classes).to(deter.dtype)
        return Latent(deter, stoch)

    def reset_where(self, state: Latent, action: torch.Tensor, is_first: torch.Tensor,
                    init: Latent | None = None) -> tuple[Latent, torch.Tensor]:
        """Replace state and previous action by the initial ones where ``is_first``."""
        if init is None:
            init = self.initial(is_first.shape[0])
        keep = (~is_first).to(state.deter.dtype)
        deter = keep[:, None] * state.deter + (1 - keep[:, None]) * init.deter
        stoch = keep[:, None, None] * state.stoch + (1 - keep[:, None, None]) * init.stoch
        return Latent(deter, stoch), action * keep[:, None]

    def img_step(self, state: Latent, action: torch.Tensor,
                 generator: torch.Generator | None = None, noise: torch.Tensor | None = None
                 ) -> tuple[Latent, torch.Tensor]:
        """Prior step: ``(state, one-hot action) -> (next prior state, prior logits)``;
        ``noise`` replaces the sample's draw from ``generator``."""
        deter, _ = self._next_deter(state, action, None)
        logits = self._logits(self.prior_net, deter)
        return Latent(deter, straight_through_sample(logits, generator, noise)), logits

    def _post_first(self) -> nn.Linear:
        first = self.post_net.torso[0]
        assert isinstance(first, nn.Linear)
        return first

    def posterior_inputs(self, embed: torch.Tensor) -> torch.Tensor:
        """The embedding's part of the posterior head's first layer: ``[..., E] ->
        [..., units]``. The head reads ``[deter, embed]``, and the embedding is most of
        those columns (all but the GRU state's 512 at size S); its part is known
        before the scan, so :meth:`observe` projects all steps at once, and the scan's
        backward gets that weight's gradient from one product instead of adding one per
        step."""
        return F.linear(embed, self._post_first().weight[:, self.deter_dim:])

    def _post_head(self, deter: torch.Tensor, embed_part: torch.Tensor,
                   sinks: Sequence[torch.Tensor] | None
                   ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """The posterior head's logits on ``[deter, embed]``, the embedding's part given
        (:meth:`posterior_inputs`), and, with the sinks of its three layers, their
        inputs."""
        first, norm, out = self._post_first(), self.post_net.torso[1], self.post_net.out
        assert isinstance(norm, nn.LayerNorm)
        s4, s5, s6 = sinks or (None, None, None)
        x = scan_grads.linear(deter, first.weight[:, :self.deter_dim], None, s4) + embed_part
        x, unit = scan_grads.layer_norm(x, norm, s5)
        x = F.silu(x)
        raw = scan_grads.linear(x, out.weight, out.bias, s6)
        return self._categorical(raw), () if unit is None else (deter, unit, x)

    def scan_sites(self) -> tuple[scan_grads.Site, ...]:
        """The step's layers whose gradients a scan sums after its last step
        (:mod:`gbx_algo_dreamer.scan_grads`), in the order :meth:`post_step` takes their
        sinks: the input layer, the GRU and the posterior head."""
        img_lin, img_norm = self.img_in[0], self.img_in[1]
        post_norm, out = self.post_net.torso[1], self.post_net.out
        assert isinstance(img_lin, nn.Linear) and isinstance(img_norm, nn.LayerNorm)
        assert isinstance(post_norm, nn.LayerNorm)
        return (scan_grads.linear_site(img_lin.weight), scan_grads.norm_site(img_norm),
                scan_grads.linear_site(self.gru.proj.weight),
                scan_grads.norm_site(self.gru.norm),
                scan_grads.linear_site(self._post_first().weight[:, :self.deter_dim]),
                scan_grads.norm_site(post_norm),
                scan_grads.linear_site(out.weight, out.bias))

    def _post_step(self, state: Latent, action: torch.Tensor, embed_part: torch.Tensor,
                   is_first: torch.Tensor, init: Latent | None,
                   generator: torch.Generator | None, noise: torch.Tensor | None = None,
                   sinks: Sequence[torch.Tensor] | None = None
                   ) -> tuple[Latent, torch.Tensor, tuple[torch.Tensor, ...]]:
        """One posterior step: the input layer and the GRU (:meth:`_next_deter`, as
        :meth:`img_step` runs them), the posterior head and its sample. With the step's
        slices of the sinks of :meth:`scan_sites`, the layers read detached weights and
        the step also returns the inputs those sites need."""
        state, action = self.reset_where(state, action, is_first, init)
        deter, deter_inputs = self._next_deter(state, action,
                                               None if sinks is None else sinks[:4])
        post_logits, head_inputs = self._post_head(deter, embed_part,
                                                   None if sinks is None else sinks[4:])
        sample = straight_through_sample(post_logits, generator, noise)
        return Latent(deter, sample), post_logits, (*deter_inputs, *head_inputs)

    def _next_deter(self, state: Latent, action: torch.Tensor,
                    sinks: Sequence[torch.Tensor] | None
                    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """The input layer on ``[stoch, action]`` and the GRU: the next deterministic state
        and, with the sinks of these four layers, their inputs."""
        img_lin, img_norm = self.img_in[0], self.img_in[1]
        assert isinstance(img_lin, nn.Linear) and isinstance(img_norm, nn.LayerNorm)
        s0, s1, s2, s3 = sinks or (None, None, None, None)
        x_in = torch.cat([state.stoch.flatten(-2), action], -1)
        x, unit_in = scan_grads.layer_norm(scan_grads.linear(x_in, img_lin.weight, None, s0),
                                           img_norm, s1)
        h = state.deter.float()
        x_gru = torch.cat([F.silu(x).float(), h], -1)
        parts, unit_gru = scan_grads.layer_norm(
            scan_grads.linear(x_gru, self.gru.proj.weight, None, s2), self.gru.norm, s3)
        inputs = () if unit_in is None or unit_gru is None else (x_in, unit_in, x_gru,
                                                                  unit_gru)
        return gru_gates(parts, h), inputs

    def post_step(self, deter: torch.Tensor, stoch: torch.Tensor, action: torch.Tensor,
                  embed_part: torch.Tensor, is_first: torch.Tensor, init_deter: torch.Tensor,
                  init_stoch: torch.Tensor, noise: torch.Tensor | None,
                  sinks: Sequence[torch.Tensor] | None = None,
                  generator: torch.Generator | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """One step of :meth:`observe` on plain tensors: ``(deter, stoch, posterior
        logits, the sites' inputs)``, ``embed_part`` from :meth:`posterior_inputs`, the
        sites' inputs empty without ``sinks``. In this form, with ``noise`` given,
        ``torch.compile`` takes it whole (``algo.fuse_steps``)."""
        state, logits, site_inputs = self._post_step(
            Latent(deter, stoch), action, embed_part, is_first,
            Latent(init_deter, init_stoch), generator, noise, sinks)
        return state.deter, state.stoch, logits, site_inputs

    def obs_step(self, state: Latent, action: torch.Tensor, embed: torch.Tensor,
                 is_first: torch.Tensor, generator: torch.Generator | None = None
                 ) -> tuple[Latent, torch.Tensor, torch.Tensor]:
        """Posterior step; returns ``(posterior state, posterior logits, prior logits)``."""
        post, post_logits, _ = self._post_step(state, action, self.posterior_inputs(embed),
                                               is_first, None, generator)
        return post, post_logits, self._logits(self.prior_net, post.deter)

    def observe(self, embed: torch.Tensor, actions: torch.Tensor, is_first: torch.Tensor,
                state: Latent | None = None, generator: torch.Generator | None = None,
                noise: torch.Tensor | None = None, step: PostStep | None = None,
                sum_weight_grads: bool | None = None
                ) -> tuple[Latent, torch.Tensor, torch.Tensor, Latent]:
        """Scan posterior steps over batch-major ``[B, T, ...]`` inputs.

        Returns stacked posterior states ``[B, T, ...]``, posterior and prior logits
        ``[B, T, S, C]`` and the last state. Only the posterior is needed inside the scan
        (its sample feeds the next step), so the prior head runs once on all steps after it.
        ``noise [T, B, S, C]`` (:meth:`scan_noise`) replaces the draws from ``generator``;
        ``step`` replaces :meth:`post_step` (a compiled copy of it) and needs ``noise``.
        ``sum_weight_grads`` sums the steps' weight gradients once after the scan
        (:mod:`gbx_algo_dreamer.scan_grads`) where gradients are on; unset: on a GPU, where
        it takes hundreds of small kernels off an update. On the CPU the extra elementwise
        operations per step cost more than the small products they save (the README's CPU
        run took 5% longer with them).
        """
        if step is not None and noise is None:
            raise ValueError("a replaced step takes its randomness as input: pass noise")
        batch, length = embed.shape[:2]
        init = self.initial(batch)
        if state is None:
            state = init
        deter, stoch = state.deter, state.stoch
        deters, stochs, posts = [], [], []
        if sum_weight_grads is None:
            sum_weight_grads = embed.is_cuda
        # the sinks need a weight that takes gradients
        grads = torch.is_grad_enabled() and self.gru.proj.weight.requires_grad
        sites = self.scan_sites() if grads and sum_weight_grads else ()
        sinks = [site.sink(length, batch).unbind(0) for site in sites]
        site_inputs: list[list[torch.Tensor]] = [[] for _ in sites]
        # one view per step: the backward pass stacks the steps' gradients of the embedding
        # (and of the initial state) once, where indexing would add a full-size gradient
        # per step, and using one tensor at every step would add one per step
        embeds = self.posterior_inputs(embed).unbind(1)
        init_deters = init.deter.expand(length, *init.deter.shape).unbind(0)
        init_stochs = init.stoch.expand(length, *init.stoch.shape).unbind(0)
        acts, firsts = actions.unbind(1), is_first.unbind(1)
        for t in range(length):
            inputs = (deter, stoch, acts[t], embeds[t], firsts[t], init_deters[t],
                      init_stochs[t], None if noise is None else noise[t],
                      tuple(sink[t] for sink in sinks) if sinks else None)
            if step is None:
                deter, stoch, post, taken = self.post_step(*inputs, generator=generator)
            else:
                deter, stoch, post, taken = step(*inputs)
            deters.append(deter)
            stochs.append(stoch)
            posts.append(post)
            for kept, value in zip(site_inputs, taken, strict=True):
                kept.append(value.detach())
        for site, kept in zip(sites, site_inputs, strict=True):
            site.inputs.value = torch.stack(kept)
        seq = Latent(torch.stack(deters, 1), torch.stack(stochs, 1))
        priors = self._logits(self.prior_net, seq.deter)
        return seq, torch.stack(posts, 1), priors, Latent(deter, stoch)

    def scan_noise(self, batch: int, length: int, device: torch.device,
                   generator: torch.Generator | None) -> torch.Tensor:
        """Uniforms ``[T, B, S, C]`` of a scan, drawn in the eager scan's order (one draw per
        step), so a scan fed with them samples what the eager scan would."""
        shape = (batch, self.stoch, self.classes)
        return torch.stack([uniform_noise(shape, device, generator) for _ in range(length)])


# (embed, one-hot actions, is_first, generator) -> (posterior states, posterior logits,
# prior logits): the posterior scan, eager or captured
Observe = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator | None],
                   tuple[Latent, torch.Tensor, torch.Tensor]]

# uint8 frames [..., K, H, W] -> embeddings [..., E]: WorldModel.embed, eager or compiled
Embed = Callable[[torch.Tensor], torch.Tensor]

# WorldModel.loss_terms, eager or compiled: (frames, posterior deter and stoch, posterior
# logits, prior logits, rewards, is_terminal, bins, kl_dyn, kl_rep, free_bits) ->
# (loss, scalars, reconstruction accuracy)
LossTerms = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]]


@dataclass
class ModelOutput:
    """Everything the update and its metrics need from one world-model pass."""

    loss: torch.Tensor
    post: Latent  # [B, T, ...] (with gradients)
    scalars: dict[str, torch.Tensor]
    shade_accuracy: torch.Tensor


class WorldModel(nn.Module):
    def __init__(self, obs_shape: tuple[int, int, int], num_actions: int, size: SizePreset,
                 unimix: float, num_bins: int, conv_dtype: torch.dtype = torch.float32
                 ) -> None:
        super().__init__()
        frames, height, width = obs_shape
        self.obs_shape, self.num_actions = tuple(obs_shape), num_actions
        self.encoder = ShadeEncoder(frames, height, width, size.depth, conv_dtype)
        self.rssm = RSSM(size, num_actions, self.encoder.out_dim, unimix)
        feat = self.rssm.feat_dim
        self.decoder = ShadeDecoder(feat, frames, height, width, size.depth, conv_dtype)
        self.reward = Head(feat, size.units, size.layers, num_bins, zero_init=True)
        self.cont = Head(feat, size.units, size.layers, 1)

    def embed(self, obs: torch.Tensor) -> torch.Tensor:
        """``uint8 [..., K, H, W]`` -> ``[..., E]``."""
        return embed_frames(self.encoder, obs)

    def observe(self, embed: torch.Tensor, actions: torch.Tensor, is_first: torch.Tensor,
                generator: torch.Generator | None) -> tuple[Latent, torch.Tensor, torch.Tensor]:
        """The eager posterior scan of :meth:`loss`: states, posterior and prior logits."""
        post, post_logits, prior_logits, _ = self.rssm.observe(embed, actions, is_first,
                                                               generator=generator)
        return post, post_logits, prior_logits

    def decode_logits(self, feat: torch.Tensor) -> torch.Tensor:
        lead = feat.shape[:-1]
        out = self.decoder(feat.reshape(-1, feat.shape[-1]))
        return out.reshape(*lead, *out.shape[1:])

    def loss(self, obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor,
             is_first: torch.Tensor, is_terminal: torch.Tensor, bins: torch.Tensor, *,
             kl_dyn: float, kl_rep: float, free_bits: float,
             generator: torch.Generator | None = None,
             observe: Observe | None = None, embed: Embed | None = None,
             terms: LossTerms | None = None) -> ModelOutput:
        """World-model loss on a batch-major sequence batch.

        ``obs uint8 [B, T, K, H, W]``; ``actions int64 [B, T]`` (action that led to
        each step); ``rewards [B, T]``; ``is_first``/``is_terminal`` bool ``[B, T]``.
        ``observe`` replaces the eager posterior scan (``algo.compile``: the same scan
        as a captured graph, :mod:`gbx_algo_dreamer.graphs`); ``embed`` and ``terms``
        replace :meth:`embed` and :meth:`loss_terms` (compiled copies of them).
        """
        act = F.one_hot(actions, self.num_actions).to(torch.float32)
        scan = observe or self.observe
        post, post_logits, prior_logits = scan((embed or self.embed)(obs), act, is_first,
                                               generator)
        loss, scalars, accuracy = (terms or self.loss_terms)(
            obs, post.deter, post.stoch, post_logits, prior_logits, rewards, is_terminal,
            bins, kl_dyn, kl_rep, free_bits)
        return ModelOutput(loss, post, scalars, accuracy)

    def loss_terms(self, obs: torch.Tensor, deter: torch.Tensor, stoch: torch.Tensor,
                   post_logits: torch.Tensor, prior_logits: torch.Tensor,
                   rewards: torch.Tensor, is_terminal: torch.Tensor, bins: torch.Tensor,
                   kl_dyn: float, kl_rep: float, free_bits: float
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        """What :meth:`loss` computes after the scan, on plain tensors: ``(loss, scalars,
        reconstruction accuracy)``. In this form ``torch.compile`` takes it whole
        (``algo.fuse_steps``): the decoder, the heads and the losses as one program."""
        feat = Latent(deter, stoch).feat()
        # [B, T, K, 4, H, W]: the decoder's own memory layout (its [..., H, W, 4] output is
        # a permuted view), where the softmax over the 4 shades runs on contiguous planes;
        # over a strided last axis it costs several times more on the CPU
        logits = self.decode_logits(feat).movedim(-1, -3)
        logp = torch.log_softmax(logits, -3)
        target = obs.to(torch.int64).unsqueeze(-3)
        logp_target = logp.gather(-3, target).squeeze(-3)
        obs_nll = -logp_target.sum((-1, -2, -3))
        # the target shade is the most likely one (an argmax over a strided axis is slow)
        best = functools.reduce(torch.maximum, logp.detach().unbind(-3))
        accuracy = (logp_target.detach() >= best).float().mean()
        rew_nll = twohot_nll(self.reward(feat), rewards, bins)
        cont_target = (~is_terminal).to(torch.float32)
        cont_nll = F.binary_cross_entropy_with_logits(
            self.cont(feat).squeeze(-1), cont_target, reduction="none")
        dyn, rep, kl_raw, clipped = kl_balanced(post_logits, prior_logits, free_bits)
        total = obs_nll + rew_nll + cont_nll + kl_dyn * dyn + kl_rep * rep
        loss = total.mean()
        scalars = {
            "loss_model": loss.detach(),
            "obs_nll": obs_nll.detach().mean(),
            "reward_nll": rew_nll.detach().mean(),
            "continue_nll": cont_nll.detach().mean(),
            "kl_dyn": dyn.detach().mean(),
            "kl_rep": rep.detach().mean(),
            "kl_total": kl_raw.mean(),
            "free_bits_applied": clipped.float().mean(),
            "prior_entropy": categorical_entropy(prior_logits.detach()).sum(-1).mean(),
            "posterior_entropy": categorical_entropy(post_logits.detach()).sum(-1).mean(),
            "recon_accuracy": accuracy.detach(),
        }
        return loss, scalars, accuracy.detach()

    @property
    def num_shades(self) -> int:
        return NUM_SHADES
