"""Records shaped like each algorithm's, and run metadata, for the observer tests."""

from __future__ import annotations

from typing import Any

NUM_ENVS = 16


def core_record(step: int) -> dict[str, Any]:
    """Keys every algorithm's record carries (as produced by gbx_toolkit.metrics)."""
    return {
        "run_id": "run-a",
        "trace_id": f"run-a:{step}",
        "env_steps": 256 * step,
        "opt_steps": 4 * step,
        "wall_time_s": 0.5 * step,
        "sps": 512.0,
        "done_rate": 0.02,
        "trunc_rate": 0.01,
        "reset_rate": 0.03,
        "success_rate": 0.4 + 0.01 * step,
        "episodes": 7,
        "reward_mean": 0.05 * step,
        "dist_p10": 0.01,
        "dist_p50": 0.2,
        "dist_p90": 0.5,
        "entropy_mean": 1.9 - 0.01 * step,
        "value_mean": 0.3,
        "value_std": 0.1,
        "action_hist": [10, 20, 0, 50, 60, 70, 46],
    }


def ppo_record(step: int) -> dict[str, Any]:
    return {
        **core_record(step),
        "policy_loss": -0.01,
        "value_loss": 0.2,
        "approx_kl": 0.004,
        "clip_frac": 0.1,
        "lr": 2.5e-4,
    }


def a2c_record(step: int) -> dict[str, Any]:
    return {**core_record(step), "policy_loss": 0.03, "value_loss": 0.5, "grad_norm": 0.7}


def dreamer_record(step: int) -> dict[str, Any]:
    return {
        **core_record(step),
        "wm_loss": 3.2,
        "kl_loss": 1.0,
        "recon_loss": 2.1,
        "actor_loss": -0.2,
        "critic_loss": 0.4,
        "replay_size": 4096,
        "imag_return_pcts": [0.1, 0.5, 0.9],
    }


META = {
    "run_id": "run-a",
    "num_envs": NUM_ENVS,
    "seed": 0,
    "git_commit": "0" * 40,
    "git_dirty": False,
    "config": {"run": {"algo": "ppo", "env": "toy", "steps": 4096}, "algo": {"lr": 2.5e-4}},
    "versions": {"python": "3.11", "torch": "2.x"},
}


def simulate_run(run: Any, observers: list[Any], *, updates: int, num_envs: int = 16) -> None:
    """Drive observers with real numbers: the toy env, a random policy and gbx_toolkit.metrics.

    Stands in for a trainer and the run loop: per update it collects 32 steps, feeds
    the accumulator, emits one record (with the common fields of
    :class:`gbx.records.Stamper`, as the run stamps them) and, every 4th update, an
    evaluation.
    """
    import math

    import torch

    from gbx import toy
    from gbx.records import Stamper
    from gbx_toolkit.evaluation import evaluate_policy
    from gbx_toolkit.metrics import MetricsAccumulator, categorical_entropy

    config = toy.ToyConfig(max_steps=24)
    env = toy.make_toy_env(config, num_envs, "cpu", 0)
    generator = torch.Generator().manual_seed(0)
    logits = torch.zeros(num_envs, env.num_actions)

    def policy(obs: torch.Tensor, *, greedy: bool = False) -> torch.Tensor:
        return torch.randint(env.num_actions, (obs.shape[0],), generator=generator)

    acc = MetricsAccumulator(num_envs, env.num_actions, "cpu")
    stamper = Stamper(run.run_id)
    meta = {
        "run_id": run.run_id, "num_envs": num_envs, "seed": 0, "algo": "random",
        "env": "toy", **env.meta(), "stack_k": config.stack_k,
        "config": {"run": {"algo": "random", "env": "toy", "steps": updates * 32 * num_envs}},
    }
    _emit(observers, "on_run_start", meta)
    obs = env.reset()
    for update in range(1, updates + 1):
        for _ in range(32):
            actions = policy(obs)
            obs, reward, done, trunc, info = env.step(actions)
            acc.add_step(reward, done, trunc, reset_mask=info["reset_mask"], success=done,
                         actions=actions, dist=info["dist"])
        acc.add_policy(entropy=categorical_entropy(logits), value=torch.zeros(num_envs))
        acc.add_scalars(policy_loss=torch.tensor(0.0), lr=1e-3 * math.cos(update / updates))
        record = stamper.stamp({"env_steps": update * 32 * num_envs, "opt_steps": update,
                                **acc.summary()}, "train")
        _emit(observers, "on_record", record)
        if update % 4 == 0:
            eval_env = toy.make_toy_env(config, 8, "cpu", 1)
            summary = evaluate_policy(eval_env, policy, 8, greedy=True, seed=1)
            _emit(observers, "on_eval", stamper.stamp(
                {"env_steps": record["env_steps"], **summary}, "eval"))
    _emit(observers, "on_run_end", {"status": "finished"})


def _emit(observers: list[Any], event: str, payload: Any) -> None:
    """Call ``event`` on every observer that has it (all methods are optional)."""
    for observer in observers:
        method = getattr(observer, event, None)
        if method is not None:
            method(payload)
