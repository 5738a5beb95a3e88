"""The run kernel's two variants (cpu.HOST): the CPU one gives the CUDA one's
results bit for bit, and its CPU-only code leaves the CUDA one's compiled form unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from gbx_gameboy.cpu import (
    CUDA_LOOPS,
    alu,
    alu_host,
    bus_address,
    bus_address_branches,
    jump_lane_branches,
    jump_lane_selects,
    push_target_branches,
    push_target_selects,
    push_value_branches,
    push_value_selects,
    run_kernel,
    run_kernel_host,
    value16_branches,
    value16_selects,
    vec8i,
)
from gbx_gameboy.decode import OP_ADD, OP_CCF, WORDS, decode_table
from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.machine import (
    BLOCK_THREADS,
    CPU_VARIANT_MAX_WARP_THREADS,
    RESIDENT_WARPS_PER_SM,
    GameBoyBatch,
    block_warps_problem,
    launch_plan,
    launch_shape,
)
from gbx_gameboy.tiles import env_rows
from gbx_gameboy.warp_setup import wp

FLAPPY = Path(os.environ.get("GBX_TESTROMS", "")) / "games" / "flappyboy" / "flappyboy.gb"
BUILD_OPTIONS = ("GBX_GAMEBOY_PHASE_CLOCKS", "GBX_GAMEBOY_CHECK_BOUNDS",
                 "GBX_GAMEBOY_CUDA_MAX_REGISTERS", "GBX_GAMEBOY_CUDA_LOOPS")


def _played(rom: str, kernel: str, n: int, boot: int, device: str = "cpu",
            block_threads: int | None = None,
            block_warps: int | None = None) -> dict[str, torch.Tensor]:
    """n envs booted (``boot`` frames, then START), then stepped with a different random
    button sequence per env."""
    batch = GameBoyBatch(rom, n, device, threads=1, kernel=kernel, block_threads=block_threads,
                         block_warps=block_warps)
    assert batch.kernel == kernel
    if block_threads is not None:
        assert batch.block_threads == block_threads
    if block_warps is not None:
        assert batch.block_warps == block_warps
    batch.run_frames(boot)
    batch.step_frames(torch.full((n,), 0x80, dtype=torch.int32, device=device), 6,
                      release_after=3)
    gen = torch.Generator().manual_seed(11)
    for _ in range(4):
        buttons = torch.randint(0, 256, (n,), generator=gen, dtype=torch.int32)
        batch.step_frames(buttons.to(device), 6, release_after=3)
    return {k: v.cpu().clone() for k, v in batch.state_tensors().items()}


def _assert_variants_agree(rom: str, n: int, boot: int = 30) -> None:
    host = _played(rom, "cpu", n, boot)
    mem0 = env_rows(host["mem"], 0)
    assert any(not torch.equal(mem0, env_rows(host["mem"], e)) for e in range(1, n)), \
        "the envs did not diverge"
    # The last frame is drawn (by the CPU variant at once, by the CUDA one after the
    # launch) and shows at least three shades.
    assert len(torch.unique(host["fb"])) >= 3, "the compared frame is blank"
    cuda = _played(rom, "cuda", n, boot)
    for name, tensor in host.items():
        assert torch.equal(tensor, cuda[name]), f"{name} differs between the variants"


def test_cpu_variant_gives_the_cuda_variants_state_bit_for_bit() -> None:
    _assert_variants_agree(str(DEFAULT_ROM), 40)


def test_code_at_bank_edges_runs_alike_in_both_variants(tmp_path: Path) -> None:
    # The CPU variant's inner loop takes an instruction's code bytes from its predecoded
    # entry: at a bank's last three offsets they span two banks (or run past the ROM's
    # end), and the predecoded ROM sends those instructions to the full path.
    # Here a JP at 0x3FFE takes its high byte from bank 2, mapped at 0x4000, not from the
    # ROM's bank 1, and another ends bank 2.
    from gbx_gameboy.microrom import micro_rom

    rom = bytearray(micro_rom("    ld a, 2\n    ld [$2000], a\n    jp $3FF8", cart_type=1))
    rom = rom + bytes(0x10000 - len(rom))  # 64 KiB, MBC1
    rom[0x148] = 0x01
    rom[0x14D] = 0
    for b in rom[0x134:0x14D]:
        rom[0x14D] = (rom[0x14D] - b - 1) & 0xFF
    rom[0x3FF8:0x3FFE] = bytes([0x04] * 6)  # INC B x6
    rom[0x3FFE:0x4000] = bytes([0xC3, 0xF8])  # JP $7FF8: its high byte is bank 2's first
    rom[0x4000] = 0x3F  # bank 1 (unmapped): JP $3FF8 if it were read
    rom[0x8000] = 0x7F  # bank 2
    rom[0xBFF8:0xBFFD] = bytes([0x0C, 0x14, 0x14, 0x14, 0x14])  # INC C; INC D x4
    rom[0xBFFD:0xC000] = bytes([0xC3, 0xF8, 0x3F])  # JP $3FF8 at bank 2's last offsets
    path = tmp_path / "edges.gb"
    path.write_bytes(bytes(rom))
    states = {}
    for kernel in ("cpu", "cuda"):
        batch = GameBoyBatch(str(path), 2, "cpu", threads=1, kernel=kernel)
        batch.run_frames(3)
        states[kernel] = {k: v.clone() for k, v in batch.state_tensors().items()}
        regs = batch.regs(0)
        assert regs["c"] > 0, kernel  # the JP at 0x3FFE reached bank 2
    for name, tensor in states["cpu"].items():
        assert torch.equal(tensor, states["cuda"][name]), f"{name} differs between the variants"


def _cb_program(seed: int) -> str:
    """Every CB-prefixed instruction on a register, and BIT b,(HL), from ROM: before each,
    A, F and B - L get values drawn from ``seed`` (HL points into WRAM for BIT b,(HL));
    after it, A - L and F are stored to 8 bytes of WRAM of their own."""
    gen = torch.Generator().manual_seed(seed)
    lines = ["    ld sp, $DFF0"]
    ops = [x for x in range(256) if x & 7 != 6 or 0x40 <= x < 0x80]
    for k, x in enumerate(ops):
        a, f, b, c, d, e, mem = (int(v) for v in torch.randint(0, 256, (7,), generator=gen))
        hi, lo = (0xD0, k & 0xFF) if x & 7 == 6 else (
            int(v) for v in torch.randint(0, 256, (2,), generator=gen))
        out = 0xC000 + 8 * k
        lines += [
            f"    ld a, {mem}", f"    ld [${0xD000 + (k & 0xFF):04X}], a",
            f"    ld bc, ${(a << 8) | (f & 0xF0):04X}", "    push bc", "    pop af",
            f"    ld bc, ${(b << 8) | c:04X}", f"    ld de, ${(d << 8) | e:04X}",
            f"    ld hl, ${(hi << 8) | lo:04X}",
            f"    db $CB, ${x:02X}",
            f"    ld [${out:04X}], a", "    push af",
        ]
        for i, reg in enumerate("bcdehl"):
            lines += [f"    ld a, {reg}", f"    ld [${out + 1 + i:04X}], a"]
        lines += ["    pop bc", "    ld a, c", f"    ld [${out + 7:04X}], a"]
    return "\n".join(lines + ["    DONE"])


def test_cb_instructions_run_alike_in_both_variants(tmp_path: Path) -> None:
    # The CPU variant's inner loop runs the CB operations on registers and BIT b,(HL)
    # (decode.rom_predecode); every one of them, with registers and flags drawn at random,
    # must leave the registers and flags the CUDA variant's path leaves.
    from gbx_gameboy.microrom import micro_rom

    path = tmp_path / "cb.gb"
    path.write_bytes(micro_rom(_cb_program(5)))
    states = {}
    for kernel in ("cpu", "cuda"):
        batch = GameBoyBatch(str(path), 1, "cpu", threads=1, kernel=kernel)
        batch.run_frames(4)
        assert batch.regs(0)["halted"], kernel  # the program reached its end
        states[kernel] = {k: v.clone() for k, v in batch.state_tensors().items()}
    for name, tensor in states["cpu"].items():
        assert torch.equal(tensor, states["cuda"][name]), f"{name} differs between the variants"


# The register loads the CUDA variant runs with the instruction after them
# (decode.rom_fused_entries), and what may follow one. (The 8-bit ones keep BC and HL in
# the pages the program chose for them.)
_LOADS = ("inc bc", "inc de", "inc hl", "inc sp", "dec bc", "dec de", "dec hl", "dec sp",
          "ld bc, ${:04X}", "ld de, ${:04X}", "ld hl, ${:04X}", "ld sp, ${:04X}",
          "ld hl, sp{:+d}", "ld a, b", "ld c, a", "ld h, b", "ld l, c", "ld e, l",
          "ld d, b", "ld a, h", "ld a, ${:02X}", "ld c, ${:02X}", "ld l, ${:02X}",
          "ld e, ${:02X}")
_AFTER = ("ld a, [hl]", "ld [hl], a", "ld a, [de]", "ld [de], a", "ld a, [hl+]",
          "ld [hl-], a", "adc a, [hl]", "push bc", "pop bc", "add hl, de", "add hl, sp",
          "inc a", "ld b, h", "ld c, l", "inc hl", "dec de", "ld hl, sp+3", "ld a, [bc]",
          "halt", "ei", "di", "jr @+2", "call Sub", "jp z, @+3", "push hl")


def _fused_program(seed: int, loads: tuple[str, ...], passes: int) -> tuple[str, str]:
    """(program, its handlers and data): ``passes`` times, each of ``loads`` followed by
    each kind of instruction, from registers drawn from ``seed`` (BC DE HL in WRAM, now
    and then in OAM, which holds bytes drawn from ``seed`` too, so that the OAM bug shows;
    SP in WRAM), under a timer interrupt every 256 cycles whose handler counts in HRAM and
    writes to (HL) when HL is in C800-CBFF (away from the stack), and VBlank's; after each
    pair, A - L, F and SP go to 16 bytes of WRAM of their own. Then EI with the interrupt
    already pending before a load, and loads fetched before, during and after an OAM DMA
    from WRAM (which the CPU's ROM fetches then read, as NOPs)."""
    gen = torch.Generator().manual_seed(seed)

    def draw(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi, (1,), generator=gen))

    lines = ["    ld sp, $DFF0", ".waitvb:", "    ldh a, [$44]", "    cp 144", "    jr c, .waitvb",
             "    xor a", "    ldh [$40], a", "    ld hl, $FE00", "    ld de, OamData",
             "    ld b, 160", ".oam:", "    ld a, [de]", "    inc de", "    ld [hl+], a",
             "    dec b", "    jr nz, .oam", "    ld a, $93", "    ldh [$40], a",
             "    ld a, $F0", "    ldh [$06], a", "    ld a, $05", "    ldh [$07], a",
             "    ld a, $05", "    ldh [$FF], a", "    ld a, PASSES", "    ldh [$83], a",
             "    ld hl, $C000", "    ei", ".again:"]
    k = 0
    for load in loads:
        for after in _AFTER:
            out = 0xC000 + 16 * k
            oam = draw(0, 6) == 0
            page = 0xFE00 if oam else 0xC800
            lines += [
                f"    ld sp, ${0xD800 + draw(0, 0x400):04X}",
                f"    ld bc, ${0xC800 + draw(0, 0x400):04X}",
                f"    ld de, ${page + draw(0, 0xA0 if oam else 0x400):04X}",
                f"    ld hl, ${page + draw(0, 0xA0 if oam else 0x400):04X}",
                f"    ld a, {draw(0, 256)}",
                "    " + load.format(draw(-128, 128) if "sp{" in load
                                     else draw(0, 256) if "{:02X}" in load
                                     else (0xD800 if "sp," in load else 0xC800)
                                     + draw(0, 0x400)),
                f"    {after}",
                f"    ld [${out + 8:04X}], sp",
                f"    ld sp, ${0xD800 + draw(0, 0x400):04X}",
                f"    ld [${out:04X}], a", "    push af",
            ]
            for i, reg in enumerate("bcdehl"):
                lines += [f"    ld a, {reg}", f"    ld [${out + 1 + i:04X}], a"]
            lines += ["    pop bc", "    ld a, c", f"    ld [${out + 7:04X}], a", "    ei"]
            k += 1
    # The pairs again, each time at other points of the frame (VBlank's request late in
    # the M-cycle that enters line 144 must not fall between a load and the next one).
    lines += ["    ldh a, [$83]", "    dec a", "    ldh [$83], a", "    jp nz, .again"]
    # EI with the timer's request pending: the interrupt comes after the load, before the
    # instruction after it, whose read sees what the handler wrote to (HL).
    for _ in range(8):
        lines += ["    di", "    ld a, $FF", "    ldh [$05], a", *["    nop"] * 8,
                  f"    ld hl, ${0xC800 + draw(0, 0x400):04X}", "    ei", "    inc hl",
                  "    ld a, [hl]", f"    ld [${0xC000 + 16 * k:04X}], a"]
        k += 1
    # OAM DMA from C900-C99F, zeroed: the ROM fetches it overlaps read zeros (NOPs), and
    # so would an interrupt's vector (no interrupts then).
    lines += ["    di", "    ld hl, $C900", "    xor a", "    ld b, 160", ".zero:",
              "    ld [hl+], a", "    dec b", "    jr nz, .zero", "    ld hl, $C850",
              "    ld de, $C860", "    ld a, $C9", "    ldh [$46], a"]
    lines += ["    inc hl", "    ld a, [hl]", "    inc de", "    ld [de], a"] * 60
    data = ", ".join(str(draw(0, 256)) for _ in range(160))
    extra = ('SECTION "vblank", ROM0[$0040]\n    jp VBlank\n'
             'SECTION "timer", ROM0[$0050]\n    jp Timer\n'
             'SECTION "handlers", ROM0[$0060]\nTimer:\n    push af\n    ldh a, [$80]\n'
             '    add a, 1\n    ldh [$80], a\n    ldh a, [$81]\n    adc a, 0\n'
             '    ldh [$81], a\n    ld a, h\n    and $FC\n    cp $C8\n    jr nz, .kept\n'
             '    ldh a, [$80]\n    ld [hl], a\n.kept:\n    pop af\n    reti\n'
             'VBlank:\n    push af\n    ldh a, [$82]\n    inc a\n    ldh [$82], a\n'
             '    pop af\n    reti\nSub:\n    inc bc\n    ret\n'
             f'SECTION "oam", ROM0[$3000]\nOamData:\n    db {data}\n')
    return "\n".join([f"DEF PASSES EQU {passes}", *lines, "    DONE"]), extra


