"""Keep the PyBoy start-state cache of the tests out of the user's ~/.cache."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    old = os.environ.get("GBX_CACHE_DIR")
    os.environ["GBX_CACHE_DIR"] = str(tmp_path_factory.mktemp("gbx-cache"))
    yield
    if old is None:
        os.environ.pop("GBX_CACHE_DIR", None)
    else:
        os.environ["GBX_CACHE_DIR"] = old
