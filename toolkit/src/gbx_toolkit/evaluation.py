"""Evaluate a policy on a batch of evaluation envs, with a random-policy baseline.

Each env of the batch contributes exactly its first episode of a round, so
short episodes are not over-represented (which happens when one keeps
collecting finished episodes until a count is reached). Episode bookkeeping
(returns, lengths, outcome) stays on the device; the host only reads one
"all finished?" flag every ``check_every`` steps and the results once. On the CPU that
read costs nothing, so the flag is read every step there (a round ends on the step its
last episode ends); on a GPU every :data:`CHECK_EVERY_GPU` steps.

Success means the episode ended at the goal: ``info["success"]`` where the env
reports it (an env with failure screens ends episodes with ``done`` both at the goal
and at a failure, ``info["failure"]``), else ``done``; not ``trunc`` (the time limit).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from gbx.api import Env, RunContext
from gbx.seeds import Stream, derive, offset

Policy = Callable[[torch.Tensor], torch.Tensor]

# Hard cap on steps of one round, so an env that never ends cannot hang a run.
DEFAULT_MAX_ROUND_STEPS = 100_000
# Steps between reads of the "all finished?" flag on a GPU (each read waits for the device).
CHECK_EVERY_GPU = 8
# Most envs one evaluation batch holds; more episodes than this play in further rounds.
MAX_EVAL_ENVS = 1024


def eval_batch_size(episodes: int) -> int:
    """Envs of an evaluation batch: one per episode (every episode plays at once), at most
    :data:`MAX_EVAL_ENVS`."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    return min(int(episodes), MAX_EVAL_ENVS)


def random_policy(num_actions: int, generator: torch.Generator | None) -> Policy:
    """Uniform random actions (on the observations' device)."""

    def act(obs: torch.Tensor) -> torch.Tensor:
        return torch.randint(
            num_actions, (obs.shape[0],), device=obs.device, generator=generator
        )

    return act


def run_episodes(
    env: Env,
    policy: Policy,
    episodes: int,
    *,
    check_every: int | None = None,
    max_round_steps: int = DEFAULT_MAX_ROUND_STEPS,
) -> dict[str, list[float]]:
    """Play ``episodes`` episodes (one per env per round); return per-episode lists.

    Keys: ``return``, ``length``, ``success`` (1.0/0.0: ended at the goal), ``failure``
    (1.0/0.0: ended on a failure screen), ``finished`` (0.0 when a round hit
    ``max_round_steps`` before the env's episode ended), and with an env that reports
    ``info["milestones"]`` also ``milestones`` (how many the episode passed).
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    n = env.num_envs
    device = torch.device(env.device)
    if check_every is None:
        check_every = 1 if device.type == "cpu" else CHECK_EVERY_GPU
    rounds = math.ceil(episodes / n)
    results = torch.zeros(6, rounds * n, dtype=torch.float32, device=device)
    with_milestones = False
    ep_return = torch.zeros(n, dtype=torch.float32, device=device)
    ep_length = torch.zeros(n, dtype=torch.float32, device=device)
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    for r in range(rounds):
        obs = env.reset()
        ep_return.zero_()
        ep_length.zero_()
        finished.zero_()
        out = results[:, r * n : (r + 1) * n]
        with torch.no_grad():
            for step in range(1, max_round_steps + 1):
                actions = policy(obs)
                obs, reward, done, trunc, info = env.step(actions)
                success, failure = episode_outcome(done, info)
                live = ~finished
                live_f = live.to(torch.float32)
                ep_return.add_(reward.to(torch.float32) * live_f)
                ep_length.add_(live_f)
                ending = live & (done | trunc)
                # Record outcomes of episodes ending now; later episodes of the env are ignored.
                out[0] = torch.where(ending, ep_return, out[0])
                out[1] = torch.where(ending, ep_length, out[1])
                out[2] = torch.where(ending, success.to(torch.float32), out[2])
                out[3] = torch.where(ending, 1.0, out[3])
                if failure is not None:
                    out[4] = torch.where(ending, failure.to(torch.float32), out[4])
                passed = info.get("milestones")
                if isinstance(passed, torch.Tensor):
                    with_milestones = True
                    # the count of every episode still under way (its final one when
                    # it ends now; an unfinished one keeps what it passed so far)
                    out[5] = torch.where(live, passed.to(torch.float32), out[5])
                finished |= ending
                if step % check_every == 0 and bool(finished.all()):
                    break
        # Unfinished episodes (hit the cap) report what they had so far, as failures.
        out[0] = torch.where(finished, out[0], ep_return)
        out[1] = torch.where(finished, out[1], ep_length)
    host = results[:, :episodes].tolist()  # the one read of the results
    out_lists = {"return": host[0], "length": host[1], "success": host[2],
                 "finished": host[3], "failure": host[4]}
    if with_milestones:
        out_lists["milestones"] = host[5]
    return out_lists


def episode_outcome(
    done: torch.Tensor, info: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(success, failure)`` masks of a step: ``info["success"]`` (else ``done``) and
    ``info["failure"]`` (None when the env has no failure screens)."""
    success = info.get("success")
    failure = info.get("failure")
    return (success if isinstance(success, torch.Tensor) else done,
            failure if isinstance(failure, torch.Tensor) else None)


