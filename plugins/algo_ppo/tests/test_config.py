"""PPOConfig: validated, frozen, every field documented."""

from __future__ import annotations

import attrs
import pytest

from gbx.config import structure_section
from gbx.errors import ConfigError
from gbx_algo_ppo.config import PPOConfig


def test_every_field_has_help_and_defaults_are_valid() -> None:
    cfg = PPOConfig()
    for field in attrs.fields(PPOConfig):
        assert field.metadata.get("help"), field.name
    assert cfg.batch_size == 256 * 128 and cfg.minibatch_size == cfg.batch_size // 4
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        cfg.lr = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"minibatches": 3}, "algo.minibatches = 3: must divide"),
        ({"gamma": 1.5}, "algo.gamma = 1.5: must be in [0, 1]"),
        ({"value_clip": -0.1}, "value_clip"),
        ({"num_envs": 0}, "algo.num_envs"),
        ({"lr": "fast"}, "algo.lr"),
        ({"bogus": 1}, "unknown key algo.bogus"),
    ],
)
def test_bad_values_are_one_line_errors(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        structure_section(data, PPOConfig, "algo")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_model_options_pass_through() -> None:
    cfg = structure_section(
        {"model": "impala", "model_options": {"channels": [8, 8], "hidden": 16}}, PPOConfig, "algo"
    )
    assert cfg.model_options == {"channels": [8, 8], "hidden": 16}
