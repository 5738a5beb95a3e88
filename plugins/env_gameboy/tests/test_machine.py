"""GameBoyBatch API: stepping, frames, zero-copy state, independence of envs, MBC banking."""

from __future__ import annotations

import functools
import os

import pytest
import torch

from gbx_gameboy import layout as L
from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.microrom import micro_rom
from gbx_gameboy.tiles import env_rows, tile_envs

WAIT_VBLANK = """
    ld a, $01
    ldh [$FF], a
    ld a, $01
"""

# Every frame: wait for VBlank, read both joypad rows, fold them into a hash in WRAM and
# scatter the hash over WRAM, so different inputs give different machine states.
INPUT_HASH = """
    ld a, $01
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ld hl, $C100
.frame:
    halt
    xor a
    ldh [$0F], a
    ld a, $10
    ldh [$00], a
    ldh a, [$00]
    ld b, a
    ld a, $20
    ldh [$00], a
    ldh a, [$00]
    swap a
    xor b
    ld b, a
    ld a, [$C000]
    rlca
    xor b
    add a, $3B
    ld [$C000], a
    ld [hl+], a
    ld a, h
    cp $D0
    jr nz, .frame
    ld hl, $C100
    jr .frame
"""


def test_run_frames_counts_vblank_entries_and_frames_last_70224_cycles() -> None:
    batch = GameBoyBatch(micro_rom(INPUT_HASH), 2, "cpu")
    batch.run_frames(3)
    assert batch.frame_count.tolist() == [3, 3]
    c0 = batch.cycle_count.clone()
    batch.run_frames(5)
    assert batch.frame_count.tolist() == [8, 8]
    dt = (batch.cycle_count - c0).tolist()
    assert all(abs(d - 5 * L.CYCLES_PER_FRAME) < 24 for d in dt)


def test_run_cycles_stops_at_first_instruction_boundary_after_n() -> None:
    batch = GameBoyBatch(micro_rom(".spin:\n    inc a\n    jr .spin"), 1, "cpu")
    batch.run_cycles(10_000)
    c = int(batch.cycle_count[0])
    assert 10_000 <= c < 10_000 + 24
    batch.run_cycles(1)
    assert int(batch.cycle_count[0]) > c


def test_lcd_off_frames_still_last_70224_cycles() -> None:
    body = """
.vbl:
    ldh a, [$44]
    cp 144
    jr nz, .vbl
    xor a
    ldh [$40], a
.spin:
    inc b
    jr .spin
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(2)
    assert batch.read_memory(0, 0xFF40) == 0
    c0 = int(batch.cycle_count[0])
    batch.run_frames(4)
    assert abs(int(batch.cycle_count[0]) - c0 - 4 * L.CYCLES_PER_FRAME) < 24


def test_lyc_stat_interrupt_fires_on_the_matching_line() -> None:
    body = """
    ld a, 100
    ldh [$45], a
    ld a, $40
    ldh [$41], a
    ld a, $02
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ld [$C001], a
    ei
.spin:
    halt
    jr .spin
"""
    handler = """
SECTION "stat", ROM0[$0048]
    jp OnStat
SECTION "h", ROM0[$1000]
OnStat:
    ldh a, [$44]
    ld [$C000], a
    ld a, [$C001]
    inc a
    ld [$C001], a
    reti
