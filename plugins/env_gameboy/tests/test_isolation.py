"""One bad env never touches another: env 0 gets an illegal opcode, garbage memory, a
halt-forever program, out-of-range savestates (through the loaders) and out-of-range
state written straight into the batch (past the loaders: the kernels' own bounds); every
other env's state and frames equal its solo run bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from gbx_gameboy import layout as L
from gbx_gameboy import pyboy_state as ps
from gbx_gameboy import savestate
from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.microrom import micro_rom
from gbx_gameboy.ppu_timing import LINE_CYCLES, PH_HBLANK, PH_LINE153
from gbx_gameboy.resources import bundled_states_dir
from gbx_gameboy.snapshot import capture
from gbx_gameboy.state_bounds import sanitize
from gbx_gameboy.tiles import env_rows

STEPS, FRAMES = 6, 4
ENVS = 3  # env 0 is the bad one


def _devices() -> list[str]:
    return ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU"))]


def _buttons(env: int, step: int) -> int:
    # START to leave the title, then a different walk per env.
    return 0x80 if step == 1 else (1 << ((env + step) % 4))


def _drive(batch: GameBoyBatch, envs: list[int]) -> None:
    dev = batch.fb.device
    batch.run_frames(1, render_last=True)  # the first frame drawn: a bad LY meets the renderer
    for step in range(STEPS):
        b = torch.tensor([_buttons(e, step) for e in envs], dtype=torch.int32, device=dev)
        batch.step_frames(b, FRAMES, 2)
    batch.synchronize()


def _solo(device: str, env: int) -> dict[str, torch.Tensor]:
    batch = GameBoyBatch(DEFAULT_ROM, 1, device)
    _drive(batch, [env])
    return {k: v.cpu() for k, v in capture(batch.state_tensors(), 0).items()}


def _st(batch: GameBoyBatch) -> torch.Tensor:
    return env_rows(batch.state_tensors()["st"], 0)


def _mem(batch: GameBoyBatch) -> torch.Tensor:
    return env_rows(batch.state_tensors()["mem"], 0)


def illegal_opcode(batch: GameBoyBatch, tmp: Path) -> None:
    _mem(batch)[L.WRAM_OFF] = 0xD3  # no such SM83 opcode
    _st(batch)[L.R_PC] = 0xC000


def halt_forever(batch: GameBoyBatch, tmp: Path) -> None:
    _mem(batch)[L.HRAM_OFF + 0:L.HRAM_OFF + 2] = torch.tensor([0xF3, 0x76])  # di; halt
    _mem(batch)[L.HRAM_OFF + L.IE_HRAM_INDEX] = 0
    _st(batch)[L.R_PC] = 0xFF80


def garbage_memory(batch: GameBoyBatch, tmp: Path) -> None:
    g = torch.Generator().manual_seed(5)
    arrays = capture(batch.state_tensors(), 0)
    for k, v in arrays.items():
        info = torch.iinfo(v.dtype)
        arrays[k] = torch.randint(info.min, info.max, v.shape, generator=g, dtype=torch.int64
                                  ).to(v.dtype)
    savestate.load_into(batch, savestate.SaveState(
        savestate.RomId.of(batch.cart), {k: v.cpu() for k, v in arrays.items()}, ""), env=0)


def out_of_range_gbxstate(batch: GameBoyBatch, tmp: Path) -> None:
    arrays = {k: v.cpu() for k, v in capture(batch.state_tensors(), 0).items()}
    arrays["mem"][L.IO_OFF + L.LY] = 200
    arrays["st"][L.S_PPU_PHASE] = 2  # drawing, past the last line
    arrays["st"][L.T_PPU_NEXT] = 2**31 - 1
    arrays["st"][L.S_MODE3_LEN] = -(2**31)
    arrays["st"][L.S_WIN_LINE] = 10**9
    arrays["st"][L.S_SER_LEN] = -7
    arrays["tm"][L.TM_CLOCK] = -1
    path = tmp / "bad.gbxstate"
    path.write_bytes(savestate.encode(savestate.RomId.of(batch.cart), arrays))
    savestate.load_state(batch, path, env=0)


def pyboy_state_in_vblank(batch: GameBoyBatch, tmp: Path) -> None:
    """A PyBoy state as gbx writes it (LY=144), with a far-off PPU clock target."""
    state = {k: v.cpu() for k, v in capture(batch.state_tensors(), 0).items()}
    fields = ps.from_gbx(state, batch.cart, ps.blank_fields(batch.cart))
    fields.update(LY=144, STAT=0x81, lcd_clock=144 * 456, lcd_clock_target=2**63,
                  cpu_cycles=2**64 - 1)
    ps.load_pyboy_state(batch, ps.encode(fields, batch.cart), env=0)


def raw_out_of_range(batch: GameBoyBatch, tmp: Path) -> None:
    """Past the loaders: the kernels' own clamps and the cycle budget."""
    st = _st(batch)
    _mem(batch)[L.IO_OFF + L.LY] = 250
    _mem(batch)[L.IO_OFF + L.LCDC] = 0x80 | 0x20 | 0x01
    st[L.S_PPU_PHASE] = 2
    st[L.T_PPU_NEXT] = -5
    st[L.S_WIN_LINE] = 2**30
    st[L.S_RAMOFF] = 2**20
    st[L.S_SER_LEN] = -(2**31)


