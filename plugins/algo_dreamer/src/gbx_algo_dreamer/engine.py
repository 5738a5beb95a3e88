"""Schedules of collection and training (``algo.engine``).

* ``sync``: collect one env iteration, commit it, then run the updates it earned.
* ``overlapped``: collection runs in chunks of ``algo.overlap_chunk`` env iterations. While
  a chunk is collected (player forward, ``env.step``, staged replay writes) the updates
  earned by the previous chunks run on the replay committed before it. On CUDA the chunk
  runs on a side stream and the updates on the main stream, their launches interleaved so
  the device sees both; on the CPU the same schedule runs in the same order, sequentially.

Correctness of the overlapped schedule rests on four rules:

1. The player acts with :class:`PlayerWeights`, a copy of the acting parts of the world
   model and actor/critic refreshed at the start of every chunk, so updates of the live
   weights during the chunk never reach a collection step half-way.
2. A chunk only stages replay records; the commit happens after the chunk has been joined,
   and the replay reserves ``2 * overlap_chunk`` slots per stream past the committed end, so
   sampling never reads a slot the chunk is writing (also when the ring wraps).
3. The streams meet only at chunk boundaries, through events: the side stream waits for the
   main stream before a chunk (weight copy, commit and checkpoint reads are done), the main
   stream waits for the side stream after it. Env resets and restores run on the side
   stream too (:meth:`OverlappedEngine.collecting`), so the env's tensors are born there;
   the player's state, which may be made on the main stream, is handed over with
   ``record_stream`` before each chunk.
4. Metrics written by the updates are folded into the accumulator after the join, so the
   accumulator is never written by both streams at once.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

import torch
from torch import nn

from gbx_algo_dreamer.behavior import Behavior
from gbx_algo_dreamer.world_model import RSSM, WorldModel, embed_frames


class Learner(Protocol):
    """What an engine drives: the trainer's collection and update steps, nothing else
    (:class:`gbx_algo_dreamer.trainer.DreamerTrainer` implements it; the engine never
    imports the trainer)."""

    device: torch.device
    # env steps collected and committed whose updates are not yet earned (overlapped
    # engine; part of the trainer's checkpoint)
    pending_env_steps: int

    @property
    def num_envs(self) -> int: ...

    def collect_step(self) -> None:
        """One env iteration into staged replay records, on the current stream."""

    def commit(self) -> None:
        """Make the staged replay records sampleable."""

    def ready(self) -> bool:
        """Whether the replay holds enough to train on."""

    def earn(self, env_steps: int) -> int:
        """Count ``env_steps`` trained env steps; return the updates now owed."""

    def update(self) -> Mapping[str, torch.Tensor]:
        """One gradient step; its scalars."""

    def add_update_scalars(self, scalars: Mapping[str, torch.Tensor]) -> None:
        """Fold an update's scalars into the metrics (main stream, after a join)."""

    def crossing_tensors(self) -> list[torch.Tensor | None]:
        """Tensors collection reads that may have been made on the main stream."""


class PlayerWeights(nn.Module):
    """A private copy of the modules the player reads (encoder, RSSM, actor, critic).

    :meth:`refresh` copies the live weights in; between refreshes the copy stays fixed
    whatever the optimisers do to the live modules.
    """

    def __init__(self, wm: WorldModel, behavior: Behavior) -> None:
        super().__init__()
        self.num_actions = wm.num_actions
        self.encoder = copy.deepcopy(wm.encoder).requires_grad_(False)
        self.rssm: RSSM = copy.deepcopy(wm.rssm).requires_grad_(False)
        self.actor = copy.deepcopy(behavior.actor).requires_grad_(False)
        self.critic = copy.deepcopy(behavior.critic).requires_grad_(False)
        live = (wm.encoder, wm.rssm, behavior.actor, behavior.critic)
        mine = (self.encoder, self.rssm, self.actor, self.critic)
        self._sources = [t for m in live for t in _tensors(m)]
        self._targets = [t for m in mine for t in _tensors(m)]

    def embed(self, obs: torch.Tensor) -> torch.Tensor:
        return embed_frames(self.encoder, obs)

    @torch.no_grad()
    def refresh(self) -> None:
        """Copy the live weights in (device copies on the current stream, no host read)."""
        torch._foreach_copy_(self._targets, self._sources)


def _tensors(module: nn.Module) -> list[torch.Tensor]:
    return [*module.parameters(), *module.buffers()]


