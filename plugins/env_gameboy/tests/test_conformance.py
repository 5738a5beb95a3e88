"""Hardware test ROMs (blargg, mooneye) from the shared folder; long ones are marked slow.

Run the long ones with ``pytest -m slow``. ROMs that do not pass yet are listed in
KNOWN_FAILING as strict xfails, so a fix shows up as an unexpected pass.
"""

from __future__ import annotations

import pytest

from gbx_gameboy import conformance as conf

ROOT = conf.testroms_dir()

# ROM name -> reason, for ROMs that do not pass yet.
_OAM_BUG = "the DMG OAM corruption bug is not modelled"
KNOWN_FAILING: dict[str, str] = {
    f"blargg/oam_bug/{name}": _OAM_BUG
    for name in (
        "rom_singles/2-causes", "rom_singles/4-scanline_timing",
        "rom_singles/5-timing_bug", "rom_singles/7-timing_effect", "rom_singles/8-instr_effect",
        "oam_bug",
    )
}
KNOWN_FAILING["blargg/oam_bug/rom_singles/1-lcd_sync"] = (
    "result code 3: its check of LY/STAT timing around LCD on fails (not investigated)"
)


def _param(case: conf.RomCase) -> object:
    marks = []
    if case.slow:
        marks.append(pytest.mark.slow)
    if case.name in KNOWN_FAILING:
        marks.append(pytest.mark.xfail(reason=KNOWN_FAILING[case.name], strict=True))
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.skipif(not ROOT.is_dir(), reason=f"test ROMs not found at {ROOT} (set GBX_TESTROMS)")
@pytest.mark.parametrize("case", [_param(c) for c in conf.CASES])
def test_rom(case: conf.RomCase) -> None:
    result = conf.run_case(case, "cpu", ROOT)
    assert result.passed, f"{case.name}: {result.detail} after {result.frames} frames"
