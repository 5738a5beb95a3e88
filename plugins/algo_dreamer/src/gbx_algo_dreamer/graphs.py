"""``algo.compile``: the posterior scan and the imagination rollout as compiled graphs.

An update of a small model is bound by kernel launches: the 64-step posterior scan and the
15-step imagination launch a few dozen small kernels per step. Both loops have static
shapes (``batch_size x batch_length`` and ``horizon``), so each can run as one captured
graph:

* on CUDA, the scan (forward and backward) through ``torch.cuda.make_graphed_callables``
  and the imagination (no gradients) through a ``torch.cuda.CUDAGraph`` replayed on static
  input buffers;
* on the CPU, both through ``torch.compile`` (one fused program per loop).

With ``algo.fuse_steps`` the CUDA graphs are of loops whose step is itself a
``torch.compile`` program (:meth:`RSSM.post_step`, :meth:`Behavior.imagine_step`): a graph
removes the launches' host cost but not the kernels, and an eager step runs a few dozen
small kernels one after another; the compiled step fuses its elementwise work. The work
around the loops is compiled too, as four programs with their backward passes: the frames'
embedding (:meth:`WorldModel.embed`), the world model's loss after the scan
(:meth:`WorldModel.loss_terms`: decoder, heads, reconstruction and KL terms), the
actor-critic targets (:meth:`Behavior.targets`) and losses (:meth:`Behavior.policy_terms`).
Eager, the normalisation layers of the encoder and decoder and the pixel-wise
reconstruction terms run as separate passes over a thousand frames' activations; compiled,
they are fused into the convolutions' neighbours.

Randomness is an input: the uniforms each loop consumes are drawn before it, from the
trainer's generator and in the order the eager loop draws them
(:meth:`RSSM.scan_noise`, :meth:`Behavior.imagination_noise`), so the compiled loops
sample what the eager ones would, and a captured graph holds no random-number state. The
weights are read in place, so the optimiser steps between updates reach the graphs.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gbx_algo_dreamer.behavior import Behavior, ImagineStep, PolicyTerms, Targets
from gbx_algo_dreamer.world_model import RSSM, Embed, Latent, LossTerms, PostStep, WorldModel


class PosteriorScan(nn.Module):
    """The posterior scan as a module of tensors in, tensors out (what graph capture takes):
    ``(embed [B, T, E], actions [B, T, A], is_first [B, T], noise [T, B, S, C])`` ->
    ``(deter [B, T, D], stoch [B, T, S, C], posterior logits, prior logits)``."""

    def __init__(self, rssm: RSSM, step: PostStep | None = None) -> None:
        super().__init__()
        self.rssm = rssm
        self.step = step

    def forward(self, embed: torch.Tensor, actions: torch.Tensor, is_first: torch.Tensor,
                noise: torch.Tensor) -> tuple[torch.Tensor, ...]:
        seq, posts, priors, _ = self.rssm.observe(embed, actions, is_first, noise=noise,
                                                  step=self.step)
        return seq.deter, seq.stoch, posts, priors


class Rollout(nn.Module):
    """The imagination rollout of :meth:`Behavior.imagine` at a fixed horizon:
    ``(deter [N, D], stoch [N, S, C], action noise, latent noise)`` -> ``(features, actions)``."""

    def __init__(self, wm: WorldModel, behavior: Behavior, horizon: int,
                 step: ImagineStep | None = None) -> None:
        super().__init__()
        self.wm, self.behavior, self.horizon = wm, behavior, horizon
        self.step = step

    def forward(self, deter: torch.Tensor, stoch: torch.Tensor, act_noise: torch.Tensor,
                lat_noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.behavior.imagine(self.wm, Latent(deter, stoch), self.horizon,
                                     noise=(act_noise, lat_noise), step=self.step)


class _CudaGraph:
    """A callable replaying one CUDA graph of ``fn`` on static copies of its inputs.

    Captured at the first call (after warm-up runs on a side stream, as capture requires).
    The outputs are the graph's own buffers: valid until the next call, which is enough for
    one update.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.graph: torch.cuda.CUDAGraph | None = None
        self.inputs: list[torch.Tensor] = []
        self.outputs: Any = None

    @torch.no_grad()
    def __call__(self, *args: torch.Tensor) -> Any:
        if self.graph is None:
            self.inputs = [a.clone() for a in args]
            side = torch.cuda.Stream(args[0].device)
            side.wait_stream(torch.cuda.current_stream(args[0].device))
            with torch.cuda.stream(side):
                for _ in range(3):  # allocator and library warm-up outside the capture
                    self.fn(*self.inputs)
            torch.cuda.current_stream(args[0].device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.outputs = self.fn(*self.inputs)
        for buffer, value in zip(self.inputs, args, strict=True):
            buffer.copy_(value)
        self.graph.replay()
        return self.outputs


def _compile(fn: Callable[..., Any]) -> Any:
    """One inductor program of ``fn`` for the update's fixed shapes; a graph break is an
    error rather than a silent split into eager pieces."""
    return torch.compile(fn, fullgraph=True, dynamic=False)


class CompiledLoops:
    """The compiled scan and rollout of one trainer (``algo.compile=true``), in the shapes
    :meth:`WorldModel.loss` (``observe=``) and :meth:`Behavior.loss` (``imagine=``) take."""

    def __init__(self, wm: WorldModel, behavior: Behavior, horizon: int,
                 device: torch.device, fuse_steps: bool = False) -> None:
        self.wm, self.behavior, self.horizon = wm, behavior, horizon
        self.device = device
        self.cuda = device.type == "cuda"
        post_step: PostStep | None = None
        imagine_step: ImagineStep | None = None
        # the update's work around the loops; None: the eager methods
        self.embed: Embed | None = None
        self.terms: LossTerms | None = None
        self.targets: Targets | None = None
        self.policy_terms: PolicyTerms | None = None
        if fuse_steps and self.cuda:  # on the CPU the whole loops are compiled below
            if importlib.util.find_spec("triton") is None:
                # inductor writes a CUDA program's kernels in Triton; without it the first
                # update would fail deep inside torch.compile
                raise ValueError("algo.fuse_steps compiles the update's GPU kernels with "
                                 "Triton, which this Python environment lacks: install the "
                                 "triton version your torch build names, or --set "
                                 "algo.fuse_steps=false")
            post_step = _compile(wm.rssm.post_step)
            imagine_step = _compile(functools.partial(behavior.imagine_step, wm))
            self.embed = _compile(wm.embed)
            self.terms = _compile(wm.loss_terms)
            self.targets = _compile(functools.partial(behavior.targets, wm))
            self.policy_terms = _compile(behavior.policy_terms)
        self._scan_module = PosteriorScan(wm.rssm, post_step)
        self._rollout_module = Rollout(wm, behavior, horizon, imagine_step)
        self._scan: Callable[..., Any] | None = None
        self._rollout: Callable[..., Any] | None = None
        if not self.cuda:
            self._scan = torch.compile(self._scan_module, dynamic=False)
            self._rollout = torch.compile(self._rollout_module, dynamic=False)

    def observe(self, embed: torch.Tensor, actions: torch.Tensor, is_first: torch.Tensor,
                generator: torch.Generator | None) -> tuple[Latent, torch.Tensor, torch.Tensor]:
        batch, length = embed.shape[:2]
        noise = self.wm.rssm.scan_noise(batch, length, embed.device, generator)
        if self._scan is None:
            graphed: Any = torch.cuda.make_graphed_callables(
                self._scan_module, (embed.detach().requires_grad_(embed.requires_grad),
                                    actions, is_first, noise), allow_unused_input=True)
            self._scan = graphed
        deter, stoch, posts, priors = self._scan(embed, actions, is_first, noise)
        return Latent(deter, stoch), posts, priors

    def observe_drawn(self, embed: torch.Tensor, actions: torch.Tensor,
                      is_first: torch.Tensor, generator: torch.Generator | None, *,
                      noise: torch.Tensor) -> tuple[Latent, torch.Tensor, torch.Tensor]:
        """:meth:`observe` on uniforms drawn beforehand (``generator`` unused), not
        captured on its own: the form a captured whole update runs (``algo.update_graph``)."""
        deter, stoch, posts, priors = self._scan_module(embed, actions, is_first, noise)
        return Latent(deter, stoch), posts, priors

    def imagine_drawn(self, start: Latent, generator: torch.Generator | None, *,
                      act_noise: torch.Tensor, lat_noise: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`imagine` on uniforms drawn beforehand, not captured on its own."""
        with torch.no_grad():
            return self._rollout_module(start.deter, start.stoch, act_noise, lat_noise)

    def imagine(self, start: Latent, generator: torch.Generator | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        act_noise, lat_noise = self.behavior.imagination_noise(
            self.wm, start.deter.shape[0], self.horizon, start.deter.device, generator)
        if self._rollout is None:
            self._rollout = _CudaGraph(self._rollout_module)
        with torch.no_grad():
            feats, actions = self._rollout(start.deter, start.stoch, act_noise, lat_noise)
        return feats, actions
