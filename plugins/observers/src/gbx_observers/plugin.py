"""Hook implementations of gbx-observers (the ``observers`` entry point)."""

from __future__ import annotations

from typing import Any

from gbx import hookimpl


@hookimpl
def register_observers(register: Any) -> None:
    from gbx_observers.console import ConsoleObserver
    from gbx_observers.gif import GifObserver
    from gbx_observers.jsonl import JsonlObserver
    from gbx_observers.options import ConsoleConfig, GifConfig
    from gbx_observers.plot import PlotObserver
    from gbx_observers.tensorboard import TensorBoardObserver

    # A run that names no observers keeps its structured log (the source the plot and
    # `gbx log` read), its plot and a console view.
    register("jsonl", JsonlObserver, description="train_log.jsonl (schema v1), flushed per record",
             default=True, outputs={"log": "train_log.jsonl"})
    register(
        "console", ConsoleObserver, ConsoleConfig,
        description="live progress on a TTY, sparse lines otherwise", default=True,
    )
    register("plot", PlotObserver, description="media/train.png training curves at run end",
             default=True, outputs={"plot": "media/train.png"})
    register("gif", GifObserver, GifConfig,
             description="media/eval_<step>/rollout.gif at each evaluation")
    register(
        "tensorboard", TensorBoardObserver,
        description="TensorBoard scalars (needs gbx-observers[tensorboard])",
    )


@hookimpl
def register_artifact_writers(register: Any) -> None:
    from gbx_observers.artifacts import write_failure_frames, write_media

    register("failure", write_failure_frames, description="PNG frames of a failure's last steps")
    register("media", write_media, description="PNG/GIF files under media/")


@hookimpl
def register_commands(cli: Any) -> None:
    from gbx_observers.cli import gif_command, log_group

    cli.add_command(log_group)
    cli.add_command(gif_command)