def test_fused_loads_run_alike_in_both_variants(tmp_path: Path) -> None:
    # The CUDA variant runs a register load and the instruction after it in one
    # pass where nothing can come between them (decode.rom_fused_entries); the CPU variant
    # runs them one by one. Every pairing, with interrupts, EI delays, HALT, OAM DMA and
    # the OAM bug about, must leave the same machine.
    from gbx_gameboy.microrom import micro_rom

    for seed in range(4):  # a quarter of the loads each (a ROM holds that many pairs)
        path = tmp_path / f"fused{seed}.gb"
        program, extra = _fused_program(seed, _LOADS[seed::4], passes=20)
        path.write_bytes(micro_rom(program, extra=extra))
        states = {}
        for kernel in ("cpu", "cuda"):
            batch = GameBoyBatch(str(path), 1, "cpu", threads=1, kernel=kernel)
            batch.run_frames(60)
            regs = batch.regs(0)
            assert regs["halted"] and not regs["ime"], (kernel, regs)  # reached DONE
            ticks = batch.read_memory(0, 0xFF80) | batch.read_memory(0, 0xFF81) << 8
            assert ticks > 100, kernel  # the timer interrupted throughout
            assert batch.read_memory(0, 0xFF82) > 5, kernel  # and VBlank's
            states[kernel] = {k: v.clone() for k, v in batch.state_tensors().items()}
        for name, tensor in states["cpu"].items():
            assert torch.equal(tensor, states["cuda"][name]), (
                f"{name} differs between the variants (seed {seed})")


