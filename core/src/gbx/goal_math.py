"""Pixel-goal math shared by every goal env: distance, consecutive-hit done, shaped reward.

All functions are pure tensor ops on the frames' device (no host reads). The ones
taking ``out=``/scratch buffers write into them, so an env step allocates nothing.

* distance: ``mean(|frame - goal|) / 3`` over the pixels of shade indices 0..3,
  a number in ``[0, 1]`` (0 = the goal picture exactly, 1 = every pixel
  inverted from white to black);
* done: the distance stayed under ``tau`` for ``k`` consecutive steps (``k = 1``
  ends the episode on the first step under ``tau``);
* reward: ``bonus`` on the step that reaches the goal, plus an optional dense
  term ``shaping * (previous distance - distance)`` (positive when the screen
  got closer to the goal picture);
* failure: a task may also name failure screens (templates compared with the same
  distance); a step whose frame is under a failure template's tau ends the episode
  as a failure, with ``-penalty`` reward (:func:`end_as_failure`);
* milestones: screens on the way to the goal (templates, same distance) that pay a
  bonus once per episode, on the first step whose frame is under their tau; an episode
  that starts under one has passed it already (:func:`pass_milestone`,
  :func:`start_milestone`).
"""

from __future__ import annotations

import torch

MAX_SHADE = 3


def goal_distance(
    frames: torch.Tensor,
    goal: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    scratch: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean L1 distance (shades / 3) of each frame ``uint8 [N, *S]`` to ``goal [*S]``.

    ``goal`` may be uint8 or int16 (pass int16 to skip a cast per call).
    ``scratch`` (int16, the shape of ``frames``) and ``out`` (float32 ``[N]``)
    are optional preallocated buffers. Returns float32 ``[N]`` in ``[0, 1]``.
    """
    if frames.shape[1:] != goal.shape:
        raise ValueError(
            f"frames {tuple(frames.shape)} do not match the goal template "
            f"{tuple(goal.shape)}: capture the goal with the env's obs_size"
        )
    g = goal if goal.dtype == torch.int16 else goal.to(torch.int16)
    if scratch is None:
        scratch = torch.empty(frames.shape, dtype=torch.int16, device=frames.device)
    torch.sub(frames, g, out=scratch)
    scratch.abs_()
    if out is None:
        out = torch.empty(frames.shape[0], dtype=torch.float32, device=frames.device)
    torch.sum(scratch.view(frames.shape[0], -1), dim=1, dtype=torch.float32, out=out)
    pixels = goal.numel()
    return out.mul_(1.0 / (MAX_SHADE * pixels))


def count_under(
    dist: torch.Tensor, tau: float, consec: torch.Tensor, *, under: torch.Tensor | None = None
) -> torch.Tensor:
    """Consecutive steps under ``tau``, updated in place: ``+1`` where ``dist < tau``, else 0.

    ``under`` is an optional preallocated ``bool [N]`` buffer.
    """
    mask = torch.lt(dist, tau, out=under) if under is not None else torch.lt(dist, tau)
    consec.add_(1).mul_(mask)
    return consec


def reached(consec: torch.Tensor, k: int, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``bool [N]``: the distance was under tau for at least ``k`` consecutive steps."""
    if k < 1:
        raise ValueError(f"consecutive steps k must be >= 1, got {k}")
    return torch.ge(consec, k, out=out) if out is not None else torch.ge(consec, k)


def goal_reward(
    prev_dist: torch.Tensor,
    dist: torch.Tensor,
    done: torch.Tensor,
    *,
    bonus: float = 1.0,
    shaping: float = 0.0,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``bonus * done + shaping * (prev_dist - dist)`` as float32 ``[N]``."""
    if out is None:
        out = torch.empty_like(dist, dtype=torch.float32)
    if shaping != 0.0:
        torch.sub(prev_dist, dist, out=out).mul_(shaping)
    else:
        out.zero_()
    return out.add_(done, alpha=bonus)  # in place: no temporary tensor


def step_goal(
    frames: torch.Tensor,
    goal: torch.Tensor,
    prev_dist: torch.Tensor,
    consec: torch.Tensor,
    *,
    tau: float,
    k: int,
    bonus: float = 1.0,
    shaping: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of goal scoring without buffers: ``(dist, done, reward)``.

    ``consec`` is updated in place; ``prev_dist`` is left unchanged. Reference
    composition of the functions above (envs keep their own buffers).
    """
    dist = goal_distance(frames, goal)
    count_under(dist, tau, consec)
    done = reached(consec, k)
    reward = goal_reward(prev_dist, dist, done, bonus=bonus, shaping=shaping)
    return dist, done, reward


def end_as_failure(
    failed: torch.Tensor,
    goal_done: torch.Tensor,
    reward: torch.Tensor,
    *,
    penalty: float,
    done: torch.Tensor,
) -> torch.Tensor:
    """Fold failure screens into a step's outcome, in place (no allocation).

    ``failed`` (bool ``[N]``, the frame matched a failure template) is cleared where the
    goal was reached (the goal wins); ``reward`` loses ``penalty`` where it stays set;
    ``done`` becomes ``goal_done | failed``. Returns ``failed``: the failure mask
    (``info["failure"]``), while ``goal_done`` stays the success mask.
    """
    torch.gt(failed, goal_done, out=failed)  # failed and not goal_done, in place
    reward.add_(failed, alpha=-penalty)
    torch.logical_or(goal_done, failed, out=done)
    return failed


def pass_milestone(
    dist: torch.Tensor,
    tau: float,
    passed: torch.Tensor,
    reward: torch.Tensor,
    *,
    bonus: float,
    under: torch.Tensor,
    newly: torch.Tensor,
) -> torch.Tensor:
    """One milestone screen on one step, in place (no allocation): ``reward`` gains
    ``bonus`` where the frame (its distance ``dist`` to the milestone) is under ``tau`` and
    the episode had not passed it yet (``passed``, bool ``[N]``), then ``passed`` is set
    there. ``under`` and ``newly`` are bool ``[N]`` buffers; returns ``newly`` (passed on
    this step)."""
    torch.lt(dist, tau, out=under)
    torch.gt(under, passed, out=newly)  # under and not passed before
    reward.add_(newly, alpha=bonus)
    passed.logical_or_(under)
    return newly


def start_milestone(
    dist: torch.Tensor, tau: float, passed: torch.Tensor, mask: torch.Tensor,
    *, under: torch.Tensor,
) -> torch.Tensor:
    """New episodes (``mask``) start with a milestone passed exactly when their first
    frame is under its ``tau`` (a stage that starts at an earlier stage's goal pays no
    bonus for being there); the other envs keep ``passed``. In place; returns ``passed``."""
    torch.lt(dist, tau, out=under)
    return torch.where(mask, under, passed, out=passed)
