"""When a run evaluates and checkpoints: the run's schedule, in env steps.

The run owns the schedule (``run.eval_every``, ``run.checkpoint_every``, both in env
steps, 0 = off); a trainer only reports its progress through ``ctx.record``. When a
record's ``step`` crosses a multiple of a cadence, the run context calls the trainer's
``evaluate`` and ``state_dict`` before ``record`` returns: evaluation first, then the
checkpoint, so a checkpoint holds everything an evaluation may have changed.

Due points are multiples of the cadence, decided from the step of the previous record
(the checkpoint's step after a resume), so a resumed run evaluates and checkpoints at the
same env steps as one that was never stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

__all__ = ["Schedule", "crossed", "run_final_checkpoint"]


def crossed(every: int, before: int, after: int) -> bool:
    """True when a multiple of ``every`` lies in ``(before, after]`` (``every`` 0: never)."""
    return every > 0 and after // every > before // every


@attrs.define
class Schedule:
    """The evaluations and checkpoints of one run, driven by its records.

    ``last_step`` is the step of the previous record (the resumed checkpoint's step when
    a run continues). :meth:`after_record` runs what a record at ``step`` made due.
    """

    eval_every: int = 0
    checkpoint_every: int = 0
    eval_episodes: int = 32
    eval_greedy: bool = True
    last_step: int = 0
    # The random policy's score is a property of the task, not of training: the final
    # evaluation plays it once, so evaluations during training skip it unless asked.
    eval_baseline: bool = False

    @classmethod
    def of(cls, run_config: Any, *, start_step: int = 0) -> Schedule:
        """The schedule a ``gbx.config.RunConfig`` asks for, from ``start_step`` on."""
        return cls(int(run_config.eval_every), int(run_config.checkpoint_every),
                   int(run_config.eval_episodes), bool(run_config.eval_greedy),
                   int(start_step), eval_baseline=bool(run_config.eval_baseline))

    def after_record(
        self,
        step: int,
        trainer: Any,
        *,
        record_eval: Callable[[Mapping[str, Any]], None],
        checkpoint: Callable[..., Any],
    ) -> bool:
        """Evaluate and checkpoint ``trainer`` if a record at ``step`` made them due.

        Returns whether anything ran (the caller may leave its time out of throughput).
        """
        before, self.last_step = self.last_step, max(self.last_step, int(step))
        ran = False
        if trainer is None:
            return ran
        if crossed(self.eval_every, before, self.last_step):
            summary = dict(trainer.evaluate(self.eval_episodes, greedy=self.eval_greedy,
                                                baseline=self.eval_baseline))
            record_eval({**summary, "step": self.last_step, "env_steps": self.last_step})
            ran = True
        if crossed(self.checkpoint_every, before, self.last_step):
            checkpoint(trainer.state_dict(), step=self.last_step)
            ran = True
        return ran


def run_final_checkpoint(ctx: Any, trainer: Any, last_step: int,
                         last_checkpoint_step: int | None) -> None:
    """Checkpoint ``trainer`` at ``last_step`` unless that step is checkpointed already,
    so every finished or stopped run can be resumed and evaluated from where it ended."""
    if last_checkpoint_step != last_step:
        ctx.checkpoint(trainer.state_dict(), step=last_step)