class Engine(Protocol):
    name: str

    def advance(self, max_iterations: int) -> None:
        """Collect up to ``max_iterations`` env iterations (at least one) and train."""

    def drain(self) -> int:
        """Run every update already earned; returns how many ran."""

    def collecting(self) -> contextlib.AbstractContextManager[object]:
        """Context for env work outside chunks (reset, restore): runs on the collection
        stream, and the main stream waits for it on exit."""


class SyncEngine:
    """One env iteration, committed at once, then the updates it earned."""

    name = "sync"

    def __init__(self, learner: Learner) -> None:
        self.tr = learner

    def advance(self, max_iterations: int) -> None:
        tr = self.tr
        tr.collect_step()
        tr.commit()
        if tr.ready():
            for _ in range(tr.earn(tr.num_envs)):
                tr.add_update_scalars(tr.update())

    def drain(self) -> int:
        return 0  # sync never leaves earned updates behind

    def collecting(self) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()


class StreamPair:
    """The main stream and a side stream on CUDA (the overlapped engine's collection, the
    concurrent update's actor-critic); no-ops on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.side: torch.cuda.Stream | None = None
        self._main_ready: torch.cuda.Event | None = None
        self._side_done: torch.cuda.Event | None = None
        if device.type == "cuda":
            with torch.cuda.device(device):  # stream and events of the trainer's GPU
                self.side = torch.cuda.Stream(device)
                # reused: each record() replaces the marker, and a wait already enqueued
                # keeps the marker it saw
                self._main_ready = torch.cuda.Event()
                self._side_done = torch.cuda.Event()

    def fork(self) -> None:
        """The side stream waits for everything enqueued on the main stream so far."""
        if self.side is not None and self._main_ready is not None:
            self._main_ready.record(torch.cuda.current_stream(self.device))
            self.side.wait_event(self._main_ready)

    def join(self) -> None:
        """The main stream waits for everything enqueued on the side stream so far."""
        if self.side is not None and self._side_done is not None:
            self._side_done.record(self.side)
            torch.cuda.current_stream(self.device).wait_event(self._side_done)

    def on_side(self) -> contextlib.AbstractContextManager[object]:
        if self.side is None:
            return contextlib.nullcontext()
        return torch.cuda.stream(self.side)

    def hand_over(self, tensors: Iterable[torch.Tensor | None]) -> None:
        """Tell the allocator that the side stream uses these main-stream tensors, so their
        memory is not reused before the side stream's work on them is done."""
        if self.side is None:
            return
        for t in tensors:
            if t is not None and t.is_cuda:
                t.record_stream(self.side)


class OverlappedEngine:
    """Chunks of collection on a side stream beside the updates of the committed replay."""

    name = "overlapped"

    def __init__(self, learner: Learner, weights: PlayerWeights, chunk: int) -> None:
        self.tr = learner
        self.weights = weights
        self.chunk = chunk
        self.streams = StreamPair(learner.device)

    def advance(self, max_iterations: int) -> None:
        tr = self.tr
        chunk = max(1, min(self.chunk, max_iterations))
        # updates earned by committed steps of earlier chunks: their data is all committed
        updates = self._take_pending()
        self.weights.refresh()
        self.streams.fork()
        # the player's recurrent state is made on the main stream (start, resume) and
        # replaced on the side stream; the live observations may be too (safe to repeat)
        self.streams.hand_over(tr.crossing_tensors())
        scalars = list(self._interleave(chunk, updates))
        self.streams.join()
        tr.commit()  # main stream, after the join: the chunk becomes sampleable
        for s in scalars:
            tr.add_update_scalars(s)

    def _take_pending(self) -> int:
        """Credit the committed env steps not yet counted; return the updates now owed."""
        tr = self.tr
        owed = tr.earn(tr.pending_env_steps)
        tr.pending_env_steps = 0
        return owed

    def _interleave(self, chunk: int, updates: int) -> Iterator[Mapping[str, torch.Tensor]]:
        """Collection steps on the side stream with the updates spread evenly between them
        (host launch order; the device runs the two streams concurrently)."""
        tr = self.tr
        done = 0
        for i in range(chunk):
            with self.streams.on_side():
                tr.collect_step()
            if tr.ready():  # host counters: the updates this step earns run next chunk
                tr.pending_env_steps += tr.num_envs
            while done < updates * (i + 1) // chunk:
                yield tr.update()
                done += 1

    @contextlib.contextmanager
    def collecting(self) -> Iterator[None]:
        self.streams.fork()
        with self.streams.on_side():
            yield
        self.streams.join()

    def drain(self) -> int:
        """Run the updates the last chunks earned (no collection beside them)."""
        tr = self.tr
        n = self._take_pending()
        for _ in range(n):
            tr.add_update_scalars(tr.update())
        return n
