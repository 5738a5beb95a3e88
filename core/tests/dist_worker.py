"""One data-parallel rank of the multi-rank test: ``gbx run`` with a small SGD trainer.

Started by ``python -m torch.distributed.run --nproc-per-node 2 dist_worker.py ARGS``
from ``test_distributed.py``; ARGS are ``gbx run`` arguments. The ``dpsgd`` algorithm
fits a linear model to the toy env's frames, seeing different frames on each rank
(per-rank seeds), so only gradient averaging keeps the ranks' models equal.
``GBX_TEST_MODE`` picks how gradients are shared: ``ddp`` (:func:`gbx.distributed.wrap_model`,
the default), ``average`` (:func:`~gbx.distributed.sync_parameters` once, then
:func:`~gbx.distributed.average_gradients` after every backward) or ``none`` (the
negative control: ranks drift apart).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))

from gbx_testplugins import FakeEntryPoint, make_host, ticking_stamper  # noqa: E402

from gbx import distributed as gdist  # noqa: E402
from gbx import hookimpl  # noqa: E402
from gbx.config import option  # noqa: E402


@attrs.frozen
class DpConfig:
    num_envs: int = option(4, "envs per rank", attrs.validators.ge(1))
    lr: float = option(0.05, "SGD learning rate", attrs.validators.gt(0.0))


class DpTrainer:
    def __init__(self, config: DpConfig, ctx: Any) -> None:
        self.cfg, self.ctx = config, ctx
        self.env = ctx.make_env(config.num_envs)
        torch.manual_seed(ctx.seed)  # a different initialisation per rank
        self.model = nn.Linear(int(torch.tensor(self.env.obs_shape).prod()), 1).to(ctx.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=config.lr)
        self.mode = os.environ.get("GBX_TEST_MODE", "ddp")
        if self.mode == "ddp":
            self.train_model = gdist.wrap_model(self.model)
        else:
            self.train_model = self.model
            if self.mode == "average":
                gdist.sync_parameters(self.model)
        self.env_steps = 0
        self.gen = torch.Generator().manual_seed(ctx.seed)

    def act(self, obs: torch.Tensor, *, greedy: bool = True) -> torch.Tensor:
        actions = torch.randint(0, self.env.num_actions, (obs.shape[0],), generator=self.gen)
        return actions.to(obs.device)

    def train(self) -> None:
        obs = self.env.reset()
        while not self.ctx.should_stop():
            obs, reward, *_ = self.env.step(self.act(obs))
            x = obs.flatten(1).float() / 3.0
            loss = (self.train_model(x).squeeze(1) - reward - 1.0).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            if self.mode == "average":
                gdist.average_gradients(self.model.parameters())
            self.optimizer.step()
            self.env_steps += self.env.num_envs
            self.ctx.record({"env_steps": self.env_steps, "loss": loss.detach(),
                             "rank_id": float(gdist.rank())})
            self.ctx.checkpoint(self.state_dict(), step=self.env_steps)

    def evaluate(
        self, episodes: int, *, greedy: bool = True, baseline: bool = True
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"episodes": episodes}
        # GBX_TEST_SOLVE="RANK:STEP": that rank's evaluations succeed from STEP on.
        solve = os.environ.get("GBX_TEST_SOLVE")
        if solve:
            rank, step = (int(x) for x in solve.split(":"))
            out["success_rate"] = float(gdist.rank() == rank and self.env_steps >= step)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "env_steps": self.env_steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.env_steps = int(state["env_steps"])


class RecordFile:
    """Appends records to $GBX_TEST_RECORDS (JSON lines): what rank 0's observers saw."""

    def __init__(self, run: Any) -> None:
        self.path = Path(os.environ["GBX_TEST_RECORDS"])

    def on_record(self, record: Mapping[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(dict(record)) + "\n")


class _Plugin:
    @hookimpl
    def register_algorithms(self, register: Any) -> None:
        register("dpsgd", DpTrainer, DpConfig, description="test: data-parallel SGD")

    @hookimpl
    def register_observers(self, register: Any) -> None:
        register("recordfile", RecordFile, description="test: records to a file")


def _tick_this_rank() -> None:
    """``GBX_TEST_TICK_RANK=R``: rank R's run clock moves one second per reading, so it
    passes a small ``run.max_seconds`` within a few records while the other's does not."""
    if os.environ.get("GBX_TEST_TICK_RANK", "") != os.environ.get("RANK"):
        return
    import gbx.runner

    gbx.runner.Stamper = ticking_stamper()


def main() -> None:
    from gbx.cli import build_cli

    _tick_this_rank()

    host = make_host(FakeEntryPoint("dpsgd", _Plugin(), "gbx-test-dpsgd"))
    build_cli(host).main(args=sys.argv[1:], prog_name="gbx", standalone_mode=True)


if __name__ == "__main__":
    main()
