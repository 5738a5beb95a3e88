"""Which run-kernel variant a batch runs, chosen by timing both on its own launches.

The two variants of the run kernel (cpu.HOST) give the same state bit for bit, but which
one is faster on a GPU depends on the game as much as on the batch: in warps of 16 Game
Boys, flappyboy runs about twice as fast on the CUDA variant and the bundled game about
1.6 times as fast on the CPU variant (docs/benchmarks.md, "The CB lane, the ALU's rare
operations, and variants timed per batch"). A batch that may run either
(``GameBoyBatch(kernel="measure")``, and ``kernel="auto"`` on a GPU where the launch plan
picks the CUDA variant) times rounds of its frames launches, alternately on each
variant, and runs the one it timed faster in between.

A game's first seconds (a title screen, the first frames of play) can cost both variants
alike where its play does not, so rounds come early and then less and less often: the
first after ``SETTLE_LAUNCHES`` launches, the next ones ``EARLY_GAPS`` launches after the
one before, then every ``RETIME_EVERY`` launches, since what a game does (and so which
variant suits it) changes as it is played. A round replaces the variant running only with
one whose median time per frame is at least ``SWITCH_MARGIN`` lower: a round in a phase
that does not tell them apart keeps what runs.

This module is the schedule and the choice, with no device work: :class:`VariantClock`
says which variant each launch runs and whether it is timed, takes the timings back, and
makes the choice.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

# Frames launches a round times on each variant, taking turns.
TRIALS = 3
# Launches before the first round: a batch's first launches (a boot, a title screen) are
# often unlike the rest of its run.
SETTLE_LAUNCHES = 2
# Launches from the start of one round to the start of the next: the first gaps, then
# RETIME_EVERY.
EARLY_GAPS = (10, 100)
RETIME_EVERY = 1000
# How much faster (in median time per frame) the other variant must be to replace the one
# running.
SWITCH_MARGIN = 0.10
# Rounds a benchmark lets a batch that times both variants finish before it times the
# batch itself (the first two, by its 18th launch): the start-up of that batch, like its
# kernel build, is not its steady speed.
WARM_ROUNDS = 2
# At most this many steps a benchmark adds to its warm-up for them.
WARM_EXTRA_STEPS = 24


def fastest(times: Mapping[str, Sequence[float]]) -> str:
    """The variant with the lowest median of its times (seconds per frame); the first
    named wins a tie."""
    if not times or any(not t for t in times.values()):
        raise ValueError("every variant needs at least one time")
    return min(times, key=lambda v: statistics.median(times[v]))


def choose(times: Mapping[str, Sequence[float]], running: str,
           margin: float = SWITCH_MARGIN) -> str:
    """The variant to run after a round with ``times``: the fastest, where its median time
    is below ``running``'s by at least ``margin`` (a fraction of ``running``'s), else
    ``running``."""
    best = fastest(times)
    if best == running:
        return running
    gain = 1 - statistics.median(times[best]) / statistics.median(times[running])
    return best if gain >= margin else running


class VariantClock:
    """The variant each launch of a batch runs, and which launches are timed.

    ``variants``: the candidates, the one to run before any timing first. Call
    :meth:`next_launch` before every launch (``frames``: the frames it runs, 0 for a
    launch of cycles, which is never timed); it returns the variant to run and whether to
    time the launch. Hand each timed launch's seconds back with :meth:`add_time` (in any
    order, when they are known); once a round's times are all in, :attr:`choice` is the
    variant to run (see :func:`choose`)."""

    def __init__(self, variants: Sequence[str], trials: int = TRIALS,
                 settle: int = SETTLE_LAUNCHES, early_gaps: Sequence[int] = EARLY_GAPS,
                 retime_every: int = RETIME_EVERY, margin: float = SWITCH_MARGIN) -> None:
        if len(variants) < 2 or len(set(variants)) != len(variants):
            raise ValueError(f"need two or more different variants, got {list(variants)}")
        if trials < 1 or settle < 0 or min((retime_every, *early_gaps)) < trials * len(
                variants) or not 0 <= margin < 1:
            raise ValueError("trials must be >= 1, settle >= 0, every gap between rounds "
                             "(retime_every, early_gaps) at least one round of trials, and "
                             "margin in [0, 1)")
        self.variants = tuple(variants)
        self.trials = trials
        self.margin = margin
        self._gaps = [*early_gaps, retime_every]
        self.choice = self.variants[0]
        self.rounds = 0  # complete rounds
        # The per-frame times of the last complete round, per variant (empty before one).
        self.last_round: dict[str, list[float]] = {}
        self._launches = 0
        self._round_at = settle  # the next round starts at the first launch from here
        self._todo: list[str] = []  # the round's remaining timed launches, in order
        self._pending: dict[int, tuple[str, int]] = {}  # ticket -> (variant, frames)
        self._times: dict[str, list[float]] = {}
        self._tickets = 0
        # While held (hold), no round starts: one that falls due starts at the first
        # launch after.
        self.held = False

    def hold(self, held: bool) -> None:
        """Start no round while ``held`` (one under way runs on); a benchmark holds a batch
        over its timed launches, which then measure the variant running, as the launches
        between rounds do."""
        self.held = held

    def next_launch(self, frames: int) -> tuple[str, int | None]:
        """(the variant the next launch runs, a ticket to time it with, or None)."""
        if self._launches >= self._round_at and not self.timing and not self.held:
            self._todo = [v for _ in range(self.trials) for v in self.variants]
            self._times = {v: [] for v in self.variants}
            self._round_at = self._launches + (
                self._gaps.pop(0) if len(self._gaps) > 1 else self._gaps[0])
        self._launches += 1
        if frames < 1 or not self._todo:
            return self.choice, None
        variant = self._todo.pop(0)
        self._tickets += 1
        self._pending[self._tickets] = (variant, frames)
        return variant, self._tickets

    def add_time(self, ticket: int, seconds: float) -> None:
        """The time a timed launch took; the round's choice is made with its last."""
        variant, frames = self._pending.pop(ticket)
        self._times[variant].append(seconds / frames)
        if not self._todo and not self._pending:
            self.choice = choose(self._times, self.choice, self.margin)
            self.last_round = self._times
            self._times = {}
            self.rounds += 1

    @property
    def timing(self) -> bool:
        """Whether a round has timed launches still to run or to hear back from."""
        return bool(self._todo or self._pending)