def frozen_ppu(batch: GameBoyBatch, tmp: Path) -> None:
    """The PPU's next event never comes (raw): only the cycle budget ends the launch."""
    _mem(batch)[L.IO_OFF + L.LCDC] = 0x91
    _st(batch)[L.T_PPU_NEXT] = L.NEVER - 1
    _st(batch)[L.T_LINE_AT] = L.NEVER - 100000


BAD: dict[str, Callable[[GameBoyBatch, Path], None]] = {
    "illegal-opcode": illegal_opcode,
    "halt-forever": halt_forever,
    "garbage-memory": garbage_memory,
    "out-of-range-gbxstate": out_of_range_gbxstate,
    "pyboy-vblank": pyboy_state_in_vblank,
    "raw-out-of-range": raw_out_of_range,
    "frozen-ppu": frozen_ppu,
}


@pytest.mark.parametrize("device", _devices())
def test_bad_env_zero_leaves_the_others_bit_exact(device: str, tmp_path: Path) -> None:
    solos = {e: _solo(device, e) for e in range(1, ENVS)}
    faults = {}
    for name, spoil in BAD.items():
        batch = GameBoyBatch(DEFAULT_ROM, ENVS, device)
        spoil(batch, tmp_path)
        _drive(batch, list(range(ENVS)))
        for e in range(1, ENVS):
            got = {k: v.cpu() for k, v in capture(batch.state_tensors(), e).items()}
            for k in got:
                assert torch.equal(got[k], solos[e][k]), f"{name}: env {e} {k} differs"
        ly = batch.read_memory(0, 0xFF44)
        assert ly <= 153, f"{name}: LY {ly}"
        faults[name] = int(batch.locked[0])
    assert faults["illegal-opcode"] == L.FAULT_ILLEGAL_OPCODE
    assert faults["frozen-ppu"] == L.FAULT_BUDGET
    assert faults["halt-forever"] == 0  # a halted CPU still completes frames


@pytest.mark.parametrize("device", _devices())
def test_a_bad_line_never_reaches_a_frozen_neighbour(device: str) -> None:
    """Env 1 is locked, so nothing of its own redraws its frame: any write from env 0's
    out-of-range lines (LY 144-255, drawing phase) would stay visible in it."""
    batch = GameBoyBatch(DEFAULT_ROM, 2, device)
    batch.run_frames(2, render_last=True)
    env_rows(batch.state_tensors()["st"], 1)[L.S_LOCKED] = L.FAULT_ILLEGAL_OPCODE
    batch.fb[1].fill_(3)  # a frame env 0's bad lines (LCDC 0x80: shade 0) cannot repaint
    frozen = batch.fb[1].clone()
    for ly in (144, 153, 200, 255):
        _mem(batch)[L.IO_OFF + L.LCDC] |= 0x80
        _mem(batch)[L.IO_OFF + L.LY] = ly
        _st(batch)[L.S_PPU_PHASE] = 2
        _st(batch)[L.T_PPU_NEXT] = 0
        batch.run_frames(1, render_last=True)
        batch.synchronize()
        assert torch.equal(batch.fb[1], frozen), f"LY {ly} drew into env 1"


