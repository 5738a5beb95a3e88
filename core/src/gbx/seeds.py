"""The seed scheme: one integer seed per (rank, stream), none equal to another.

A run has one base seed (``run.seed``). Every random stream of every rank
draws its seed from a block of its own:

    seed(base, rank, stream) = base + rank * RANK_STRIDE + stream * STREAM_STRIDE

with ``RANK_STRIDE = len(Stream) * STREAM_STRIDE``. Each rank owns the block
``[base + rank * RANK_STRIDE, base + (rank + 1) * RANK_STRIDE)`` and each stream
a ``STREAM_STRIDE``-wide slice of it, so two different (rank, stream) pairs
never share a seed, whatever the number of ranks; an env that seeds its copies
``seed + i`` stays inside its slice while it has fewer than ``STREAM_STRIDE``
copies.

The run context's ``seed`` is the rank's seed (:func:`rank_seed`, which is
also its training-env seed); trainers derive the other streams from it with
:func:`derive`, and ask the run for eval envs with
``make_env(n, seed_offset=offset(Stream.EVAL_ENV))``.
"""

from __future__ import annotations

import enum

__all__ = [
    "RANK_STRIDE",
    "STREAM_STRIDE",
    "Stream",
    "derive",
    "eval_env_seed",
    "eval_rng_seed",
    "offset",
    "rank_seed",
    "stream_seed",
    "train_env_seed",
    "train_rng_seed",
]


class Stream(enum.IntEnum):
    """The random streams of one rank."""

    TRAIN_ENV = 0  # the training envs (resets, start states)
    EVAL_ENV = 1  # the evaluation envs (every evaluation replays the same episodes)
    TRAIN_RNG = 2  # model initialisation, global RNGs and the trainer's action sampling
    EVAL_RNG = 3  # evaluation's action sampling and its random-policy baseline
    EXPLORE = 4  # the explorer's choices (which finished episodes restart from which state)


# A prime width per stream: room for up to about a million env copies per stream.
STREAM_STRIDE = 1_000_003
RANK_STRIDE = len(Stream) * STREAM_STRIDE


def offset(stream: Stream) -> int:
    """How far ``stream``'s seed lies from its rank's seed."""
    return int(stream) * STREAM_STRIDE


def rank_seed(base: int, rank: int) -> int:
    """The seed of ``rank`` (its training-env seed); the base seed itself on rank 0."""
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")
    return int(base) + int(rank) * RANK_STRIDE


def derive(rank_seed_: int, stream: Stream) -> int:
    """The seed of ``stream`` given a rank's seed (a run context's ``seed``)."""
    return int(rank_seed_) + offset(stream)


def stream_seed(base: int, rank: int, stream: Stream) -> int:
    """The seed of ``stream`` on ``rank`` of a run seeded ``base``."""
    return derive(rank_seed(base, rank), stream)


def train_env_seed(base: int, rank: int) -> int:
    return stream_seed(base, rank, Stream.TRAIN_ENV)


def eval_env_seed(base: int, rank: int) -> int:
    return stream_seed(base, rank, Stream.EVAL_ENV)


def train_rng_seed(base: int, rank: int) -> int:
    return stream_seed(base, rank, Stream.TRAIN_RNG)


def eval_rng_seed(base: int, rank: int) -> int:
    return stream_seed(base, rank, Stream.EVAL_RNG)
