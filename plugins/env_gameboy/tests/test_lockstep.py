"""Lockstep with PyBoy on real games (``gbx_gameboy.lockstep``, ``gbx gameboy lockstep``).

The 10,000-frame runs of the bundled game and flappyboy are slow; a short run, the
command line and the halted-CPU savestate rule the lockstep relies on are fast.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from devices import DEVICES
from game_roms import rom_of

from gbx_gameboy import lockstep as ls
from gbx_gameboy import pyboy_state as ps
from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.microrom import micro_rom

pyboy = pytest.importorskip("pyboy", reason="PyBoy is the other emulator of the lockstep")


@pytest.mark.slow
@pytest.mark.parametrize("game", ["gbx_quest", "flappyboy"])
def test_games_match_pyboy_for_10000_frames(game: str) -> None:
    result = ls.run_lockstep(rom_of(game), frames=10_000, every=60)
    assert len(result.checks) == 10_000 // 60
    assert not result.differing, result.to_json()["differences"][:5]
    assert result.distinct_screens >= 50  # the scripted input kept the game moving


@pytest.mark.parametrize("device", DEVICES)
def test_short_lockstep_of_the_bundled_game_matches(device: str) -> None:
    result = ls.run_lockstep(DEFAULT_ROM, frames=600, every=60, device=device)
    assert [c.frame for c in result.checks] == list(range(60, 601, 60))
    assert not result.differing, result.to_json()
    assert result.distinct_screens >= 3


def test_script_holds_each_entry_then_releases() -> None:
    script = ls.parse_script("START, a,,right")
    assert script == ("START", "A", None, "RIGHT")
    held = [ls.buttons_at(script, f) for f in range(48)]
    assert held[:6] == [("START",)] * 6 and held[6:12] == [()] * 6
    assert held[12] == ("A",) and held[24] == () and held[36] == ("RIGHT",)
    assert ls.random_script(3) == ls.random_script(3) != ls.random_script(4)
    with pytest.raises(ValueError, match="bad button 'JUMP'"):
        ls.parse_script("A,JUMP")


def test_cli_prints_one_json_record_and_rejects_bad_input(tmp_path: Path) -> None:
    from gbx_gameboy.cli import gameboy

    out = CliRunner().invoke(gameboy, ["lockstep", str(DEFAULT_ROM), "--frames", "120"])
    assert out.exit_code == 0, out.output
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert record["checks"] == 2 and record["equal"] == 2 and record["differences"] == []
    bad = CliRunner().invoke(gameboy, ["lockstep", str(DEFAULT_ROM), "--buttons", "A,JUMP"])
    assert bad.exit_code == 2 and "bad button 'JUMP'" in bad.output
    bad = CliRunner().invoke(gameboy, ["lockstep", str(DEFAULT_ROM), "--every", "0"])
    assert bad.exit_code == 2


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without GPU")
@pytest.mark.parametrize("command", [["lockstep", str(DEFAULT_ROM)], ["conformance"]])
def test_cuda_without_a_gpu_is_one_line_exit_2(command: list[str]) -> None:
    from gbx.cli import build_cli
    from gbx.plugins import load_plugins

    res = CliRunner().invoke(build_cli(load_plugins()),
                             ["gameboy", *command, "--device", "cuda"])
    assert res.exit_code == 2 and "CUDA is not available" in res.output, res.output
    assert res.output.count("\n") == 1


HALT_LOOP = """
    ld a, $01
    ldh [$FF], a        ; VBlank interrupt only
    xor a
    ldh [$0F], a
    ei
.loop:
    halt
    ld hl, $C000
    inc [hl]            ; one count per wake-up: the instruction after the HALT runs
    jr .loop
"""
VBLANK = 'SECTION "vblank", ROM0[$0040]\n    reti\n'


def test_halted_cpu_state_moves_between_pyboy_and_gbx(tmp_path: Path) -> None:
    # PyBoy keeps PC on the HALT opcode while halted and steps past it as it wakes; gbx
    # keeps PC on the next instruction. A state saved while halted must resume after the
    # HALT in both emulators: the counter after it goes up once per frame, none skipped.
    rom = micro_rom(HALT_LOOP, extra=VBLANK)
    halt_at = rom.index(bytes([0x76, 0x21, 0x00, 0xC0]))
    path = tmp_path / "halt.gb"
    path.write_bytes(rom)
    emu = pyboy.PyBoy(str(path), window="null", sound_emulated=False)
    try:
        for _ in range(400):  # past PyBoy's boot ROM; the CPU halts between VBlanks
            emu.tick(1, False)
        assert emu.register_file.PC == halt_at
        buf = io.BytesIO()
        emu.save_state(buf)
        batch = GameBoyBatch(rom, 1, "cpu")
        ps.load_pyboy_state(batch, buf.getvalue())
        assert batch.regs(0)["pc"] == halt_at + 1 and batch.regs(0)["halted"] == 1
        before = batch.read_memory(0, 0xC000)
        batch.run_frames(5)
        batch.run_cycles(456)  # past the fifth VBlank's dispatch (frames end as it is raised)
        assert (batch.read_memory(0, 0xC000) - before) % 256 == 5
        # And back: gbx halted -> PyBoy state with PC on the HALT.
        back = ps.parse(ps.save_pyboy_state(batch, 0), batch.cart)
        assert back["halted"] == 1 and back["PC"] == halt_at
    finally:
        emu.stop(save=False)