def test_fault_mask_is_reported_by_the_env() -> None:
    from gbx_gameboy.env import GameBoyConfig, GameBoyEnv

    env = GameBoyEnv(GameBoyConfig(frames_per_step=2, release_after_frames=2), 2, "cpu")
    env.reset()
    illegal_opcode(env.batch, Path())
    _, _, _, _, info = env.step(torch.zeros(2, dtype=torch.int64))
    assert info["faulted"].tolist() == [True, False]


def test_sanitize_keeps_every_state_the_emulator_reaches() -> None:
    """States of the bundled game under random buttons (and its start state) load bit
    for bit: the clamps only ever touch what the emulator cannot produce."""
    batch = GameBoyBatch(DEFAULT_ROM, 3)
    savestate.load_state(batch, bundled_states_dir() / "quest_start.gbxstate")
    g = torch.Generator().manual_seed(3)
    for _ in range(25):
        batch.step_frames(torch.randint(0, 256, (3,), generator=g, dtype=torch.int32), 3, 2)
        for e in range(3):
            arrays = {k: v.cpu() for k, v in capture(batch.state_tensors(), e).items()}
            clean = sanitize(arrays, batch.cart)
            assert all(torch.equal(arrays[k], clean[k]) for k in arrays)


def test_sanitize_keeps_line_153_after_ly_turned_0() -> None:
    """Line 153 once LY reads 0 (mode 1 with LY=0) is a state the PPU is in, with the
    LY=LYC gap flag in its second M-cycle: both load unchanged; the flag elsewhere is
    dropped."""
    poll = """
    ld a, $40
    ldh [$41], a        ; an LY=LYC STAT source: the PPU steps through every transition
.poll:
    ldh a, [$41]
    jr .poll
"""
    batch = GameBoyBatch(micro_rom(poll), 1)
    batch.run_frames(2)  # ends as line 144 starts
    batch.run_cycles(9 * LINE_CYCLES + 100)  # into line 153, past its first M-cycles
    arrays = {k: v.cpu() for k, v in capture(batch.state_tensors(), 0).items()}
    st = arrays["st"]
    assert int(st[L.S_PPU_PHASE]) == PH_LINE153 and int(arrays["mem"][L.IO_OFF + L.LY]) == 0
    for flags in (0, L.PPU_LY153_GAP):
        st[L.S_PPU_FLAGS] = flags
        clean = sanitize(arrays, batch.cart)
        assert all(torch.equal(arrays[k], clean[k]) for k in arrays), flags
    st[L.S_PPU_PHASE], st[L.S_PPU_MODE] = PH_HBLANK, 0
    assert int(sanitize(arrays, batch.cart)["st"][L.S_PPU_FLAGS]) == 0


def test_sanitize_clamps_every_field_into_range() -> None:
    batch = GameBoyBatch(DEFAULT_ROM, 1)
    arrays = {k: v.cpu() for k, v in capture(batch.state_tensors(), 0).items()}
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        bad = {k: v.clone() for k, v in arrays.items()}
        bad["st"] = torch.randint(-(2**31), 2**31 - 1, bad["st"].shape, generator=g,
                                  dtype=torch.int64).to(torch.int32)
        bad["mem"][L.IO_OFF + L.LY] = int(torch.randint(0, 256, (1,), generator=g))
        bad["mem"][L.IO_OFF + L.LCDC] = 0x91
        out = sanitize(bad, batch.cart)
        st, ly = out["st"], int(out["mem"][L.IO_OFF + L.LY])
        assert 0 <= ly <= 153
        assert (int(st[L.S_PPU_MODE]) == 1) == (ly >= 144)
        assert all(0 <= int(st[k]) <= 0xFF for k in range(8))
        assert 0 <= int(st[L.R_PC]) <= 0xFFFF and 0 <= int(st[L.R_SP]) <= 0xFFFF
        assert -L.CYCLES_PER_FRAME <= int(st[L.T_PPU_NEXT]) <= L.CYCLES_PER_FRAME
        assert int(st[L.S_RAMOFF]) == -1  # the bundled game has no cart RAM
        assert int(st[L.S_SER_LEN]) >= 0 and 0 <= int(st[L.S_WIN_LINE]) <= 144
        assert sanitize(out, batch.cart)["st"].equal(st)  # idempotent