"""
    batch = GameBoyBatch(micro_rom(body, extra=handler), 1, "cpu")
    batch.run_frames(10)
    assert batch.read_memory(0, 0xC000) == 100
    assert batch.read_memory(0, 0xC001) in (9, 10)


def test_state_tensors_are_zero_copy_views() -> None:
    batch = GameBoyBatch(micro_rom("    DONE"), 3, "cpu")
    views = batch.state_tensors()
    assert views["st"].shape == (1, L.ST_COUNT, L.TILE)  # 3 envs fit one tile
    assert views["mem"].shape == (1, L.MEM_BYTES, L.TILE)
    assert views["fb"].shape == (3, 144, 160)
    assert views["st"].data_ptr() == batch.arrays.st.ptr
    env_rows(views["st"], 1)[L.R_A] = 0x5A
    assert batch.regs(1)["a"] == 0x5A
    assert views["st"][0, L.R_A, 1] == 0x5A  # env e: tile e // TILE, column e % TILE
    assert batch.fb.data_ptr() == batch.arrays.fb.ptr


def test_post_boot_state() -> None:
    batch = GameBoyBatch(micro_rom("    DONE"), 1, "cpu")
    r = batch.regs(0)
    assert (r["a"], r["f"], r["b"], r["c"], r["d"], r["e"], r["h"], r["l"]) == (
        0x01, 0xB0, 0x00, 0x13, 0x00, 0xD8, 0x01, 0x4D)
    assert (r["sp"], r["pc"]) == (0xFFFE, 0x0100)
    assert batch.read_memory(0, 0xFF40) == 0x91
    assert batch.read_memory(0, 0xFF47) == 0xFC


def test_optional_boot_rom_runs_first_and_unmaps_itself() -> None:
    boot = bytearray(256)
    boot[0:3] = bytes([0x06, 0x42, 0x00])  # ld b, $42
    boot[0xFC:0x100] = bytes([0x3E, 0x01, 0xE0, 0x50])  # ld a,1 ; ldh [$50],a
    body = "    ld a, b\n    ld [$C000], a\n    ld a, [$0000]\n    ld [$C001], a\n    DONE"
    rom = micro_rom(body)
    batch = GameBoyBatch(rom, 1, "cpu", boot_rom=bytes(boot))
    assert batch.regs(0)["pc"] == 0
    batch.run_frames(2)
    assert batch.read_memory(0, 0xC000) == 0x42
    assert batch.read_memory(0, 0xC001) == rom[0]  # boot ROM unmapped


def _random_buttons(seed: int, steps: int, n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (steps, n), generator=g, dtype=torch.int32)


def test_envs_with_different_inputs_diverge_and_match_single_env_runs() -> None:
    n, steps = 4, 5
    rom = micro_rom(INPUT_HASH)
    inputs = _random_buttons(7, steps, n)
    batch = GameBoyBatch(rom, n, "cpu")
    for s in range(steps):
        batch.step_frames(inputs[s], frames=6, release_after=3, render_last=False)
    full = {k: v.clone() for k, v in batch.state_tensors().items()}
    mem = full["mem"]
    assert len({bytes(env_rows(mem, e).numpy()) for e in range(n)}) == n  # all diverged
    for e in range(n):
        single = GameBoyBatch(rom, 1, "cpu")
        for s in range(steps):
            single.step_frames(inputs[s, e : e + 1], frames=6, release_after=3, render_last=False)
        for name, t in single.state_tensors().items():
            ref = full[name][e] if name == "fb" else env_rows(full[name], e)
            got = t[0] if name == "fb" else env_rows(t, 0)
            assert torch.equal(ref, got), f"env {e}: {name} differs from its 1-env run"


MBC_BANKS = "".join(
    f'SECTION "bank{b}", ROMX[$4000], BANK[{b}]\n    db ${b * 17 + 3:02X}\n' for b in range(1, 8)
)


def test_mbc1_rom_banking_and_bank_zero_maps_to_one() -> None:
    body = """
    ld hl, $C000
    ld b, 0
.next:
    ld a, b
    ld [$2000], a
    ld a, [$4000]
    ld [hl+], a
    inc b
    ld a, b
    cp 8
    jr nz, .next
    DONE
"""
    batch = GameBoyBatch(micro_rom(body, cart_type=0x01, extra=MBC_BANKS), 1, "cpu")
    batch.run_frames(2)
    got = [batch.read_memory(0, 0xC000 + i) for i in range(8)]
    assert got == [1 * 17 + 3] + [b * 17 + 3 for b in range(1, 8)]


def test_mbc1_ram_banks_in_mode_1() -> None:
    body = """
    ld a, $0A
    ld [$0000], a
    ld a, 1
    ld [$6000], a
    ld b, 0
.wr:
    ld a, b
    ld [$4000], a
    add a, $A0
    ld [$A123], a
    inc b
    ld a, b
    cp 4
    jr nz, .wr
    ld hl, $C000
    ld b, 0
