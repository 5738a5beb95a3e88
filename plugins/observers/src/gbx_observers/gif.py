"""The ``gif`` observer: a rollout GIF of the current policy at every evaluation."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gbx.seeds import Stream, offset
from gbx_observers.options import GifConfig
from gbx_observers.rollout import record_rollout


def policy_of(run: Any) -> Callable[..., Any] | None:
    """The run's policy: ``run.policy`` if set, else ``run.trainer.act``; None if neither."""
    policy = getattr(run, "policy", None)
    if callable(policy):
        return policy
    act = getattr(getattr(run, "trainer", None), "act", None)
    return act if callable(act) else None


class GifObserver:
    """Writes ``run_dir/media/eval_<env_steps>/rollout.{gif,jsonl}`` and ``meta.json``.

    Needs two things from the run handle it is built with: ``make_env`` (as
    on :class:`gbx.api.RunContext`) and the policy (``run.policy`` or
    ``run.trainer.act``). Rollouts are greedy; the ``observer.gif`` section
    (:class:`gbx_observers.options.GifConfig`: ``steps``, ``scale``) tunes them.
    """

    def __init__(self, run: Any, config: GifConfig | None = None) -> None:
        config = config if config is not None else GifConfig()
        self.run = run
        self.run_dir = Path(run.run_dir)
        self.steps = config.steps
        self.scale = config.scale
        self._warned = False
        self.written: list[Path] = []

    def on_eval(self, record: Mapping[str, Any]) -> None:
        policy = policy_of(self.run)
        make_env = getattr(self.run, "make_env", None)
        if policy is None or not callable(make_env):
            if not self._warned:
                self._warned = True
                print(
                    "gbx gif: the run offers no policy/make_env to observers; no eval GIFs",
                    file=sys.stderr,
                )
            return
        step = record.get("env_steps", len(self.written))
        out_dir = self.run_dir / "media" / f"eval_{step}"
        env = make_env(1, seed_offset=offset(Stream.EVAL_ENV), evaluation=True)
        meta = {"run_id": getattr(self.run, "run_id", None), "env_steps": step}
        paths = record_rollout(
            env, policy, out_dir, steps=self.steps, greedy=True, scale=self.scale, meta=meta
        )
        self.written.append(paths["gif"])
