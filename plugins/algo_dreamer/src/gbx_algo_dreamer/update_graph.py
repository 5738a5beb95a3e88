"""``algo.update_graph``: a whole update replayed as one CUDA graph.

With the loops captured and their steps fused (``algo.compile``, ``algo.fuse_steps``), an
update of size S keeps an H200 busy for about 21 ms, yet took 23 - 26 ms of wall clock,
varying by process and machine: the host's Python (autograd, the compiled programs'
wrappers, three optimiser steps) issued the update's 3,700 kernels more slowly than the
GPU ran them. Captured whole, the update is one graph launch after the replay sample and
the draw of its random numbers.

What the graph holds: the world model's loss, backward, gradient clipping and Adam step,
then the actor-critic's imagination, losses, backward, clipping, Adam steps, the slow
critic and the return scale's statistics, and the non-finite bookkeeping: everything
:meth:`gbx_algo_dreamer.trainer.DreamerTrainer.train_step` does. The loops run inside it uncaptured
(:meth:`CompiledLoops.observe_drawn`, :meth:`CompiledLoops.imagine_drawn`), with their
fused steps. What stays outside: the replay sample and the uniforms the scan and the
rollout consume, drawn from the trainer's generator in the order the compiled loops draw
them, so the graph samples what they would, and holds no random-number state.

A capture needs warm-up runs first (allocator, cuBLAS, cuDNN's search, autograd's streams),
and a warm-up run is a real update: the capture takes a snapshot of everything an update
changes (weights, optimiser state, return scale, non-finite bookkeeping) and puts it back
after, so the first replayed update is the first update. Adam runs with
``capturable=True`` (its step counts on the device). The graph reads the weights and
optimiser state in place; whatever replaces those tensors (loading a checkpoint) drops
the graph, which the next update captures again.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import torch
from torch import nn

from gbx_algo_dreamer.math_ops import ReturnNorm
from gbx_algo_dreamer.replay import Batch

# warm-up updates before the capture (torch's make_graphed_callables runs three)
WARMUP_UPDATES = 3


class GraphedTrainer(Protocol):
    """What the graph needs of :class:`gbx_algo_dreamer.trainer.DreamerTrainer`."""

    @property
    def wm(self) -> nn.Module: ...

    @property
    def behavior(self) -> nn.Module: ...

    @property
    def retnorm(self) -> ReturnNorm: ...

    def draw_update_noise(self) -> tuple[torch.Tensor, ...]: ...

    def train_step(self, batch: Batch, noise: tuple[torch.Tensor, ...] | None = None
                   ) -> dict[str, torch.Tensor]: ...

    def optimisers(self) -> tuple[torch.optim.Optimizer, ...]: ...

    def bad_state(self) -> tuple[torch.Tensor, ...]: ...


class _Snapshot:
    """What an update changes, copied, to be put back in place."""

    def __init__(self, trainer: GraphedTrainer) -> None:
        self.tensors = [*trainer.wm.parameters(), *trainer.wm.buffers(),
                        *trainer.behavior.parameters(), *trainer.behavior.buffers(),
                        trainer.retnorm.low, trainer.retnorm.high, *trainer.bad_state()]
        self.optimisers = trainer.optimisers()
        for opt in self.optimisers:
            for state in opt.state.values():
                self.tensors += [v for v in state.values() if torch.is_tensor(v)]
        self.copies = [t.detach().clone() for t in self.tensors]
        self.stateless = [{p for group in opt.param_groups for p in group["params"]
                           if p not in opt.state} for opt in self.optimisers]

    @torch.no_grad()
    def restore(self) -> None:
        for tensor, copy in zip(self.tensors, self.copies, strict=True):
            tensor.copy_(copy)
        # a parameter without optimiser state before the warm-up: the state its first
        # step creates, as that step creates it (Adam: zero moments, step count 0)
        for opt, fresh in zip(self.optimisers, self.stateless, strict=True):
            for param in fresh:
                for value in opt.state.get(param, {}).values():
                    if torch.is_tensor(value):
                        value.zero_()


class UpdateGraph:
    """One trainer's update as a CUDA graph: captured at the first call, replayed after."""

    def __init__(self, trainer: GraphedTrainer) -> None:
        self.trainer = trainer
        self.graph: torch.cuda.CUDAGraph | None = None
        self.inputs: list[torch.Tensor] = []
        self.names: list[str] = []
        self.values: torch.Tensor | None = None

    def __call__(self, batch: Batch) -> dict[str, torch.Tensor]:
        noise = self.trainer.draw_update_noise()
        # the fields themselves (dataclasses.astuple would deep-copy every tensor)
        args = [*(getattr(batch, f.name) for f in dataclasses.fields(Batch)), *noise]
        if self.graph is None:
            self._capture(args)
        for buffer, value in zip(self.inputs, args, strict=True):
            buffer.copy_(value)
        assert self.graph is not None and self.values is not None
        self.graph.replay()
        # the graph's outputs are overwritten by the next replay: one copy of all scalars
        return dict(zip(self.names, self.values.clone().unbind(), strict=True))

    def _run(self) -> torch.Tensor:
        fields = len(dataclasses.fields(Batch))
        batch = Batch(*self.inputs[:fields])
        scalars = self.trainer.train_step(batch, tuple(self.inputs[fields:]))
        self.names = list(scalars)
        return torch.stack([v.detach().float().reshape(()) for v in scalars.values()])

    def _capture(self, args: list[torch.Tensor]) -> None:
        self.inputs = [a.clone() for a in args]
        device = self.inputs[0].device
        snapshot = _Snapshot(self.trainer)
        main = torch.cuda.current_stream(device)
        side = torch.cuda.Stream(device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            for _ in range(WARMUP_UPDATES):
                self._run()
        main.wait_stream(side)
        snapshot.restore()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.values = self._run()
        self.graph = graph