.rd:
    ld a, b
    ld [$4000], a
    ld a, [$A123]
    ld [hl+], a
    inc b
    ld a, b
    cp 4
    jr nz, .rd
    xor a
    ld [$0000], a
    ld a, [$A123]
    ld [hl], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body, cart_type=0x03, ram_size=3), 1, "cpu")
    batch.run_frames(2)
    got = [batch.read_memory(0, 0xC000 + i) for i in range(5)]
    assert got == [0xA0, 0xA1, 0xA2, 0xA3, 0xFF]  # last: RAM disabled reads open bus


def test_mbc5_maps_bank_zero_at_4000() -> None:
    body = """
    xor a
    ld [$2000], a
    ld a, [$4000]
    ld [$C000], a
    ld a, 5
    ld [$2000], a
    ld a, [$4000]
    ld [$C001], a
    DONE
"""
    rom = micro_rom(body, cart_type=0x19, extra=MBC_BANKS)
    batch = GameBoyBatch(rom, 1, "cpu")
    batch.run_frames(2)
    assert batch.read_memory(0, 0xC000) == rom[0]
    assert batch.read_memory(0, 0xC001) == 5 * 17 + 3


def test_mbc3_rtc_counts_emulated_seconds() -> None:
    body = """
    ld a, $0A
    ld [$0000], a
    ld a, $08
    ld [$4000], a
.loop:
    xor a
    ld [$6000], a
    inc a
    ld [$6000], a
    ld a, [$A000]
    ld [$C000], a
    jr .loop
"""
    batch = GameBoyBatch(micro_rom(body, cart_type=0x10, ram_size=2), 1, "cpu")
    batch.run_frames(300)  # 300 * 70224 cycles = 5.02 s
    assert batch.read_memory(0, 0xC000) == int(batch.cycle_count[0]) // L.CPU_HZ == 5


def test_serial_ring_buffer_keeps_the_last_bytes() -> None:
    body = """
    ld b, 0
.next:
    ld a, b
    ldh [$01], a
    ld a, $81
    ldh [$02], a
.busy:
    ldh a, [$02]
    bit 7, a
    jr nz, .busy
    inc b
    ld a, b
    cp 40
    jr nz, .next
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu", serial_capacity=16)
    batch.run_frames(5)
    assert batch.serial_output(0) == bytes(range(24, 40))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("gpu_kernel", ["auto", "cuda"])
def test_cuda_matches_cpu(gpu_kernel: str) -> None:
    """auto: what a GPU picks for 8 envs (docs/emulator.md, "Launch plan on a GPU")."""
    rom = micro_rom(INPUT_HASH)
    inputs = _random_buttons(3, 3, 8)
    out = []
    for dev in ("cpu", "cuda"):
        batch = GameBoyBatch(rom, 8, dev, kernel="auto" if dev == "cpu" else gpu_kernel)
        for s in range(3):
            batch.step_frames(inputs[s].to(dev), frames=6, release_after=3)
        out.append({k: v.cpu() for k, v in batch.state_tensors().items()})
    for k in out[0]:
        assert torch.equal(out[0][k], out[1][k]), k


def test_stop_sleeps_until_a_button_press() -> None:
    body = """
    xor a
    ldh [$00], a       ; select both rows so a press is visible
    ld [$C000], a
    stop
    ld a, 1
    ld [$C000], a
    DONE
"""
    batch = GameBoyBatch(micro_rom(body), 2, "cpu")
    batch.run_frames(3)
    assert [batch.read_memory(e, 0xC000) for e in range(2)] == [0, 0]
    assert batch.regs(0)["halted"] == 2
    batch.step_frames(torch.tensor([0x10, 0], dtype=torch.int32), 3, 1, render_last=False)
    assert [batch.read_memory(e, 0xC000) for e in range(2)] == [1, 0]


@pytest.mark.skipif(
    os.environ.get("GBX_GAMEBOY_NO_RENDER") == "1", reason="timing-only kernel requested"
)
def test_render_hook_draws_only_the_observed_frame() -> None:
    # Background tile 0 filled with colour 3 everywhere; BGP maps it to shade 3.
    body = """
