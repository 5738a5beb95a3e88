"""A2C config: defaults, validation, and the auto split of a window into chunks."""

from __future__ import annotations

import pytest

from gbx.config import structure_section
from gbx.errors import ConfigError
from gbx_algo_a2c.config import AUTO_CHUNK, A2CConfig


def test_defaults_and_derived_sizes() -> None:
    cfg = A2CConfig()
    assert cfg.horizon == cfg.update_every
    assert cfg.batch_size == cfg.num_envs * cfg.update_every
    assert cfg.chunk_size <= AUTO_CHUNK and cfg.chunks * cfg.chunk_size == cfg.batch_size
    assert A2CConfig(num_envs=65536, update_every=5).chunk_size == AUTO_CHUNK
    assert A2CConfig(num_envs=8, update_every=4).chunks == 1
    assert A2CConfig(num_envs=8, update_every=4, grad_accum=4).chunk_size == 8
    assert A2CConfig(n_step=2).horizon == 2


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"n_step": 6, "update_every": 5}, "'n_step' must be <= update_every"),
        ({"gae_lambda": 0.9, "n_step": 2}, "'n_step' must be 0 when gae_lambda is set"),
        ({"num_envs": 6, "update_every": 1, "grad_accum": 4}, "'grad_accum' must divide"),
        ({"optimizer": "sgd"}, "optimizer"),
        ({"gamma": 1.5}, "'gamma' must be in"),
    ],
)
def test_rejects_bad_values(over: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        A2CConfig(**over)  # type: ignore[arg-type]


def test_structures_from_plain_data_with_one_line_errors() -> None:
    cfg = structure_section(
        {"num_envs": 16, "optimizer": "adam", "gae_lambda": 0.95,
         "model_options": {"hidden": 32}}, A2CConfig, "algo")
    assert cfg.optimizer == "adam" and cfg.gae_lambda == 0.95 and cfg.model_options == {
        "hidden": 32}
    with pytest.raises(ConfigError) as info:
        structure_section({"update_every": 0}, A2CConfig, "algo")
    assert "update_every" in str(info.value) and "\n" not in str(info.value)