def test_cuda_variant_runs_a_load_and_the_next_instruction_from_one_entry(
        tmp_path: Path) -> None:
    # Proof that the CUDA variant reads the fused entries: with INC BC's entry changed to
    # add 5, the CUDA variant adds 5 and the CPU variant (one by one) adds 1; both count
    # the two instructions.
    from gbx_gameboy.decode import DESC_TABLE_BYTES, FUSE_ADD_SHIFT, PRE_ENTRY_WORDS
    from gbx_gameboy.microrom import micro_rom

    path = tmp_path / "inc.gb"
    # (a NOP between: LD BC,nn is a load too, which would take INC BC as its second)
    path.write_bytes(micro_rom("    ld bc, $1234\n    nop\n    inc bc\n    ld a, b\n    DONE"))
    data = path.read_bytes()
    inc_at = data.index(bytes([0x01, 0x34, 0x12, 0x00, 0x03])) + 4
    got = {}
    for kernel in ("cpu", "cuda"):
        batch = GameBoyBatch(str(path), 1, "cpu", threads=1, kernel=kernel)
        dec = wp.to_torch(batch.arrays.dec)
        row = DESC_TABLE_BYTES // 4 + (len(data) + 1 + inc_at) * PRE_ENTRY_WORDS
        word2 = int(dec[row + 2])
        assert (word2 >> FUSE_ADD_SHIFT) & 0xFFFF == 1
        dec[row + 2] = word2 + (4 << FUSE_ADD_SHIFT)
        batch.run_frames(2)
        regs = batch.regs(0)
        got[kernel] = (regs["b"] << 8) | regs["c"]
    assert got == {"cpu": 0x1235, "cuda": 0x1239}


@pytest.mark.skipif(not FLAPPY.is_file(), reason=f"{FLAPPY} not found (shared test ROMs)")
def test_cpu_variant_matches_on_flappyboy() -> None:
    _assert_variants_agree(str(FLAPPY), 33, boot=120)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.skipif(not FLAPPY.is_file(), reason=f"{FLAPPY} not found (shared test ROMs)")
@pytest.mark.parametrize(("gpu_kernel", "block"), [("cuda", 32), ("cuda", 1), ("cuda", 16),
                                                    ("cpu", 32), ("cpu", 1), ("cpu", 4)])
def test_cpu_variant_on_the_cpu_matches_either_variant_on_a_gpu(gpu_kernel: str,
                                                                 block: int) -> None:
    """cuda: the GPU's own variant; cpu: the CPU variant (inner loop, predecoded ROM,
    tile-row drawing) compiled for CUDA; each in warps of ``block`` Game Boys (70 envs:
    a last block that is not full, and a 32-env tile split over several blocks)."""
    host = _played(str(FLAPPY), "cpu", 70, 120)
    on_gpu = _played(str(FLAPPY), gpu_kernel, 70, 120, device="cuda", block_threads=block)
    for name, tensor in host.items():
        assert torch.equal(tensor, on_gpu[name]), f"{name} differs between CPU and CUDA"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.skipif(not FLAPPY.is_file(), reason=f"{FLAPPY} not found (shared test ROMs)")
@pytest.mark.parametrize(("gpu_kernel", "block", "n"), [("cpu", 1, 300), ("cpu", 4, 1002),
                                                         ("cuda", 16, 2070)])
def test_blocks_of_neighbouring_warps_run_each_env_as_blocks_of_one_warp(
        gpu_kernel: str, block: int, n: int) -> None:
    """Blocks of several warps of neighbouring envs (the default once the batch gives an SM
    more than one warp) run every env exactly as blocks of one warp do: batches whose last
    warp and last block are not full, on either variant."""
    sms = wp.get_device("cuda").sm_count
    one = _played(str(FLAPPY), gpu_kernel, n, 120, device="cuda", block_threads=block,
                  block_warps=1)
    default = launch_shape(n, block, sms)[1] // 32
    for block_warps in sorted({default, RESIDENT_WARPS_PER_SM, 3}):
        many = _played(str(FLAPPY), gpu_kernel, n, 120, device="cuda", block_threads=block,
                       block_warps=block_warps)
        for name, tensor in one.items():
            assert torch.equal(tensor, many[name]), f"{name} differs at {block_warps} warps"
    mem = one["mem"]
    assert not torch.equal(env_rows(mem, 0), env_rows(mem, n - 1)), "the envs did not diverge"


def test_auto_picks_the_devices_variant() -> None:
    batch = GameBoyBatch(str(DEFAULT_ROM), 1, "cpu")
    assert (batch.kernel, batch.block_threads) == ("cpu", 32)
    with pytest.raises(ValueError, match="kernel must be one of"):
        GameBoyBatch(str(DEFAULT_ROM), 1, "cpu", kernel="fast")
    if torch.cuda.is_available():
        sms = wp.get_device("cuda").sm_count
        for n in (1, 40 * sms * RESIDENT_WARPS_PER_SM):
            batch = GameBoyBatch(str(DEFAULT_ROM), n, "cuda")
            assert (batch.kernel, batch.block_threads) == launch_plan(n, sms)


def test_block_threads_are_checked() -> None:
    with pytest.raises(ValueError, match="block_threads must be one of 1, 2, 4, 8, 16, 32"):
        GameBoyBatch(str(DEFAULT_ROM), 1, "cpu", block_threads=3)
    with pytest.raises(ValueError, match=r"on the CPU device .* \(threads=\)"):
        GameBoyBatch(str(DEFAULT_ROM), 1, "cpu", block_threads=8)
    with pytest.raises(ValueError, match=r"block_warps sets a GPU launch's blocks"):
        GameBoyBatch(str(DEFAULT_ROM), 1, "cpu", block_warps=2)
    assert block_warps_problem(0, False) == "block_warps must be 1 to 8, got 0"
    assert block_warps_problem(9, False) == "block_warps must be 1 to 8, got 9"
    assert block_warps_problem(8, False) is None and block_warps_problem(None, True) is None


