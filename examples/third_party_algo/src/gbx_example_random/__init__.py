"""``random``: an example third-party gbx algorithm.

It picks uniformly random actions, except that with probability
``greedy_bias`` it presses ``bias_action`` instead. It shows every piece a
real algorithm plugin needs: a config class, a trainer that talks to the run
only through its context, the state the run checkpoints and resumes from, and the
registration hook. The run owns the schedule: it evaluates and checkpoints from
inside ``ctx.record`` (``run.eval_every``, ``run.checkpoint_every``) and when
training ends, so the trainer only records its progress.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch

from gbx import hookimpl
from gbx.seeds import Stream, offset


@attrs.frozen
class RandomConfig:
    """The ``algo`` section of the random algorithm."""

    num_envs: int = attrs.field(
        default=16, validator=attrs.validators.ge(1), metadata={"help": "envs stepped together"}
    )
    greedy_bias: float = attrs.field(
        default=0.0,
        validator=[attrs.validators.ge(0.0), attrs.validators.le(1.0)],
        metadata={"help": "probability of pressing bias_action instead of a random one"},
    )
    bias_action: int = attrs.field(
        default=0, validator=attrs.validators.ge(0), metadata={"help": "the favoured action"}
    )
    log_every: int = attrs.field(
        default=8, validator=attrs.validators.ge(1), metadata={"help": "env steps between records"}
    )


class RandomTrainer:
    """Acts at random; keeps counters so a resumed run continues where it stopped."""

    def __init__(self, config: RandomConfig, ctx: Any) -> None:
        self.config = config
        self.ctx = ctx
        self.env = ctx.make_env(config.num_envs)
        self.gen = torch.Generator(device="cpu").manual_seed(ctx.seed)
        self.steps = 0  # total env steps (all envs)
        self.episodes = 0

    def act(self, obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
        n = obs.shape[0]
        actions = torch.randint(0, self.env.num_actions, (n,), generator=self.gen)
        biased = torch.rand(n, generator=self.gen) < self.config.greedy_bias
        actions = torch.where(biased, torch.full_like(actions, self.config.bias_action), actions)
        return actions.to(obs.device)

    def train(self) -> None:
        cfg, ctx, env = self.config, self.ctx, self.env
        obs = env.reset()
        returns = torch.zeros(env.num_envs, device=env.device)
        finished_return = 0.0
        iteration = 0
        while not ctx.should_stop():
            obs, reward, _done, _trunc, info = env.step(self.act(obs))
            returns += reward
            ended = info["reset_mask"]
            # One host read per iteration keeps this example simple; real trainers batch it.
            n_ended = int(ended.sum())
            if n_ended:
                finished_return = float(returns[ended].mean())
                self.episodes += n_ended
            returns = torch.where(ended, torch.zeros_like(returns), returns)
            self.steps += env.num_envs
            iteration += 1
            if iteration % cfg.log_every == 0:
                # between steps: the run may evaluate and checkpoint from inside record
                ctx.record({"step": self.steps, "episodes": self.episodes,
                            "episode_return": finished_return})
        if iteration % cfg.log_every:
            ctx.record({"step": self.steps, "episodes": self.episodes,
                        "episode_return": finished_return})

    def evaluate(
        self, episodes: int, *, greedy: bool = True, baseline: bool = True
    ) -> dict[str, Any]:
        # the run's evaluation seed stream (gbx.seeds), apart from every training env
        env = self.ctx.make_env(1, seed_offset=offset(Stream.EVAL_ENV))
        obs = env.reset()
        total, done_eps, ret = 0.0, 0, 0.0
        while done_eps < episodes:
            obs, reward, _done, _trunc, info = env.step(self.act(obs, greedy=greedy))
            ret += float(reward[0])
            if bool(info["reset_mask"][0]):
                total += ret
                ret = 0.0
                done_eps += 1
        env.close()
        return {"episodes": episodes, "mean_return": total / episodes}

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "episodes": self.episodes, "rng": self.gen.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.steps = int(state["steps"])
        self.episodes = int(state["episodes"])
        self.gen.set_state(state["rng"])


@hookimpl
def register_algorithms(register: Any) -> None:
    register("random", RandomTrainer, RandomConfig,
             description="uniform random actions with an optional favoured action")
