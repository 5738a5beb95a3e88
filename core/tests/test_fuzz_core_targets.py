"""The core's fuzz targets over generated inputs: only clean refusals (GbxError), no tracebacks."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gbx.errors import GbxError
from gbx.fuzz_core_targets import TARGETS


def test_the_three_targets_are_listed_by_name() -> None:
    assert [name for name, _ in TARGETS] == ["checkpoint", "plugin-registration", "config-file"]


@pytest.mark.parametrize(("name", "target"), TARGETS, ids=[n for n, _ in TARGETS])
def test_target_raises_nothing_but_gbx_errors(name, target) -> None:
    outcomes: set[str] = set()

    @settings(max_examples=100, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(min_value=0, max_value=2**32 - 1))
    def one_input(seed: int) -> None:
        with tempfile.TemporaryDirectory() as folder:
            try:
                target(random.Random(seed), Path(folder))
                outcomes.add("accepted")
            except GbxError:
                outcomes.add("refused")

    one_input()
    # the generator reaches both sides: inputs that load and inputs that are refused
    assert outcomes == {"accepted", "refused"}, (name, outcomes)