def test_launch_shape_gives_each_sm_its_warps_in_one_block() -> None:
    """A warp per 1 - 32 envs, its other lanes idle; as many warps per block as the batch
    gives each SM, up to the 8 resident (132 SMs: an H200)."""
    assert launch_shape(1, 1, 132) == (32, 32)
    assert launch_shape(64, 1, 132) == (64 * 32, 32)  # one warp on each of 64 SMs
    assert launch_shape(300, 1, 132) == (300 * 32, 96)  # 3 warps per SM
    assert launch_shape(1024, 1, 132) == (1024 * 32, 256)
    assert launch_shape(4096, 4, 132) == (1024 * 32, 256)
    assert launch_shape(1002, 4, 132) == (251 * 32, 64)  # a last warp of 2 envs
    assert launch_shape(16384, 16, 132) == (1024 * 32, 256)
    assert launch_shape(65536, 32, 132) == (65536, 256)  # more than resident: 8 per block
    assert launch_shape(1024, 1, 132, block_warps=1) == (1024 * 32, 32)
    assert launch_shape(64, 8, 0) == (256, 256)  # no SM count: one SM
    for n in range(1, 70000, 1231):
        kernel, block = launch_plan(n, 132)
        threads, per_block = launch_shape(n, block, 132)
        warps = threads // 32
        assert threads % 32 == 0 and warps * block >= n > (warps - 1) * block
        assert per_block % 32 == 0 and 1 <= per_block // 32 <= RESIDENT_WARPS_PER_SM
        # as many warps per SM as one-warp blocks would give it, at most the resident
        # ones; below that, one block per SM at most
        assert per_block // 32 == min(RESIDENT_WARPS_PER_SM, -(-warps // 132))
        blocks = -(-warps // (per_block // 32))
        assert blocks <= 132 or per_block // 32 == RESIDENT_WARPS_PER_SM


def test_launch_plan_fits_the_batch_in_the_resident_warps() -> None:
    """The smallest block that makes the whole batch resident at once, the CPU variant
    for a few Game Boys per warp and the CUDA variant for more (132 SMs: an H200)."""
    warps = 132 * RESIDENT_WARPS_PER_SM
    assert warps == 1056  # 255 registers: 8 warps per SM
    assert launch_plan(1, 132) == ("cpu", 1)
    assert launch_plan(1024, 132) == ("cpu", 1)
    assert launch_plan(warps, 132) == ("cpu", 1)
    assert launch_plan(warps + 1, 132) == ("cpu", 2)
    assert launch_plan(4096, 132) == ("cpu", 4)
    assert launch_plan(8192, 132) == ("cuda", 8)
    assert launch_plan(16384, 132) == ("cuda", 16)
    assert launch_plan(65536, 132) == ("cuda", 32)  # more than the GPU holds: full warps
    assert launch_plan(10**7, 132) == ("cuda", 32)
    assert launch_plan(64, 0) == launch_plan(64, 1) == ("cuda", 8)  # no SM count: one
    for n in range(1, 40000, 997):
        kernel, block = launch_plan(n, 132)
        assert block in BLOCK_THREADS
        assert (kernel == "cpu") == (block <= CPU_VARIANT_MAX_WARP_THREADS)
        assert block == 32 or block * warps >= n  # resident at once
        assert block == 1 or (block // 2) * warps < n  # and no larger than that needs


@wp.kernel(module="unique")
def _alu_pairs(ops: wp.array(dtype=wp.int32), fs: wp.array(dtype=wp.int32),
               out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    op = ops[i // (256 * 256 * 4)]
    f = fs[(i // (256 * 256)) % 4]
    a = (i // 256) % 256
    v = i % 256
    bit = (a ^ v) & 7
    out[i] = wp.where(alu(op, a, v, f, bit) == alu_host(op, a, v, f, bit), 0, 1)


def test_host_alu_equals_the_branch_free_alu_everywhere() -> None:
    """Every operation, every A and operand, four flag sets (each flag on and off)."""
    ops = list(range(OP_ADD, OP_CCF + 1))
    fs = [0x00, 0xF0, 0x50, 0xA0]
    n = len(ops) * 4 * 256 * 256
    out = wp.zeros(n, dtype=wp.int32, device="cpu")
    wp.launch(_alu_pairs, dim=n, device="cpu",
              inputs=[wp.array(ops, dtype=wp.int32, device="cpu"),
                      wp.array(fs, dtype=wp.int32, device="cpu"), out])
    assert int(out.numpy().sum()) == 0


@wp.kernel(module="unique")
def _lone_thread_forms(table: wp.array2d(dtype=wp.int32), vals: wp.array2d(dtype=wp.int32),
                       out: wp.array2d(dtype=wp.int32)):
    """Each helper of the CPU variant in its GPU form (selects) and its CPU form
    (branches), on descriptor ``i % 512`` and random registers, flags and operands;
    ``sel`` takes every value of a 3-bit selector."""
    i = wp.tid()
    d = i % 512
    w0 = table[d, 0]
    w2 = table[d, 2]
    r = vec8i()
    for k in range(8):
        r[k] = vals[i, k] & 0xFF
    r[6] = r[6] & 0xF0  # F
    sp = vals[i, 8] & 0xFFFF
    pc = vals[i, 9] & 0xFFFF
    # (a quarter near each end of the map, where a relative jump wraps)
    pc = wp.where(i % 4 == 0, 0xFFF0 | (pc & 0xF), wp.where(i % 4 == 1, pc & 0xF, pc))
    imm = vals[i, 10] & 0xFFFF
    f0 = r[6]
    hl = (r[4] << 8) | r[5]
    sel = (i // 512) % 8
    code = vals[i, 11] & 0xFF
    out[i, 0] = wp.where(jump_lane_selects(w0, f0, pc, imm, hl)
                         == jump_lane_branches(w0, f0, pc, imm, hl), 0, 1)
    out[i, 1] = wp.where(value16_selects(sel, r, sp, imm, hl)
                         == value16_branches(sel, r, sp, imm, hl), 0, 1)
    out[i, 2] = wp.where(bus_address(sel, r, sp, imm) == bus_address_branches(sel, r, sp, imm),
                         0, 1)
    out[i, 3] = wp.where(push_value_selects(w2, r, sp, imm, pc, f0)
                         == push_value_branches(w2, r, sp, imm, pc, f0), 0, 1)
    out[i, 4] = wp.where(push_target_selects(w0, pc, imm, code)
                         == push_target_branches(w0, pc, imm, code), 0, 1)


def test_lone_thread_helpers_select_as_they_branch() -> None:
    """The CPU variant's helpers keep one form per device (cpu.on_gpu): branches on a
    CPU, selects on a GPU. Both forms agree for every opcode's descriptor, every
    selector value and random registers, flags and operands."""
    table = decode_table().reshape(-1, WORDS).astype("int32")
    n = 512 * 8 * 16
    gen = torch.Generator().manual_seed(5)
    vals = torch.randint(0, 1 << 16, (n, 12), generator=gen, dtype=torch.int32)
    out = wp.zeros((n, 5), dtype=wp.int32, device="cpu")
    wp.launch(_lone_thread_forms, dim=n, device="cpu",
              inputs=[wp.array(table, dtype=wp.int32, device="cpu"),
                      wp.from_torch(vals), out])
    mismatches = out.numpy().sum(axis=0)
    assert mismatches.tolist() == [0, 0, 0, 0, 0], mismatches


def _source(kernel: object, target: str) -> str:
    from warp._src.context import ModuleBuilder

    module = kernel.module  # type: ignore[attr-defined]
    return str(ModuleBuilder(module, dict(module.options), target=target).codegen(target))


def test_cuda_variant_has_none_of_the_cpu_paths() -> None:
    cuda = _source(run_kernel, "cuda")
    host = _source(run_kernel_host, "cpu")
    assert "run_kernel" in cuda and "run_kernel_host" in host
    for name in ("alu_host", "bus_address_host", "value16_host"):
        assert name not in cuda, f"{name} reached the CUDA module"
        assert name in host, f"{name} missing from the CPU variant"


@pytest.mark.slow
@pytest.mark.skipif(any(os.environ.get(k) for k in BUILD_OPTIONS),
                    reason="a kernel build option is set in the environment")
def test_cuda_variant_ptx_is_the_recorded_one() -> None:
    """The CUDA variant's sm_90 PTX is the recorded one, in canonical form (see
    kernel_digest)."""
    from gbx_gameboy.kernel_digest import CUDA_PTX_SHA256, ptx_digest

    assert ptx_digest() == CUDA_PTX_SHA256, (
        "the CUDA run kernel changed; if intended, record `gbx gameboy kernel-digest`'s "
        "ptx_sha256 in gbx_gameboy/kernel_digest.py"
    )


# The timer interrupt's vector jumps to a handler named Timer, the entry to Main.
TIMER_VECTORS = """SECTION "timer", ROM0[$0050]
    jp Timer
SECTION "entry", ROM0[$0100]
    nop
    jp Main
"""
# The start of a test ROM's main code: the stack, and a timer interrupt every 256 cycles
# (TMA $F0, 262,144 Hz), enabled.
TIMER_MAIN = """SECTION "main", ROM0[$0150]
Main:
    ld sp, $FFFE
    ld a, $F0
    ldh [$06], a
    ld a, $05
    ldh [$07], a
    ld a, $04
    ldh [$FF], a
    ei
"""


def _runs_rom() -> bytes:
    """Delay loops of NOP and JR +0 runs with a timer interrupt every 256 cycles, and an
    OAM DMA started just before a long NOP run (what the CPU fetches from ROM during the
    DMA is a NOP either way: the sled's bytes or the zeros the DMA copies), so that events
    and the DMA window land inside runs."""
    from gbx_gameboy.asm import assemble

    def jrs(tag: str) -> str:
        return "\n".join(f".{tag}{i}:\n    jr .{tag}{i + 1}" for i in range(7)) + f"\n.{tag}7:"

    def nops(n: int) -> str:
        return "\n".join(["    nop"] * n)

    return assemble(f"""
SECTION "timer", ROM0[$0050]
    inc e
    reti
SECTION "entry", ROM0[$0100]
    nop
    jp Main
{TIMER_MAIN}.loop:
    ld b, $03
.delay:
{jrs("a")}
{nops(9)}
    dec b
    jr nz, .delay
    ld a, $C0
    ldh [$46], a
{nops(200)}
{jrs("b")}
    inc d
    jp .loop
""")


def test_runs_of_nops_and_jr0_step_like_single_instructions() -> None:
    """Runs (decode.QUICK_RUN) stop before events and at OAM DMA as the instructions one
    by one would, in both variants: launches of odd lengths end inside runs."""
    from gbx_gameboy.decode import QUICK_RUN, QUICK_SHIFT, rom_predecode

    rom = _runs_rom()
    assert (rom_predecode(rom) >> QUICK_SHIFT == QUICK_RUN).sum() > 200
    batches = _run_like_one_by_one(rom, (7, 13, 100, 1001, 4567, 30011, 70224, 3))
    regs = batches["cpu"].regs(0)
    # About 106,000 cycles: timer interrupts were taken and the loop went round.
    assert regs["e"] > 100 and regs["d"] >= 2, regs


def test_cuda_variant_draws_a_launchs_last_lines_after_it() -> None:
    """The CUDA variant leaves the drawn frame's lines that a launch's last catch-up
    reaches to draw_pending_kernel (the bundled game: all 144, at VBlank); the frame is
    the CPU variant's, which draws every line at once."""
    n = 4
    batches = {k: GameBoyBatch(str(DEFAULT_ROM), n, "cpu", threads=1, kernel=k)
               for k in ("cpu", "cuda")}
    for batch in batches.values():
        batch.run_frames(40)
        batch.step_frames(torch.full((n,), 0x80, dtype=torch.int32), 6, release_after=3)
    pend = batches["cuda"]._g.pend.numpy()
    assert (pend[:, 0] == 144).all() and (pend[:, 1] == 0).all(), pend
    # On the CPU device the CPU variant draws at once and keeps no line registers.
    assert (batches["cpu"]._g.pend.numpy()[:, 0] == 0).all()
    assert batches["cpu"]._g.lines.shape == (1, 1)
    host, cuda = (b.state_tensors()["fb"] for b in batches.values())
    assert len(torch.unique(host)) >= 3, "the compared frame is blank"
    assert torch.equal(host, cuda)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cpu_variant_on_a_gpu_draws_a_launchs_last_lines_after_it() -> None:
    """On a GPU the CPU variant leaves the drawn frame's lines that its catch-up reaches
    to draw_pending_kernel as the CUDA variant does (the bundled game: all 144 at the
    VBlank that ends a frames launch), and a cycles launch that goes on past that VBlank
    draws them before its next instruction (flush_draw); every state and frame is the
    CPU device's, where the variant draws each line at once."""
    n = 4
    host = GameBoyBatch(str(DEFAULT_ROM), n, "cpu", threads=1, kernel="cpu")
    gpu = GameBoyBatch(str(DEFAULT_ROM), n, "cuda", kernel="cpu", block_threads=1)

    def same_state() -> None:
        a, b = host.state_tensors(), gpu.state_tensors()
        assert len(torch.unique(a["fb"])) >= 3, "the compared frame is blank"
        for name, tensor in a.items():
            assert torch.equal(tensor.cpu(), b[name].cpu()), f"{name} differs"

    for batch in (host, gpu):
        batch.run_frames(40)
        batch.step_frames(torch.full((n,), 0x80, dtype=torch.int32, device=batch.device), 6,
                          release_after=3)
    pend = gpu._g.pend.numpy()
    assert (pend[:, 0] == 144).all() and (pend[:, 1] == 0).all(), pend
    same_state()
    for batch in (host, gpu):
        # From the VBlank the step ended at, past the next one: lines 0 - 143 drawn.
        batch.step_cycles(torch.zeros(n, dtype=torch.int32, device=batch.device), 80_000,
                          render=True)
    assert (gpu._g.pend.numpy()[:, 0] == 0).all()
    same_state()


MID_FRAME_BODY = """
    ld sp, $DFF0
.wait:
    ldh a, [$44]
    cp 144
    jr nz, .wait
    xor a
    ldh [$40], a
    ld hl, $8000
    ld b, 64
    ld a, $5A
.tiles:
    ld [hl+], a
    add a, 37
    dec b
    jr nz, .tiles
    ld hl, $9800
    ld d, 8
    ld b, 0
    xor a
.map:
    ld [hl+], a
    inc a
    and 3
    dec b
    jr nz, .map
    dec d
    jr nz, .map
    ld hl, $FE00
    ld b, 160
    ld a, 16
.oam:
    ld [hl+], a
    add a, 29
    dec b
    jr nz, .oam
{dma_source}    ld hl, $FF80
    ld a, $3E
    ld [hl+], a
    ld a, $C1
    ld [hl+], a
    ld a, $E0
    ld [hl+], a
    ld a, $46
    ld [hl+], a
    ld a, $3E
    ld [hl+], a
    ld a, $28
    ld [hl+], a
    ld a, $3D
    ld [hl+], a
    ld a, $20
    ld [hl+], a
    ld a, $FD
    ld [hl+], a
    ld a, $C9
    ld [hl], a
    xor a
    ld [$C000], a
    ld [$C001], a
    ld [$C003], a
    ld a, $E4
    ldh [$47], a
    ld a, $D2
    ldh [$48], a
    ld a, $1B
    ldh [$49], a
    ld a, 100
    ldh [$4A], a
    ld a, 87
    ldh [$4B], a
    ld a, $08
    ldh [$41], a
    ld a, $03
    ldh [$FF], a
    xor a
    ldh [$0F], a
    ld a, $F3
    ldh [$40], a
    ei
.spin:
    halt
    jr .spin
"""
MID_FRAME_HANDLERS = """
SECTION "vbl", ROM0[$0040]
    jp OnVBlank
SECTION "stat", ROM0[$0048]
    jp OnStat
SECTION "h", ROM0[$1000]
OnVBlank:
    push af
    push bc
    ld a, [$C000]
    inc a
    ld [$C000], a
    and 4
    jp z, .lines
    xor a
    jr .source
.lines:
    ld a, $08
.source:
    ldh [$41], a
    ld a, $20
    ldh [$00], a
    ldh a, [$00]
    ldh a, [$00]
    cpl
    and $0F
    ld b, a
    ld a, $10
    ldh [$00], a
    ldh a, [$00]
    ldh a, [$00]
    cpl
    and $0F
    swap a
    or b
    ld [$C001], a
    ld a, $30
    ldh [$00], a
    ld a, [$C001]
    ldh [$42], a
    ld a, [$C000]
    and 1
    add a, a
    add a, a
    add a, 86
    ld [$C104], a
    ld a, [$C000]
    and 1
    jp z, .hide
    ld a, 66
.hide:
    ld [$FE00], a
    ld a, [$C001]
    and 63
    add a, 40
    ld [$FE01], a
    pop bc
    pop af
    reti
OnStat:
    ld a, [$C003]
    or a
    jp nz, .spback
    push af
    push bc
    push hl
    ldh a, [$44]
    ld c, a
    ld a, [$C001]
    add a, c
    ldh [$43], a
    ld a, c
    rlca
    rlca
    xor $E4
    ldh [$47], a
    ld a, c
    cp 40
    jp z, .vram
    cp 80
    jp z, .dma
    cp 100
    jp z, .bug
    cp 102
    jp z, .rdbug
    cp 105
    jp z, .rdidu
    cp 107
    jp z, .spbug
    cp 110
    jp z, .winoff
    cp 115
    jp z, .winon
    cp 120
    jp z, .lcdoff
    jp .done
.vram:
    ld hl, $8010
    ld a, [$C000]
    ld [hl+], a
    ld [hl+], a
    cpl
    ld [hl+], a
    ld [hl], a
    jp .done
.dma:
    call $FF80
    jp .done
.bug:
    ld hl, $FE20
    ld b, 40
.inc:
    inc hl
    dec b
    jr nz, .inc
    jp .done
.rdbug:
    ld hl, $FE30
    ld b, 40
.rd:
    ld a, [hl]
    dec b
    jr nz, .rd
    jp .done
.rdidu:
    ld hl, $FE50
.mode2:
    ldh a, [$41]
    and 3
    cp 2
    jr nz, .mode2
    nop
    nop
    nop
    ld a, [hl+]
    jp .done
.spbug:
    ld [$C010], sp
    ld a, 1
    ld [$C003], a
    ld a, $20
    ldh [$41], a
    xor a
    ldh [$0F], a
    ld sp, $FE90
    ei
.spin2:
    jr .spin2
.spback:
    xor a
    ld [$C003], a
    ld a, $08
    ldh [$41], a
    ld hl, $C010
    ld a, [hl+]
    ld h, [hl]
    ld l, a
    ld sp, hl
    jp .done
.winoff:
    ld a, $D3
    ldh [$40], a
    jp .done
.winon:
    ld a, $F3
    ldh [$40], a
    jp .done
.lcdoff:
    ld a, [$C000]
    and 3
    cp 1
    jr nz, .done
    inc a
    ld [$C000], a
    xor a
    ldh [$41], a
    ldh [$40], a
    ld a, $F3
    ldh [$40], a
.done:
    pop hl
    pop bc
    pop af
    reti
"""

def _mid_frame_rom() -> bytes:
    """Frames that change what their lines show while they are drawn. A STAT interrupt at
    every HBlank sets SCX and BGP from LY; at line 40 it rewrites a tile's bytes (VRAM), at
    80 it runs an OAM DMA (from HRAM) that moves object 1 over lines 70 - 81 by the frame's
    parity and puts 38 objects over lines 98 - 110, and then it hits the OAM corruption
    bug: at 100 by stepping HL through OAM across the next lines' OAM scans (the
    increment/decrement unit), at 102 by reading OAM across them, at 105 by one LD A,
    [HL+] from OAM once the next line's scan has begun, and at 107 by taking the next
    line's mode-2 STAT interrupt with SP in OAM (the dispatch's push; the handler puts SP
    back). At 110 and 115 it turns the window off and on, and at 120 of one frame in
    eight it turns the STAT interrupt and the LCD off, and the LCD on again. Every other
    four frames run without the STAT interrupt (their lines can be stepped over in one
    go). The VBlank handler reads the buttons into SCY, so envs given different buttons
    draw different frames, and shows or hides object 0 over lines 50 - 57 by the frame's
    parity (an OAM write, seen by the lines a cycles launch has drawn before it)."""
    from gbx_gameboy.microrom import micro_rom

    table = [0, 0, 0, 0, 86, 60, 1, 0]
    for i in range(2, 40):
        attr = ((i % 4) << 5) | ((i % 3 == 0) << 4) | ((i % 5 == 0) << 7)
        table += [114 + i % 6, 8 + (i * 11) % 160, i & 3, attr]
    dma_source = "    ld hl, $C100\n" + "".join(
        f"    ld a, {v}\n    ld [hl+], a\n" for v in table)
    return micro_rom(MID_FRAME_BODY.replace("{dma_source}", dma_source),
                     extra=MID_FRAME_HANDLERS)


def _mid_frame_steps(device: str, kernel: str, block_threads: int | None = None
                     ) -> list[dict[str, torch.Tensor]]:
    """Every state of 8 envs of the mid-frame ROM after each of 12 steps of 3 frames
    (random buttons per env), and after cycle launches of odd lengths that end inside
    drawn frames."""
    n = 8
    batch = GameBoyBatch(_mid_frame_rom(), n, device, threads=1, kernel=kernel,
                         block_threads=block_threads)
    batch.run_frames(3)
    gen = torch.Generator().manual_seed(3)
    states = []
    for _ in range(12):
        buttons = torch.randint(0, 256, (n,), generator=gen, dtype=torch.int32)
        batch.step_frames(buttons.to(device), 3, release_after=2)
        states.append({k: v.cpu().clone() for k, v in batch.state_tensors().items()})
    for cycles in (30011, 70224, 101_117, 4567):
        buttons = torch.randint(0, 256, (n,), generator=gen, dtype=torch.int32)
        batch.step_cycles(buttons.to(device), cycles, render=True)
        states.append({k: v.cpu().clone() for k, v in batch.state_tensors().items()})
    return states


def test_lines_drawn_later_show_what_they_showed_when_due() -> None:
    """The CUDA variant defers drawing (on the CPU device too), the CPU variant draws each
    line as it leaves mode 3: with registers, VRAM and OAM changed while the frame is
    drawn, both give the same frames and states bit for bit."""
    at_once = _mid_frame_steps("cpu", "cpu")
    later = _mid_frame_steps("cpu", "cuda")
    shown = [s["fb"] for s in at_once[:12]]
    # The steps drew frames of every kind: blank (the LCD turned off), whole (the
    # background's rows repeat every 8 lines above the objects) and split by the STAT
    # interrupt (SCX and BGP change on every line).
    def kind(fb: torch.Tensor) -> str:
        rows = len({bytes(row.numpy()) for row in fb[:40]})
        return "blank" if not fb.any() else "split" if rows == 40 else "whole"

    kinds = {kind(fb[0]) for fb in shown}
    assert kinds == {"blank", "whole", "split"}, kinds
    assert any(not torch.equal(fb[0], fb[e]) for fb in shown for e in range(1, 8)), \
        "the envs drew the same frames"
    for step, (a, b) in enumerate(zip(at_once, later, strict=True)):
        for name, tensor in a.items():
            assert torch.equal(tensor, b[name]), f"{name} differs after step {step}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize(("gpu_kernel", "block"), [("cpu", 1), ("cpu", 4), ("cuda", 32)])
def test_lines_drawn_later_on_a_gpu_match_the_cpu_device(gpu_kernel: str, block: int) -> None:
    """The same on a GPU, where both variants defer drawing."""
    at_once = _mid_frame_steps("cpu", "cpu")
    on_gpu = _mid_frame_steps("cuda", gpu_kernel, block)
    for step, (a, b) in enumerate(zip(at_once, on_gpu, strict=True)):
        for name, tensor in a.items():
            assert torch.equal(tensor, b[name]), f"{name} differs after step {step}"


def _countdown_rom() -> bytes:
    """Countdown loops (decode.RUN_LOOP) of every form the predecoder marks, with a timer
    interrupt every 256 cycles landing inside them: DEC of each register, JR NZ and JP NZ,
    no padding or NOPs and JR +0s mixed, start counts 0 (256 passes), 1 (no pass back) and
    17 (borrows out of the low nibble), a JP NZ loop in a switchable bank, and bank 0's
    JP NZ loop run from its alias in 0x4000-0x7FFF (MBC5 maps bank 0 there), where the jump
    leaves for the low half. The handler counts the interrupts that return to
    0x4000-0x7FFF: one taken in that loop returns there only before its first jump."""
    from gbx_gameboy.asm import assemble

    return assemble(f"""
HEADER_CART_TYPE $19
{TIMER_VECTORS}SECTION "handler", ROM0[$0300]
Timer:
    push af
    push hl
    ldh a, [$80]
    inc a
    ldh [$80], a
    ld hl, sp+5
    ld a, [hl]
    cp $40
    jr c, .low
    ld hl, $C002
    inc [hl]
.low:
    pop hl
    pop af
    reti
SECTION "aliased", ROM0[$0400]
Aliased:
    ld b, 30
.loop:
    nop
    dec b
    jp nz, .loop
    ret
{TIMER_MAIN}.round:
    ld c, 0
.c:
    dec c
    jr nz, .c
    ld a, 17
.a:
    nop
    nop
    dec a
    jp nz, .a
    ld h, 1
.h:
    jr .h1
.h1:
    dec h
    jr nz, .h
    ld l, $20
.l:
    jr .l1
.l1:
    nop
    jr .l2
.l2:
    dec l
    jr nz, .l
    ld d, 200
.d:
    nop
    dec d
    jr nz, .d
    ld a, 1
    ld [$2000], a
    call Far
    xor a
    ld [$2000], a
    call Aliased + $4000
    ld a, 1
    ld [$2000], a
    push af
    pop hl
    ld a, l
    ld [$C000], a
    ld hl, $C001
    inc [hl]
    jp .round
SECTION "far", ROMX[$4000], BANK[1]
Far:
    ld e, 40
.e:
    nop
    dec e
    jp nz, .e
    ret
""")


def _one_by_one(batch: GameBoyBatch) -> GameBoyBatch:
    """``batch`` with the marks of runs and loops (decode.QUICK_RUN, RUN_LOOP) cleared from
    both variants' predecoded ROM, each such entry given its instruction's descriptor word
    0, and without the switch of loops in HRAM after the CPU variant's entries (both
    variants read it at run time): it runs every instruction in a pass of its own."""
    from gbx_gameboy.decode import (
        DESC_TABLE_BYTES,
        PRE_ENTRY_WORDS,
        QUICK_RUN,
        QUICK_SHIFT,
        RUN_LOOP,
        decode_table,
    )

    words = decode_table().reshape(-1, 4)[:, 0] & ((1 << QUICK_SHIFT) - 1)
    dec = batch._g.dec.numpy()
    entries = dec[DESC_TABLE_BYTES // 4:].reshape(-1, PRE_ENTRY_WORDS)
    marked = entries[:, 0] >> QUICK_SHIFT == QUICK_RUN
    assert marked.any() and entries[len(batch.cart.data), 0] == RUN_LOOP
    entries[marked, 0] = words[(entries[marked, 3] >> 16) & 0xFF]
    entries[len(batch.cart.data), 0] = 0  # no countdown loops in HRAM either
    batch._g.dec.assign(dec)
    return batch


def _run_like_one_by_one(rom: bytes, launches: tuple[int, ...]) -> dict[str, GameBoyBatch]:
    """Two envs of ``rom`` in both variants and in a batch whose loops run pass by pass
    (``_one_by_one``), stepped by launches of the given cycle counts; after
    each, both variants' state equals the pass-by-pass batch's."""
    batches = {k: GameBoyBatch(rom, 2, "cpu", threads=1, kernel=k) for k in ("cpu", "cuda")}
    batches["one by one"] = _one_by_one(
        GameBoyBatch(rom, 2, "cpu", threads=1, kernel="cuda"))
    none = torch.zeros(2, dtype=torch.int32)
    for cycles in launches:
        for batch in batches.values():
            batch.step_cycles(none, cycles)
        want = batches["one by one"].state_tensors()
        for kernel in ("cpu", "cuda"):
            got = batches[kernel].state_tensors()
            for name, tensor in want.items():
                assert torch.equal(got[name], tensor), \
                    f"{kernel} variant: {name} differs after {cycles} cycles"
    return batches


def test_countdown_loops_run_like_their_instructions_one_by_one() -> None:
    """Countdown loops (decode.RUN_LOOP) stop before events and where a JP NZ leaves the
    half of the map it runs in, and leave with their last pass (entered by a jump or from
    the instruction before them), as their instructions one by one would, in both
    variants: launches of odd lengths end inside loops."""
    from gbx_gameboy.decode import (
        QUICK_RUN,
        QUICK_SHIFT,
        RUN_LOOP,
        rom_predecode,
        rom_predecode_entries,
    )

    # the CUDA variant runs them unless built without them (below, in a process of its own)
    assert CUDA_LOOPS == (os.environ.get("GBX_GAMEBOY_CUDA_LOOPS") != "0")
    rom = _countdown_rom()
    pre = rom_predecode(rom)
    assert ((pre >> QUICK_SHIFT == QUICK_RUN) & (pre & RUN_LOOP != 0)).sum() == 7
    # most loops are entered from the instruction before them (decode.INTO_LOOP)
    assert (rom_predecode_entries(rom)[:, 2] < 0).sum() >= 5
    batches = _run_like_one_by_one(rom, (7, 13, 100, 1001, 4567, 30011, 70224, 3, 140448))
    # About 250,000 cycles: timer interrupts were taken (about 980, counted in a byte; they
    # take over half of the time), some of them in 0x4000-0x7FFF, and rounds went through.
    assert batches["cpu"].read_memory(0, 0xFF80) != 0
    assert batches["cpu"].read_memory(0, 0xC001) >= 5
    assert batches["cpu"].read_memory(0, 0xC002) != 0


def _fill_loops_rom() -> bytes:
    """Fill loops (decode.LOOP_FILL) up and down, with padding, JR NZ and JP NZ, in WRAM,
    across its echo, from WRAM into OAM and from VRAM (where they run pass by pass), and
    `DEC r; JR NZ, -3` copied to HRAM (countdown.hram_loop_word): the usual OAM DMA
    routine (start the DMA, count A down while it runs) and two without DMA, one from 0
    (256 passes); a timer interrupt every 256 cycles lands inside them."""
    from gbx_gameboy.asm import assemble

    return assemble(f"""
{TIMER_VECTORS}SECTION "handler", ROM0[$0300]
Timer:
    push af
    ldh a, [$80]
    inc a
    ldh [$80], a
    pop af
    reti
SECTION "hram_code", ROM0[$0400]
HramCode:
    ldh [$46], a
    ld a, 40
    dec a
    jr nz, @-1
    ret
    dec b
    jr nz, @-1
    ret
    dec a
    jr nz, @-1
    ret
{TIMER_MAIN}    ld hl, HramCode
    ld de, $FF90
    ld c, 16
.copy:
    ld a, [hl+]
    ld [de], a
    inc de
    dec c
    jr nz, .copy
    ld a, $80
    ldh [$40], a
.round:
    ldh a, [$81]
    inc a
    ldh [$81], a
    ld hl, $C100
    ld b, 100
.f:
    ld [hl+], a
    dec b
    jr nz, .f
    ld hl, $C3FF
    ld c, 0
.g:
    ld [hl-], a
    nop
    jr .g1
.g1:
    dec c
    jp nz, .g
    ld hl, $DFF0
    ld d, 40
.e:
    ld [hl+], a
    dec d
    jr nz, .e
    ld hl, $FDF8
    ld e, 16
.o:
    ld [hl+], a
    dec e
    jr nz, .o
    ld hl, $9F00
    ld b, 64
.v:
    ld [hl+], a
    dec b
    jr nz, .v
    ld a, $C1
    di  ; an interrupt's handler in ROM could not be read during the DMA
    call $FF90
    ei
    xor a
    call $FF9C
    ld b, 77
    call $FF98
    jp .round
""")


def test_fill_and_hram_loops_run_like_their_instructions_one_by_one() -> None:
    """Fill loops (decode.LOOP_FILL) and countdown loops in HRAM stop before events and
    where a store would leave WRAM, and leave with their last pass, as their
    instructions one by one would, in both variants: launches of odd lengths end inside
    loops."""
    from gbx_gameboy.decode import LOOP_FILL, QUICK_RUN, QUICK_SHIFT, RUN_LOOP, rom_predecode

    rom = _fill_loops_rom()
    pre = rom_predecode(rom)
    loops = (pre >> QUICK_SHIFT == QUICK_RUN) & (pre & RUN_LOOP != 0)
    assert (loops & (pre & LOOP_FILL != 0)).sum() == 5
    batch = _run_like_one_by_one(
        rom, (7, 13, 100, 1001, 4567, 30011, 70224, 3, 140448, 99991))["cpu"]
    rounds = batch.read_memory(0, 0xFF81)
    assert rounds >= 5 and batch.read_memory(0, 0xFF80) != 0  # rounds, timer interrupts
    # the fills store the round's number: up, down and on through the echo of C000
    assert {batch.read_memory(0, a) for a in (0xC100, 0xC163, 0xC300, 0xC3FF, 0xDFF0,
                                              0xC007)} <= {rounds, rounds - 1}
    assert batch.read_memory(0, 0xC164) == 0 and batch.read_memory(0, 0xC2FF) == 0


@pytest.mark.skipif(not FLAPPY.is_file(), reason=f"{FLAPPY} not found (shared test ROMs)")
def test_countdown_loops_change_nothing_on_flappyboy() -> None:
    """flappyboy's delay routine is a countdown loop inside a 16-bit one: 33 diverged envs
    end in the state their loops run pass by pass give, in both variants."""
    rom = FLAPPY.read_bytes()
    n, gen = 33, torch.Generator().manual_seed(5)
    batches = {k: GameBoyBatch(rom, n, "cpu", threads=1, kernel=k) for k in ("cpu", "cuda")}
    batches["one by one"] = _one_by_one(
        GameBoyBatch(rom, n, "cpu", threads=1, kernel="cuda"))
    for batch in batches.values():
        batch.run_frames(120)
    for step in range(6):
        buttons = torch.full((n,), 0x80, dtype=torch.int32) if step == 0 else torch.randint(
            0, 256, (n,), generator=gen, dtype=torch.int32)
        for batch in batches.values():
            batch.step_frames(buttons, 6, release_after=3)
    want = batches["one by one"].state_tensors()
    for kernel in ("cpu", "cuda"):
        got = batches[kernel].state_tensors()
        for name, tensor in want.items():
            assert torch.equal(got[name], tensor), f"{kernel} variant: {name} differs"


@pytest.mark.slow  # builds the CUDA variant without its loops in a process of its own
def test_cuda_variant_built_without_loops_runs_them_like_one_by_one() -> None:
    """``GBX_GAMEBOY_CUDA_LOOPS=0`` (cpu.CUDA_LOOPS): the loop tests above, with the CUDA
    variant built to run its loops pass by pass."""
    import subprocess
    import sys

    env = {**os.environ, "GBX_GAMEBOY_CUDA_LOOPS": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
         "-k", "countdown_loops_run or countdown_loops_change or fill_and_hram", __file__],
        env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{3 if FLAPPY.is_file() else 2} passed" in done.stdout
    assert " failed" not in done.stdout
