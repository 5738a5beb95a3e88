"""gbx_toolkit.pictures: exact palette colours in PNG and GIF; one-line errors for bad frames."""

from __future__ import annotations

import io

import numpy as np
import pytest

from gbx_toolkit.pictures import PALETTES, encode_gif, encode_png, shades_to_rgb

Image = pytest.importorskip("PIL.Image")

FRAME = np.array([[0, 1], [2, 3]], dtype=np.uint8)


def test_rgb_and_png_use_the_palette_and_scale() -> None:
    rgb = shades_to_rgb(FRAME, scale=2, palette="green")
    assert rgb.shape == (4, 4, 3) and tuple(rgb[3, 3]) == PALETTES["green"][3]
    png = np.asarray(Image.open(io.BytesIO(encode_png(FRAME, scale=3))).convert("RGB"))
    assert tuple(png[0, 5]) == PALETTES["grey"][1] and tuple(png[5, 0]) == PALETTES["grey"][2]


def test_gif_frames_come_back_exactly() -> None:
    frames = [FRAME, 3 - FRAME]
    gif = Image.open(io.BytesIO(encode_gif(frames, scale=1, palette="green", frame_ms=70)))
    assert gif.n_frames == 2 and gif.info["duration"] == 70
    for index, frame in enumerate(frames):
        gif.seek(index)
        colours = np.asarray(gif.convert("RGB"))
        assert (colours == np.asarray(PALETTES["green"], dtype=np.uint8)[frame]).all()


@pytest.mark.parametrize(("frames", "kwargs", "message"), [
    ([], {}, "at least one frame"),
    ([np.full((2, 2), 4, np.uint8)], {}, "0..3"),
    ([np.zeros((1, 2, 2), np.uint8)], {}, "2-D"),
    ([FRAME], {"palette": "pink"}, "unknown palette"),
    ([FRAME], {"scale": 0}, "scale"),
])
def test_bad_frames_are_refused(frames, kwargs, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_gif(frames, **kwargs)
