"""PyBoy 2.x savestates: byte-exact parsing, and round trips through PyBoy itself."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from anim_test_rom import write_anim_test_rom

from gbx_gameboy import pyboy_state as ps
from gbx_gameboy.savestate import SaveStateError

pyboy = pytest.importorskip("pyboy", reason="PyBoy is the reference for its own state format")

# MBC1+RAM+BATT, MBC3+RAM+BATT, MBC3+TIMER+RAM+BATT (RTC block), MBC5+RAM+BATT, MBC5+RUMBLE+RAM
CART_TYPES = [0x03, 0x13, 0x10, 0x1B, 0x1D]
# PyBoy runs its own boot ROM first; after this many frames the game has started.
PYBOY_BOOT_FRAMES = 300
# PyBoy's default DMG colours -> shade indices.
_SHADE = np.zeros(256, np.uint8)
_SHADE[[255, 153, 85, 0]] = [0, 1, 2, 3]


def pyboy_after(rom: Path, frames: int):
    emu = pyboy.PyBoy(str(rom), window="null", sound_emulated=False)
    for _ in range(frames):
        emu.tick()
    return emu


def state_bytes(emu) -> bytes:
    buf = io.BytesIO()
    emu.save_state(buf)
    return buf.getvalue()


def pyboy_shades(emu) -> np.ndarray:
    return _SHADE[np.asarray(emu.screen.ndarray)[..., 0]]


def probe(emu_or_batch, env: int | None = None) -> list[int]:
    """Frame counter, DIV, SCX and cart RAM byte that the ROM's VBlank handler writes."""
    addrs = (0xC000, 0xC001, 0xFF43, 0xA000)
    if env is None:
        return [emu_or_batch.memory[a] for a in addrs]
    return [emu_or_batch.read_memory(env, a) for a in addrs]


@pytest.mark.parametrize("cart_type", CART_TYPES)
def test_parse_encode_is_byte_exact(tmp_path: Path, cart_type: int) -> None:
    from gbx_gameboy.cartridge import parse_cartridge

    rom = write_anim_test_rom(tmp_path, cart_type)
    data = state_bytes(pyboy_after(rom, PYBOY_BOOT_FRAMES))
    cart = parse_cartridge(rom)
    fields = ps.parse(data, cart)
    assert ps.encode(fields, cart) == data
    assert fields["bootrom_enabled"] == 0 and fields["cart_ram"][0] == fields["wram"][0]
    assert ("rtc" in fields) == (cart_type == 0x10)
    with pytest.raises(SaveStateError, match="truncated"):
        ps.parse(data[:-20000], cart)
    with pytest.raises(SaveStateError, match="PyBoy state of version 29"):
        ps.parse(b"\x07" + data[1:], cart)


def test_state_saved_during_pyboy_boot_rom_is_refused(tmp_path: Path) -> None:
    from gbx_gameboy.machine import GameBoyBatch

    rom = write_anim_test_rom(tmp_path)
    data = state_bytes(pyboy_after(rom, 5))
    with pytest.raises(SaveStateError, match="boot ROM"):
        ps.load_pyboy_state(GameBoyBatch(rom, 1, "cpu"), data)


@pytest.mark.parametrize("cart_type", [0x03, 0x13, 0x1B])
def test_pyboy_state_runs_on_in_gbx(tmp_path: Path, cart_type: int) -> None:
    from gbx_gameboy.machine import GameBoyBatch

    rom = write_anim_test_rom(tmp_path, cart_type)
    emu = pyboy_after(rom, PYBOY_BOOT_FRAMES)
    batch = GameBoyBatch(rom, 2, "cpu")
    ps.load_pyboy_state(batch, state_bytes(emu), env=1)
    # A halted CPU: PyBoy's PC is on the HALT, gbx's past it (docs/savestates.md).
    halted = batch.regs(1)["halted"] == 1
    assert batch.regs(1)["pc"] == emu.register_file.PC + halted
    assert batch.regs(0)["pc"] != emu.register_file.PC + halted  # env 0 untouched
    prev = None
    for _ in range(3):
        emu.tick()
        batch.run_frames(1, render_last=True)
        assert (batch.fb[1].numpy() == pyboy_shades(emu)).all()
        # gbx's frame ends as VBlank starts, PyBoy's as line 0 starts: the VBlank
        # handler of frame k has run in PyBoy but not yet in gbx.
        if prev is not None:
            assert probe(batch, 1) == prev
        prev = probe(emu)


@pytest.mark.parametrize("cart_type", [0x03, 0x13, 0x1B])
def test_gbx_env_runs_on_in_pyboy(tmp_path: Path, cart_type: int) -> None:
    from gbx_gameboy.machine import GameBoyBatch

    rom = write_anim_test_rom(tmp_path, cart_type)
    batch = GameBoyBatch(rom, 1, "cpu")
    batch.run_frames(30, render_last=True)
    data = ps.save_pyboy_state(batch, 0)
    emu = pyboy.PyBoy(str(rom), window="null", sound_emulated=False)
    emu.load_state(io.BytesIO(data))
    assert emu.register_file.PC == batch.regs(0)["pc"] - (batch.regs(0)["halted"] == 1)
    emu.tick()  # PyBoy finishes the VBlank lines gbx stopped in
    for _ in range(3):
        before = probe(emu)
        emu.tick()
        batch.run_frames(1, render_last=True)
        assert (batch.fb[0].numpy() == pyboy_shades(emu)).all()
        assert probe(batch, 0) == before


def test_env_starts_from_a_pyboy_state_file(tmp_path: Path) -> None:
    from gbx_gameboy.env import GameBoyConfig, GameBoyEnv

    rom = write_anim_test_rom(tmp_path)
    emu = pyboy_after(rom, PYBOY_BOOT_FRAMES)
    path = tmp_path / "game.state"
    path.write_bytes(state_bytes(emu))
    cfg = GameBoyConfig(rom=str(rom), state=str(path), obs_size="144x160")
    env = GameBoyEnv(cfg, 2, "cpu")
    obs = env.reset()
    emu.tick()  # the env renders one frame after loading a PyBoy state
    assert (obs[0, -1].numpy() == pyboy_shades(emu)).all()
    assert env.meta()["state_sha256"] and (obs[0] == obs[1]).all()
