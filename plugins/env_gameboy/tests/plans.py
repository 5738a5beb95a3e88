"""Scripted play for the tests: one button plan per env, played in lockstep; an env whose
plan is over presses B (a wait of one step while walking)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from gbx_gameboy.game.solutions import ACTIONS

WAIT = ACTIONS.index("B")


def actions_at(plans: Sequence[Sequence[int]], t: int) -> torch.Tensor:
    """Every env's action at step ``t`` of its plan (``WAIT`` past its end)."""
    return torch.tensor([p[t] if t < len(p) else WAIT for p in plans])


def scripted_policy(plans: Sequence[Sequence[int]]) -> Callable[[torch.Tensor], torch.Tensor]:
    """A policy for :func:`gbx_toolkit.evaluation.evaluate_policy` that plays ``plans``
    from its first call on, one step per call."""
    step = [0]

    def policy(_obs: torch.Tensor) -> torch.Tensor:
        step[0] += 1
        return actions_at(plans, step[0] - 1)

    return policy