.vbl:
    ldh a, [$44]
    cp 144
    jr nz, .vbl
    xor a
    ldh [$40], a       ; LCD off to write VRAM freely
    ld hl, $8000
    ld b, 16
    ld a, $FF
.fill:
    ld [hl+], a
    dec b
    jr nz, .fill
    ld a, $E4
    ldh [$47], a
    ld a, $91
    ldh [$40], a
.spin:
    jr .spin
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    batch.run_frames(3, render_last=False)
    assert int(batch.fb.sum()) == 0  # nothing observed, nothing drawn
    batch.run_frames(2, render_last=True)
    assert int(batch.fb.min()) == 3 and int(batch.fb.max()) == 3


@pytest.mark.slow
def test_long_runs_do_not_wrap_the_int32_event_clock() -> None:
    # 2**31 cycles is about 30,600 frames. Event times that are never refreshed (the last
    # timer sync while TAC is off, the last OAM DMA) must saturate instead of wrapping, or
    # the timer enabled afterwards would never count.
    body = """
    di
    xor a
    ld [$C000], a
.frame:                ; poll LY (no IF/timer register access while the timer is off)
    ldh a, [$44]
    cp 144
    jr nz, .frame
.vbl:
    ldh a, [$44]
    cp 144
    jr z, .vbl
    ld a, [$C000]
    inc a
    ld [$C000], a
    ld [$FE00], a
    ld a, [$FE00]
    ld [$C001], a
    ld a, $10          ; action row: A pressed -> start the timer
    ldh [$00], a
    ldh a, [$00]
    bit 0, a
    jr nz, .frame
    ld a, $05
    ldh [$07], a
    ldh a, [$05]
    ld [$C002], a
    jr .frame
"""
    batch = GameBoyBatch(micro_rom(body), 1, "cpu")
    for _ in range(4):
        batch.run_frames(9000)
    assert int(batch.cycle_count[0]) > 2**31
    counter = batch.read_memory(0, 0xC000)
    assert counter in ((36000 - 1) % 256, 36000 % 256)
    assert batch.read_memory(0, 0xC001) == counter  # OAM not blocked by a stale DMA window
    batch.step_frames(torch.tensor([0x10], dtype=torch.int32), 3, 3, render_last=False)
    assert batch.read_memory(0, 0xC002) != 0  # TIMA counts


@pytest.mark.skipif(
    os.environ.get("GBX_GAMEBOY_NO_RENDER") == "1", reason="timing-only kernel requested"
)
def test_mid_frame_palette_write_lands_on_the_right_lines() -> None:
    # Tile 0 is colour 3 everywhere. BGP=$FF (shade 3) at frame start, switched to $00
    # (shade 0) by the LY=72 STAT interrupt: lines before 72 keep shade 3.
    body = """
.vbl:
    ldh a, [$44]
    cp 144
    jr nz, .vbl
    xor a
    ldh [$40], a
    ld hl, $8000
    ld b, 16
    ld a, $FF
.fill:
    ld [hl+], a
    dec b
    jr nz, .fill
    ld a, 72
    ldh [$45], a
    ld a, $40
    ldh [$41], a
    ld a, $03          ; VBlank + STAT
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ld a, $91
    ldh [$40], a
    ei
.spin:
    halt
    jr .spin
"""
    handlers = """
SECTION "vbl", ROM0[$0040]
    jp OnVBlank
SECTION "stat", ROM0[$0048]
    jp OnStat
SECTION "h", ROM0[$1000]
OnVBlank:
    ld a, $FF
    ldh [$47], a
    reti
OnStat:
    xor a
    ldh [$47], a
    reti
"""
    batch = GameBoyBatch(micro_rom(body, extra=handlers), 1, "cpu")
    batch.run_frames(4, render_last=True)
    fb = batch.fb[0]
    assert bool((fb[:72] == 3).all())
    assert bool((fb[73:] == 0).all())


