"""Entry point of the ``gbx-algo-a2c`` distribution (``[project.entry-points.gbx] a2c``)."""

from __future__ import annotations

from typing import Any

from gbx import hookimpl
from gbx_algo_a2c.config import A2CConfig
from gbx_algo_a2c.trainer import A2CTrainer


@hookimpl
def register_algorithms(register: Any) -> None:
    register(
        "a2c",
        A2CTrainer,
        A2CConfig,
        description="synchronous advantage actor-critic: n-step returns over short device windows",
    )


@hookimpl
def register_benchmarks(register: Any) -> None:
    from gbx_algo_a2c.bench import memory_bench

    register("a2c-memory", memory_bench)
