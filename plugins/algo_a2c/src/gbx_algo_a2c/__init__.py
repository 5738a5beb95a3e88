"""gbx plugin: synchronous advantage actor-critic (A2C) for very large env batches."""

from __future__ import annotations

from gbx_algo_a2c.config import A2CConfig

__all__ = ["A2CConfig"]
