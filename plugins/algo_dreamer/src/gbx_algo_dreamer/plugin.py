"""gbx hooks of gbx-algo-dreamer: the ``dreamer_v3`` algorithm, ``gbx dreamer`` commands
and ``gbx bench dreamer``."""

from __future__ import annotations

from typing import Any

from gbx import hookimpl
from gbx_algo_dreamer.config import DreamerConfig


@hookimpl
def register_algorithms(register: Any) -> None:
    from gbx_algo_dreamer.trainer import DreamerTrainer

    register("dreamer_v3", DreamerTrainer, DreamerConfig,
             description="DreamerV3: RSSM world model + actor-critic in imagination, "
                         "device replay")


@hookimpl
def register_commands(cli: Any) -> None:
    from gbx_algo_dreamer.cli import dreamer_group

    cli.add_command(dreamer_group)


@hookimpl
def register_benchmarks(register: Any) -> None:
    from gbx_algo_dreamer.cli import bench_cmd

    register("dreamer", bench_cmd)
