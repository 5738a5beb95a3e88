"""Per-env state layout of the batched Game Boy, shared by every kernel.

All per-env state is stored in *tiles of 32 envs* (one warp): an array with ``R`` rows
per env is shaped ``(tiles, R, TILE)``, and env ``e`` owns column ``e % TILE`` of tile
``e // TILE``. Two things follow:

* when the threads of a warp touch the same address (the common case: the same game
  reads the same HRAM variable or IO register), the 32 envs' bytes are adjacent and
  the access is one memory transaction;
* the distance between two rows of one env is the compile-time constant ``TILE``
  (times the element size), so a kernel keeps one base address per env and per array
  and reaches every fixed row (an IO register, a state field) with a constant offset
  in the load instruction. With the env count as the row stride (``(R, num_envs)``),
  every fixed row was a separately computed 64-bit address, and the run kernel spent
  its registers holding them (see docs/emulator-history.md, "Third round").

The batch allocates ``ceil(num_envs / TILE)`` tiles; the columns past ``num_envs`` in
the last tile are never run.

``mem`` holds every small per-env region in one ``uint8`` array:

==========  =============  ==========================
offset      size           Game Boy address range
==========  =============  ==========================
VRAM_OFF    0x2000         0x8000-0x9FFF
WRAM_OFF    0x2000         0xC000-0xDFFF (echo E000-FDFF)
OAM_OFF     0x00A0         0xFE00-0xFE9F
IO_OFF      0x0080         0xFF00-0xFF7F
HRAM_OFF    0x0080         0xFF80-0xFFFF (0xFFFF is IE)
==========  =============  ==========================

Cartridge RAM lives in its own ``uint8`` array ``cram`` shaped
``(tiles, max(cart_ram_bytes, 1), TILE)``, sized from the ROM header.
The ROM is one read-only ``uint8`` array shared by all envs.
The framebuffer is ``fb`` shaped ``(num_envs, 144, 160)``, ``uint8`` shade
indices 0..3 after the palette (BGP/OBP0/OBP1) mapping.
"""

from __future__ import annotations

VRAM_OFF = 0x0000
WRAM_OFF = 0x2000
OAM_OFF = 0x4000
IO_OFF = 0x40A0
HRAM_OFF = 0x4120  # 0xFF80..0xFFFF; IE (0xFFFF) is the last byte
MEM_BYTES = 0x41A0

TILE = 32  # envs per tile (see above)
TILE_SHIFT = 5  # log2(TILE)
MEM_TILE_BYTES = MEM_BYTES * TILE

SCREEN_H = 144
SCREEN_W = 160

# IO register offsets inside the IO block (address - 0xFF00)
P1, SB, SC, DIV, TIMA, TMA, TAC, IF = 0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x07, 0x0F
LCDC, STAT, SCY, SCX, LY, LYC, DMA, BGP, OBP0, OBP1, WY, WX = (
    0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4A, 0x4B,
)
NR52 = 0x26
BOOT_OFF_REG = 0x50  # FF50: writing non-zero unmaps the boot ROM
IE_HRAM_INDEX = 0x7F  # IE (0xFFFF) inside the HRAM block

