"""Property tests of the untrusted-input loaders: any input is loaded or refused with a
GbxError, never another exception (hypothesis, a few hundred cases in all)."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gbx.errors import GbxError
from gbx_gameboy import pyboy_state as ps
from gbx_gameboy import savestate
from gbx_gameboy.cartridge import Cartridge, parse_cartridge
from gbx_gameboy.fuzz_targets import TARGETS, _cart

FAST = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))


def _accepts_or_refuses(fn, *args) -> None:  # type: ignore[no-untyped-def]
    try:
        fn(*args)
    except GbxError as exc:
        assert "\n" not in str(exc), str(exc)


def test_targets_are_named_as_documented() -> None:
    assert [name for name, _ in TARGETS] == ["rom-header", "gbxstate", "pyboy-state"]


@FAST
@given(seed=st.integers(0, 2**32 - 1))
def test_rom_header_target(seed: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        _accepts_or_refuses(dict(TARGETS)["rom-header"], random.Random(seed), Path(d))


@FAST
@given(seed=st.integers(0, 2**32 - 1))
def test_gbxstate_target(seed: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        _accepts_or_refuses(dict(TARGETS)["gbxstate"], random.Random(seed), Path(d))


@FAST
@given(seed=st.integers(0, 2**32 - 1))
def test_pyboy_state_target(seed: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        _accepts_or_refuses(dict(TARGETS)["pyboy-state"], random.Random(seed), Path(d))


@settings(max_examples=100, deadline=None)
@given(header=st.binary(min_size=0x50, max_size=0x50), size=st.sampled_from([0, 0x4000, 0x8000]))
def test_any_rom_header_bytes_parse_or_refuse(header: bytes, size: int) -> None:
    data = bytearray(max(size, 0x150))
    data[0x100:0x150] = header
    _accepts_or_refuses(parse_cartridge, bytes(data))


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=300), prefix=st.booleans())
def test_any_bytes_decode_as_gbxstate_or_refuse(data: bytes, prefix: bool) -> None:
    blob = (savestate.MAGIC + (1).to_bytes(4, "little") + data) if prefix else data
    _accepts_or_refuses(savestate.decode, blob, "x")


def _cart_for_pyboy() -> Cartridge:
    return _cart(0x03)


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, 40000), flips=st.lists(st.tuples(st.integers(0, 2**20),
                                                          st.integers(0, 255)), max_size=8))
def test_any_pyboy_bytes_parse_or_refuse(cut: int, flips: list[tuple[int, int]]) -> None:
    cart = _cart_for_pyboy()
    data = bytearray(ps.encode(ps.blank_fields(cart), cart))
    for pos, v in flips:
        data[pos % len(data)] = v
    _accepts_or_refuses(ps.parse, bytes(data[: len(data) - cut % len(data)]), cart)