# ---------------------------------------------------------------- mode 3 and objects
def _object_dots_model(oam: list[int], lcdc: int, scx: int, wy: int, wx: int, ly: int) -> int:
    """Plain-Python statement of the fetch rule (see ppu_timing.object_dots)."""
    if not lcdc & 0x02:
        return 0
    height = 16 if lcdc & 0x04 else 8
    on_line = [i for i in range(40) if oam[4 * i] - 16 <= ly < oam[4 * i] - 16 + height][:10]
    window = (lcdc & 0x21) == 0x21 and ly >= wy and wx <= 166
    waited: set[tuple[str, int]] = set()
    dots = 0
    for i in on_line:
        x = oam[4 * i + 1]
        if x >= 168:
            continue
        dots += 6
        left = x - 8
        if window and left >= wx - 7:
            grid, pos = "win", left - (wx - 7)
        else:
            grid, pos = "bg", (left + scx) % 256
        if (grid, pos // 8) not in waited:
            waited.add((grid, pos // 8))
            dots += max(0, 5 - pos % 8)
    return dots


@functools.cache
def _object_dots_kernel():
    from gbx_gameboy.kstate import env_base
    from gbx_gameboy.ppu_timing import object_dots
    from gbx_gameboy.warp_setup import import_warp

    wp = import_warp()

    @wp.kernel(enable_backward=False)
    def k(mem_ptr: wp.uint64, lines: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.int32)):
        e = wp.tid()
        out[e] = object_dots(env_base(mem_ptr, L.MEM_TILE_BYTES, 1, e), lines[e])

    return k


def _object_dots(
    oams: list[list[int]], regs: list[tuple[int, int, int, int, int]], device: str = "cpu"
) -> list[int]:
    from gbx_gameboy.warp_setup import import_warp

    wp = import_warp()

    n = len(oams)
    mem = torch.zeros((L.MEM_BYTES, n), dtype=torch.uint8)
    lines = torch.zeros(n, dtype=torch.int32)
    for e, (oam, (lcdc, scx, wy, wx, ly)) in enumerate(zip(oams, regs, strict=True)):
        mem[L.OAM_OFF : L.OAM_OFF + 160, e] = torch.tensor(oam, dtype=torch.uint8)
        for reg, v in ((L.LCDC, lcdc), (L.SCX, scx), (L.WY, wy), (L.WX, wx)):
            mem[L.IO_OFF + reg, e] = v
        lines[e] = ly
    out = wp.zeros(n, dtype=wp.int32, device=device)
    tiled = wp.from_torch(tile_envs(mem.T).to(device))
    wp.launch(_object_dots_kernel(), dim=n, device=device,
              inputs=[tiled.ptr, wp.from_torch(lines.to(device)), out])
    return out.numpy().tolist()


def _oam(*xs: int, y: int = 16) -> list[int]:
    """OAM with objects at the given X on rows 0-7 (Y=16); the other 40 - n are hidden."""
    oam = [0] * 160
    for i, x in enumerate(xs):
        oam[4 * i : 4 * i + 2] = [y, x]
    return oam


def test_object_dots_follow_the_fetch_rule() -> None:
    on = (0x93, 0, 0, 0, 0)  # LCD, BG and objects on; SCX = 0; line 0
    cases = [
        (_oam(0), on, 11),  # leftmost pixel at a tile's first pixel: 6 + 5
        (_oam(5), on, 6),  # offset 5: nothing left to wait for
        (_oam(3), on, 8),
        (_oam(*[0] * 10), on, 65),  # one tile: only the first object waits
        (_oam(0, 8), on, 22),  # two tiles: both wait
        (_oam(*[7] * 12), on, 60),  # 10 objects per line at most
        (_oam(168, 0), on, 11),  # X >= 168 takes a slot but is not fetched
        (_oam(0), (0x91, 0, 0, 0, 0), 0),  # objects off
        (_oam(0), (0x93, 3, 0, 0, 0), 8),  # SCX moves the tile grid
        (_oam(0, y=20), on, 0),  # not on line 0
    ]
    got = _object_dots([c[0] for c in cases], [c[1] for c in cases])
    assert got == [c[2] for c in cases]


@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available(), reason="no CUDA device on this machine")),
])
def test_object_dots_match_the_model_on_random_oam(device: str) -> None:
    g = torch.Generator().manual_seed(5)
    n = 64
    oams = [torch.randint(0, 176, (160,), generator=g).tolist() for _ in range(n)]
    for oam in oams:  # crowd the objects onto lines 0-40 so lines hit the 10-object limit
        for i in range(40):
            oam[4 * i] = 16 + oam[4 * i] % 48 - 8
    regs = [
        (0x80 | int(torch.randint(0, 128, (1,), generator=g)),
         int(torch.randint(0, 256, (1,), generator=g)),
         int(torch.randint(0, 40, (1,), generator=g)),
         int(torch.randint(0, 175, (1,), generator=g)),
         int(torch.randint(0, 40, (1,), generator=g)))
        for _ in range(n)
    ]
    want = [_object_dots_model(o, *r) for o, r in zip(oams, regs, strict=True)]
    assert _object_dots(oams, regs, device) == want
    assert len(set(want)) > 10  # the cases are varied