def summarize(per_episode: dict[str, list[float]], prefix: str = "") -> dict[str, Any]:
    """success_rate, median_steps_to_goal (None without successes), mean_return, ..."""
    returns = per_episode["return"]
    failure = per_episode.get("failure", [0.0] * len(returns))
    lengths = per_episode["length"]
    success = per_episode["success"]
    count = len(returns)
    to_goal = sorted(n for n, s in zip(lengths, success, strict=True) if s > 0.5)
    median: float | None
    if not to_goal:
        median = None
    elif len(to_goal) % 2:
        median = to_goal[len(to_goal) // 2]
    else:
        median = 0.5 * (to_goal[len(to_goal) // 2 - 1] + to_goal[len(to_goal) // 2])
    out = {
        f"{prefix}success_rate": sum(success) / count,
        f"{prefix}median_steps_to_goal": median,
        f"{prefix}mean_return": sum(returns) / count,
        f"{prefix}mean_length": sum(lengths) / count,
        f"{prefix}failure_rate": sum(failure) / count,
    }
    if "milestones" in per_episode:
        out[f"{prefix}mean_milestones"] = sum(per_episode["milestones"]) / count
    return out


def make_eval_env(ctx: RunContext, num_envs: int) -> Env:
    """The run's evaluation envs, on the ``EVAL_ENV`` seed stream (:mod:`gbx.seeds`): every
    evaluation of a run replays the same episodes, never a training env's, and starts
    from the task's real start state (not ``training=True``: no curriculum start states)."""
    return ctx.make_env(num_envs, seed_offset=offset(Stream.EVAL_ENV))


def eval_seed(ctx: RunContext) -> int:
    """The seed of an evaluation's random streams (``EVAL_RNG``): its action sampling and
    its random baseline, apart from the training stream so evaluating never moves it."""
    return derive(ctx.seed, Stream.EVAL_RNG)


def eval_generator(ctx: RunContext, device: torch.device) -> torch.Generator:
    """A fresh generator on ``device`` seeded :func:`eval_seed` (one per evaluation)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(eval_seed(ctx))
    return generator


def evaluate_policy(
    env: Env,
    policy: Policy,
    episodes: int,
    *,
    greedy: bool,
    baseline: bool = True,
    seed: int = 0,
    check_every: int | None = None,
    max_round_steps: int = DEFAULT_MAX_ROUND_STEPS,
) -> dict[str, Any]:
    """Evaluate ``policy`` on ``env``; add the random-policy baseline as ``random_*`` keys."""
    summary: dict[str, Any] = {"episodes": episodes, "greedy": greedy}
    summary.update(
        summarize(
            run_episodes(
                env, policy, episodes, check_every=check_every, max_round_steps=max_round_steps
            )
        )
    )
    if baseline:
        generator = torch.Generator(device=torch.device(env.device))
        generator.manual_seed(seed)
        random_episodes = run_episodes(
            env,
            random_policy(env.num_actions, generator),
            episodes,
            check_every=check_every,
            max_round_steps=max_round_steps,
        )
        summary.update(summarize(random_episodes, prefix="random_"))
    return summary