# ---------------------------------------------------------------------------
# Per-env scalar state: ``st`` is an ``int32`` array shaped ``(tiles, ST_COUNT, TILE)``.
# CPU registers first, in the order the kernel keeps them in a local vector
# (B, C, D, E, H, L, F, A: the SM83 operand encoding r[z] with (HL) at 6 replaced by F).
R_B, R_C, R_D, R_E, R_H, R_L, R_F, R_A = 0, 1, 2, 3, 4, 5, 6, 7
R_SP = 8
R_PC = 9
S_IME = 10  # interrupt master enable
S_HALTED = 11  # 0 running, 1 HALT, 2 STOP
S_EI_DELAY = 12  # EI takes effect after the next instruction
S_LOCKED = 13  # fault code (FAULT_*), 0 while the env runs; a locked env no longer runs
S_HALT_BUG = 14  # next opcode fetch does not increment PC
S_BANK0 = 15  # effective ROM bank mapped at 0000-3FFF
S_BANKX = 16  # effective ROM bank mapped at 4000-7FFF
S_RAMOFF = 17  # byte offset of the mapped cart RAM bank, -1 when RAM is disabled
S_MBC_R1 = 18  # raw MBC registers (meaning depends on the MBC, see memory.py)
S_MBC_R2 = 19
S_MBC_MODE = 20
S_RAMG = 21
S_DIV_OFF = 22  # 16-bit divider = (t + S_DIV_OFF) & 0xFFFF
S_TIMA_PEND = 23  # 1 while TIMA overflowed and waits for its TMA reload
S_PPU_MODE = 24
S_STAT_LINE = 25  # level of the STAT interrupt line (rising edge raises IF bit 1)
S_WIN_LINE = 26  # window line counter for the renderer
S_MODE3_LEN = 27
S_BUTTONS = 28  # pressed-button bitmask, bit0=RIGHT .. bit7=START
S_SER_LEN = 29  # serial bytes captured so far (ring buffer write position)
S_LFRAMES = 30  # frames completed in the current launch
S_RTC_SEL = 31  # MBC3: 0x08..0x0C when an RTC register is mapped at A000, else 0
S_RTC_LATCH = 32  # MBC3: last value written to 6000-7FFF
S_RTC_S, S_RTC_M, S_RTC_H, S_RTC_DL, S_RTC_DH = 33, 34, 35, 36, 37  # latched RTC
# Event times, int32 cycles relative to the start of the current launch (rebased on exit).
T_TSYNC = 38  # timer computed up to this cycle
T_RELOAD = 39  # cycle of the pending TIMA reload
T_TIMER_NEXT = 40  # next TIMA reload (interrupt) cycle
T_PPU_NEXT = 41  # next PPU mode/line transition
T_SERIAL_END = 42  # serial transfer completion
T_DMA_END = 43  # OAM DMA busy until this cycle
T_DMA_START = 44
S_PPU_PHASE = 45  # position inside the scanline (see ppu_timing.py)
T_LINE_AT = 46  # cycle at which LY last changed (or the virtual line start after LCD on)
S_PPU_FLAGS = 47  # PPU flags, the bits below
ST_COUNT = 48
ST_TILE_BYTES = ST_COUNT * TILE * 4
# Bits of S_PPU_FLAGS.
PPU_FIRST_LINE = 1  # first line after LCD on: no OAM scan (no mode 2, OAM stays accessible)
PPU_BLANK_FRAME = 2  # first frame after LCD on: drawn, but the screen stays blank
PPU_VBLANK_PENDING = 4  # line 144: the VBlank request was already pending as the line began
PPU_LY153_GAP = 8  # line 153, the M-cycle after LY turned 0: LY=LYC matches nothing

NEVER = 0x3FFFFFFF  # "no event" time; never rebased

# Fault codes in S_LOCKED.
FAULT_ILLEGAL_OPCODE = 1  # the CPU fetched one of the 11 opcodes the SM83 does not have
FAULT_BUDGET = 2  # a frames launch used up its cycle budget (cpu.BUDGET_CYCLES_PER_FRAME)

# ``tm`` is an ``int64`` array shaped ``(tiles, TM_COUNT, TILE)``: long-running counters.
TM_CLOCK = 0  # T-cycles since power-on
TM_FRAMES = 1  # frames since power-on (VBlank entries, or 70224-cycle periods with LCD off)
TM_INSTRS = 2  # instructions executed
TM_RTC_OFF = 3  # MBC3 RTC: seconds*4194304 offset added to TM_CLOCK
TM_COUNT = 4
TM_TILE_BYTES = TM_COUNT * TILE * 8

# ``apu`` is an ``int32`` array shaped ``(tiles, APU_COUNT, TILE)``: the APU's state beyond
# its registers (see apu.py). The registers and NR52's channel-on bits live in ``mem``.
A_SYNC = 0  # divider 8192-cycle blocks the frame sequencer is caught up to; -1: not yet
A_FS = 1  # frame-sequencer step that the next DIV-APU tick runs (0..7)
A_LEN = 2  # length counters of channels 1..4 at rows A_LEN + 0..3
A_SW_EN = 6  # channel 1 sweep enabled (set on trigger when period or shift is non-zero)
A_SW_FREQ = 7  # sweep shadow frequency
A_SW_TIMER = 8  # sweep timer (frame-sequencer sweep clocks until the next calculation)
A_SW_NEG = 9  # 1 when a calculation since the trigger used negate mode
A_W_POS = 10  # wave channel: sample index (0..31) of its last wave RAM read
A_W_NEXT = 11  # ... absolute cycle of its next read (int64 in rows 11, 12: low, high)
A_W_LAST = 13  # ... absolute cycle of its last read (rows 13, 14)
APU_COUNT = 16
APU_TILE_BYTES = APU_COUNT * TILE * 4


def tiles_for(num_envs: int) -> int:
    """Tiles that hold ``num_envs`` envs."""
    return (num_envs + TILE - 1) // TILE

CYCLES_PER_FRAME = 70224
CYCLES_PER_LINE = 456
CPU_HZ = 4194304

# Button bits of the per-env mask (S_BUTTONS and step_frames' argument).
BTN_RIGHT, BTN_LEFT, BTN_UP, BTN_DOWN = 0x01, 0x02, 0x04, 0x08
BTN_A, BTN_B, BTN_SELECT, BTN_START = 0x10, 0x20, 0x40, 0x80
