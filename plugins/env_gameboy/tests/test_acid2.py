"""Whole-picture checks of the renderer inside the machine: dmg-acid2 and sprite_priority."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gbx_gameboy import conformance as conf
from gbx_gameboy.media import grey_levels

REPO = Path(__file__).resolve().parents[3]
TESTROMS = Path(os.environ.get("GBX_TESTROMS", REPO.parent / "shared" / "testroms"))

# Both ROMs draw their final picture within about 11 frames of 0x0100 and then loop.
FRAMES = 30

# The picture ROMs of the conformance list (flappyboy's title screen aside).
CASES = {
    c.name.rsplit("/", 1)[-1]: (c.path, c.reference)
    for c in conf.CASES
    if c.protocol == conf.PIC and not c.path.startswith("games/")
}
assert sorted(CASES) == ["dmg-acid2", "sprite_priority"]


def _check_screen(case: str, device: str, kernel: str = "auto") -> None:
    rom, png = (TESTROMS / p for p in CASES[case])
    if not rom.is_file() or not png.is_file():
        pytest.skip(f"test ROM {rom} not present (set GBX_TESTROMS to the testroms folder)")
    from gbx_gameboy.machine import GameBoyBatch

    batch = GameBoyBatch(rom, 2, device, kernel=kernel)
    batch.run_frames(FRAMES, render_last=True)
    want = np.asarray(Image.open(png).convert("L"))
    for env in range(2):
        got = grey_levels(batch.fb[env].cpu())
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"{case}: {len(bad)} pixels differ, first at (y, x) = {tuple(bad[0])}"


# The CPU device runs both variants of the run kernel: the CPU one draws each line in the
# thread, the CUDA one records them and draw_pending_kernel draws them after the launch.
@pytest.mark.parametrize("kernel", ["cpu", "cuda"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_screen_matches_reference(case: str, kernel: str) -> None:
    _check_screen(case, "cpu", kernel)


@pytest.mark.cuda
@pytest.mark.parametrize("case", sorted(CASES))
def test_screen_matches_reference_on_cuda(case: str) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    _check_screen(case, "cuda")
