"""Hardware test ROMs (blargg, mooneye) from the shared folder; long ones are marked slow.

Run the long ones with ``pytest -m slow``. ROMs that do not pass yet are listed in
KNOWN_FAILING as strict xfails, so a fix shows up as an unexpected pass.
"""

from __future__ import annotations

import pytest

from gbx_gameboy import conformance as conf

ROOT = conf.testroms_dir()

# ROM name -> reason, for ROMs that do not pass yet.
KNOWN_FAILING: dict[str, str] = {
    "blargg/oam_bug/rom_singles/7-timing_effect": (
        "the ROM crashes before reporting: its text output (an OAM dump for each of about "
        "20 corrupting timings, over 8 KiB) runs past its 8 KiB of cartridge RAM into the "
        "code it runs from WRAM; the same check passes inside oam_bug.gb (07:ok)"
    ),
}


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
