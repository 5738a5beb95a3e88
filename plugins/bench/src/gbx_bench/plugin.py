"""Hook implementations of gbx-bench (the ``bench`` entry point)."""

from __future__ import annotations

from typing import Any

from gbx import hookimpl


@hookimpl
def register_benchmarks(register: Any) -> None:
    from gbx_bench.compare import compare_cmd, plot_cmd, runs_cmd
    from gbx_bench.profile import profile_cmd
    from gbx_bench.train import train_bench

    register("train", train_bench)
    register("profile", profile_cmd)
    # Tools over any benchmark's records and any finished run.
    register("compare", compare_cmd)
    register("plot", plot_cmd)
    register("runs", runs_cmd)