# A halted CPU woken by a timer whose period (464 cycles) drifts across the line logs STAT
# at every wake-up, over lines crowded with objects.
HALTED_STAT_LOG = """
    di
    ld sp, $DFFF
.vbl:
    ldh a, [$44]
    cp 144
    jr nz, .vbl
    xor a
    ldh [$40], a
    ld hl, $FE00
    ld b, 40
    ld c, 3
.obj:
    ld a, c
    add a, 16
    ld [hl+], a
    ld a, c
    and $7F
    add a, 9
    ld [hl+], a
    xor a
    ld [hl+], a
    ld [hl+], a
    ld a, c
    add a, 7
    ld c, a
    dec b
    jr nz, .obj
    ld a, [$0200]      ; LCDC: objects on or off
    ldh [$40], a
    ld hl, $C000
    ld a, 256 - 29
    ldh [$06], a
    ld a, $05
    ldh [$07], a
    ld a, $04
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ei
.idle:
    halt
    jr .idle
"""
HALTED_STAT_HANDLER = """
SECTION "timer", ROM0[$0050]
    ldh a, [$41]
    ld [hl+], a
    ld a, h
    cp $D0
    jr nz, .ok
    ld h, $C0
.ok:
    reti
SECTION "lcdc", ROM0[$0200]
    db {lcdc}
"""


def _stat_log(batch: GameBoyBatch) -> torch.Tensor:
    end = batch.regs(0)["h"] << 8 | batch.regs(0)["l"]
    return env_rows(batch.state_tensors()["mem"], 0)[L.WRAM_OFF : L.WRAM_OFF + end - 0xC000].clone()


def test_halted_cpu_skips_the_object_scan_without_changing_what_it_sees() -> None:
    # Run A lets the PPU skip the object scan of lines a halted CPU cannot observe; run B
    # splits the same run into 64-cycle launches, whose ends force every line's scan. The
    # STAT values logged at each wake-up must agree.
    rom = micro_rom(HALTED_STAT_LOG, extra=HALTED_STAT_HANDLER.format(lcdc="$93"))
    lazy = GameBoyBatch(rom, 1, "cpu")
    lazy.run_frames(12)
    exact = GameBoyBatch(rom, 1, "cpu")
    while int(exact.cycle_count[0]) < int(lazy.cycle_count[0]):
        exact.run_cycles(64)
    log_lazy, log_exact = _stat_log(lazy), _stat_log(exact)
    n = min(len(log_lazy), len(log_exact))
    assert n > 1000
    assert torch.equal(log_lazy[:n], log_exact[:n])
    # The objects are visible in the log: mode 3 lasts longer than without them.
    plain = GameBoyBatch(micro_rom(HALTED_STAT_LOG, extra=HALTED_STAT_HANDLER.format(
        lcdc="$91")), 1, "cpu")
    plain.run_frames(12)
    modes_with = (log_lazy[:n] & 3).bincount(minlength=4)
    modes_without = (_stat_log(plain)[:n] & 3).bincount(minlength=4)
    assert modes_with[3] > modes_without[3] + 20
