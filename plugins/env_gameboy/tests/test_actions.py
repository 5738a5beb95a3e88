"""Action codecs map indices to the machine's button bits."""

from __future__ import annotations

import pytest
import torch

from gbx_gameboy.actions import CODECS, make_codec, parse_presses


def test_default_codec_is_seven_buttons_without_noop() -> None:
    c = make_codec("default")
    assert c.num_actions == 7 and c.buttons == ("A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT")
    masks = c.encode(torch.arange(7))
    assert masks.dtype == torch.int32
    # A=bit4 B=bit5 START=bit7 UP=bit2 DOWN=bit3 LEFT=bit1 RIGHT=bit0
    assert masks.tolist() == [16, 32, 128, 4, 8, 2, 1]
    assert make_codec("buttons7").buttons == c.buttons


def test_optional_codecs_add_noop_and_select() -> None:
    assert make_codec("buttons8_noop").encode(torch.tensor([7])).tolist() == [0]
    c9 = make_codec("buttons9")
    assert c9.num_actions == 9 and c9.encode(torch.tensor([7, 8])).tolist() == [0, 64]


def test_encode_into_reuses_buffer() -> None:
    c = make_codec("buttons9")
    out = torch.empty(4, dtype=torch.int32)
    ptr = out.data_ptr()
    c.encode_into(torch.tensor([0, 8, 2, 6]), out)
    assert out.tolist() == [16, 64, 128, 1] and out.data_ptr() == ptr


def test_unknown_codec_names_the_choices() -> None:
    with pytest.raises(ValueError, match="buttons8_noop"):
        make_codec("nope")
    assert set(CODECS) == {"default", "buttons7", "buttons8_noop", "buttons9"}


def test_parse_presses() -> None:
    assert parse_presses("A@120, start@60") == [("START", 60), ("A", 120)]
    with pytest.raises(ValueError, match="BUTTON@FRAME"):
        parse_presses("JUMP@3")
