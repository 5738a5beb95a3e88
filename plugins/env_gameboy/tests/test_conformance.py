"""Hardware test ROMs (blargg, mooneye) from the shared folder; long ones are marked slow.

Run the long ones with ``pytest -m slow``. ROMs that do not pass yet are listed in
KNOWN_FAILING as strict xfails, so a fix shows up as an unexpected pass.
"""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.skipif(not ROOT.is_dir(), reason=f"test ROMs not found at {ROOT} (set GBX_TESTROMS)")
def test_running_roms_together_gives_each_its_result_alone() -> None:
    # CUDA runs every ROM at once (run_together); on the CPU the same rounds run in turn,
    # so the scheduling is checked here: each ROM's verdict, frame count and detail must
    # be those of running it alone, whichever ROMs finish (and drop out) before it.
    cases = conf.select(["cpu_instrs/individual/02", "di_timing", "rom_singles/01-reg",
                         "manual-only/sprite", "mbc1/rom_512"])
    fib = conf.select(["intr_2_0"])[0]
    cases += [conf.RomCase(fib.path, conf.FIB, 3),  # cut short: no result within 3 frames
              conf.RomCase(fib.path, conf.FIB, 15)]  # a last round of 5 frames
    alone = [conf.run_case(c, "cpu", ROOT) for c in cases]
    order: list[conf.RomResult] = []
    together = conf.run_together(cases, "cpu", ROOT, on_result=order.append)
    assert together == alone
    assert len({r.frames for r in alone}) >= 4  # ROMs drop out in different rounds
    assert alone[-2].detail.startswith("no result after 3 frames")
    assert alone[-1].passed and alone[-1].frames == 15  # reported within the last 5 frames
    rounds = [-(-r.frames // conf.CHECK_EVERY_FRAMES) for r in order]
    assert rounds == sorted(rounds)  # reported as they finish
    assert sorted(map(id, order)) == sorted(map(id, together))


DOCS = Path(__file__).resolve().parents[3] / "docs" / "emulator.md"


def docs_table() -> list[list[str]]:
    """Rows (ROM, CPU, CUDA) of the conformance table in docs/emulator.md."""
    lines = DOCS.read_text().splitlines()
    start = lines.index("| ROM | CPU | CUDA |")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_docs_table_lists_every_case_with_its_cpu_result() -> None:
    rows = docs_table()
    assert [r[0] for r in rows] == [c.name for c in conf.CASES]
    for name, cpu, cuda in rows:
        want = "FAIL" if name in KNOWN_FAILING else "pass"
        assert cpu == want, f"{name}: docs say {cpu} on the CPU, the suite expects {want}"
        # CPU and CUDA run the same kernel and must agree wherever CUDA was run.
        assert cuda.rstrip("*") in (cpu, conf.NOT_RUN), f"{name}: CUDA {cuda}, CPU {cpu}"


@pytest.mark.skipif(not ROOT.is_dir(), reason=f"test ROMs not found at {ROOT} (set GBX_TESTROMS)")
def test_cases_cover_every_rom_of_the_shared_folder() -> None:
    on_disk = {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.gb")}
    listed = [c.path for c in conf.CASES]
    assert len(listed) == len(set(listed))
    assert on_disk == set(listed)
    for case in conf.CASES:
        if case.protocol == conf.PIC:
            assert (ROOT / case.reference).is_file(), case.reference


# The ROMs that check what the CUDA variant does in its own code (the OAM corruption hook,
# reads during OAM DMA, the PPU's access windows and LY/STAT timing).
CUDA_PATH_ROMS = ["oam_bug/rom_singles/2", "oam_bug/rom_singles/3", "oam_bug/rom_singles/8",
                  "oam_dma", "lcdon", "stat_lyc", "hblank_ly", "intr_2_mode0"]


@pytest.mark.skipif(not ROOT.is_dir(), reason=f"test ROMs not found at {ROOT} (set GBX_TESTROMS)")
def test_cuda_variant_on_the_cpu_gives_each_rom_the_cpu_variants_result() -> None:
    cases = conf.select(CUDA_PATH_ROMS)
    assert len(cases) >= 10
    reports = conf.report(cases, "cpu", ROOT, cpu_kernel="cuda")
    assert [r.cpu for r in reports] == conf.run_all(cases, "cpu", ROOT)
    assert all(r.to_json()["cpu_kernel"] == "cuda" for r in reports)
    assert "| ROM | CPU (CUDA variant) | CUDA |" in conf.format_table(reports,
                                                                       "CPU (CUDA variant)")


@pytest.mark.slow
@pytest.mark.skipif(not ROOT.is_dir(), reason=f"test ROMs not found at {ROOT} (set GBX_TESTROMS)")
def test_cuda_variant_on_the_cpu_passes_what_the_cpu_variant_passes() -> None:
    cases = list(conf.CASES)
    assert conf.run_all(cases, "cpu", ROOT, kernel="cuda") == conf.run_all(cases, "cpu", ROOT)