def test_sanitize_keeps_the_apu_rows_in_range() -> None:
    """The wave position indexes wave RAM and the frame-sequencer step selects the
    clocks: from any crafted APU rows they come out masked, counters in their ranges."""
    batch = GameBoyBatch(DEFAULT_ROM, 1)
    arrays = {k: v.cpu() for k, v in capture(batch.state_tensors(), 0).items()}
    assert sanitize(arrays, batch.cart)["apu"].equal(arrays["apu"])  # own state unchanged
    g = torch.Generator().manual_seed(2)
    for _ in range(50):
        bad = {k: v.clone() for k, v in arrays.items()}
        bad["apu"] = torch.randint(-(2**31), 2**31 - 1, bad["apu"].shape, generator=g,
                                   dtype=torch.int64).to(torch.int32)
        apu = sanitize(bad, batch.cart)["apu"]
        assert 0 <= int(apu[L.A_W_POS]) <= 31 and 0 <= int(apu[L.A_FS]) <= 7
        assert all(0 <= int(apu[L.A_LEN + ch]) <= (256 if ch == 2 else 64) for ch in range(4))
        assert 0 <= int(apu[L.A_SW_TIMER]) <= 8 and int(apu[L.A_SYNC]) >= -1
        assert int(apu[L.A_SW_EN]) in (0, 1) and int(apu[L.A_SW_NEG]) in (0, 1)


_CHECKED_RUN = """
import sys, torch
from gbx_gameboy import layout as L
from gbx_gameboy.kstate import CHECK_BOUNDS, GB, mget
from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.tiles import env_rows
from gbx_gameboy.warp_setup import wp

@wp.kernel
def past_the_slice(g: GB, off: int):
    mget(g, wp.tid(), off)

assert CHECK_BOUNDS
b = GameBoyBatch(DEFAULT_ROM, 2)
st, mem = env_rows(b.state_tensors()["st"], 0), env_rows(b.state_tensors()["mem"], 0)
mem[L.IO_OFF + L.LY] = 250
st[L.S_PPU_PHASE] = 2
st[L.T_PPU_NEXT] = -5
st[L.S_WIN_LINE] = 2**30
st[L.S_RAMOFF] = 2**20
st[L.S_SER_LEN] = -(2**31)
code = [0x3E, 0x81, 0xE0, 0x02, 0xFA, 0x00, 0xA0, 0xEA, 0x00, 0xA0]
mem[L.WRAM_OFF:L.WRAM_OFF + len(code)] = torch.tensor(code, dtype=torch.uint8)
# ld a, $81; ldh [SC], a (a serial transfer into the ring); ld a, [$A000]; ld [$A000], a
# (cart RAM that this cartridge does not have, through the state's RAM window)
st[L.R_PC] = 0xC000
b.run_frames(1, render_last=True)  # drawn from the first line on
b.run_frames(2, render_last=True)
b.synchronize()
print("clean", flush=True)
# The control: one read past the env's slice must stop the process.
wp.launch(past_the_slice, dim=1, inputs=[b.arrays, L.MEM_BYTES], device="cpu")
wp.synchronize()
print("not stopped", flush=True)
"""


def test_bounds_check_mode_traps_out_of_slice_access_and_passes_bad_states(
    tmp_path: Path,
) -> None:
    """The check-mode build runs out-of-range states without a single access outside an
    env's slice, and does stop at one (the control: a kernel reading past the slice)."""
    script = tmp_path / "checked_run.py"  # Warp kernels need a source file
    script.write_text(_CHECKED_RUN)
    env = {**os.environ, "GBX_GAMEBOY_CHECK_BOUNDS": "1"}
    out = subprocess.run([sys.executable, str(script)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert "clean" in out.stdout, out.stderr[-2000:]
    assert out.returncode != 0 and "not stopped" not in out.stdout
    assert "gbx bounds check: offset 16800 outside [0, 16800)" in out.stdout + out.stderr
