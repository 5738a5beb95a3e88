"""An in-memory run context for driving the A2C trainer without the run loop."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from gbx.toy import ToyConfig, make_toy_env


@attrs.frozen
class _Run:
    steps: int


@attrs.frozen
class _Config:
    run: _Run
    env: Any
    algo: Any


class FakeContext:
    """Implements gbx.api.RunContext in memory; keeps every record, eval and checkpoint."""

    def __init__(
        self,
        algo_config: Any,
        *,
        steps: int = 10_000,
        seed: int = 0,
        env_config: ToyConfig | None = None,
        device: str = "cpu",
    ) -> None:
        self.run_id = "test"
        self.run_dir = Path(".")
        self.device = torch.device(device)
        self.seed = seed
        self.env_config = env_config or ToyConfig()
        self.config = _Config(_Run(steps), self.env_config, algo_config)
        self.records: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self.checkpoints: list[tuple[int, Mapping[str, Any]]] = []

    def make_env(self, num_envs: int, *, seed_offset: int = 0) -> Any:
        return make_toy_env(self.env_config, num_envs, self.device, self.seed + seed_offset)

    def record(self, metrics: Mapping[str, Any]) -> None:
        self.records.append(dict(metrics))

    def record_eval(self, metrics: Mapping[str, Any]) -> None:
        self.evals.append(dict(metrics))

    def checkpoint(self, state: Mapping[str, Any], *, step: int) -> Path:
        self.checkpoints.append((step, roundtrip(dict(state))))
        return self.run_dir / f"ckpt-{step}"

    def should_stop(self) -> bool:
        return False


def roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    """Serialise and load back, as a checkpoint file does (the state holds live tensors)."""
    raw = io.BytesIO()
    torch.save(state, raw)
    raw.seek(0)
    return torch.load(raw, weights_only=False)


TIMING_KEYS = frozenset({"sps", "ups"})


def comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record without its wall-clock fields."""
    return {k: v for k, v in record.items() if k not in TIMING_KEYS}
