"""PyBoy 2.x savestates (format version 29, DMG): read them into a batch env, write them back.

A PyBoy ``.state`` file is the concatenation of its components' fields in a
fixed order, integers little-endian (see docs/savestates.md for the table).
:func:`parse` splits a file into named fields, :func:`encode` joins them
again (``encode(parse(b)) == b``), so a state can be edited field by field.

* :func:`to_gbx` maps a parsed PyBoy state onto gbx's per-env arrays
  (CPU, memory, IO, MBC, timer and PPU position);
* :func:`from_gbx` writes a gbx env into a parsed PyBoy state used as a
  template (normally one PyBoy saved for the same ROM): fields gbx does not
  model -- the APU, PyBoy's rendered screen, the SGB block -- keep the
  template's values.

The sound block has a size that depends on PyBoy's sample rate; it is kept as
one opaque byte string whose length follows from the total file size.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from gbx_gameboy import layout as L
from gbx_gameboy.cartridge import MBC_1, MBC_2, MBC_3, MBC_5, Cartridge
from gbx_gameboy.savestate import SaveStateError
from gbx_gameboy.snapshot import EnvState, capture, check_compatible, write_env
from gbx_gameboy.state_bounds import ppu_phase, sanitize, update_banks

PYBOY_STATE_VERSION = 29
# The version of what this module writes for a given emulator snapshot: bump it when
# save_pyboy_state's output changes (or the emulator's snapshot of a start changes), so
# caches of converted states (gbx-env-pyboy's start states) are rebuilt.
CONVERSION_VERSION = 2
ROWS, COLS = 144, 160
_PYBOY_RAM_BANKS = {0: 1, 1: 1, 2: 1, 3: 4, 4: 16, 5: 8}
_RUMBLE_TYPES = (0x1C, 0x1D, 0x1E)
_RTC_TYPES = (0x0F, 0x10)
_RTC_BYTES = 33
_SGB_BYTES = 7 + 4 + 0x2000 + 0x800 + 0x80
_STAT_TRANSITION_NONE, _STAT_TRANSITION_ADVANCE_LY = 0, 1

Field = tuple[str, Any]  # (name, "B" | "H" | "Q" | byte count)

_HEAD: list[Field] = [
    ("version", "B"), ("bootrom_enabled", "B"), ("key0", "B"), ("key1", "B"),
    ("double_speed", "B"), ("cgb", "B"),
    # CPU
    ("A", "B"), ("F", "B"), ("B", "B"), ("C", "B"), ("D", "B"), ("E", "B"),
    ("HL", "H"), ("SP", "H"), ("PC", "H"), ("ime", "B"), ("ie_delay", "B"), ("halted", "B"),
    ("stopped", "B"), ("IE", "B"), ("intr_queued", "B"), ("IF", "B"), ("cpu_cycles", "Q"),
    # OAM DMA
    ("dma_active", "B"), ("dma_reading", "B"), ("dma_source", "B"), ("dma_index", "B"),
    ("dma_start_cycle", "Q"),
    # LCD
    ("vram", 0x2000), ("oam", 0xA0), ("LCDC", "B"), ("BGP", "B"), ("OBP0", "B"), ("OBP1", "B"),
    ("STAT", "B"), ("LY", "B"), ("LYC", "B"), ("SCY", "B"), ("SCX", "B"), ("WY", "B"), ("WX", "B"),
    ("obj_priority_mode", "B"), ("scanline_params", ROWS * 5), ("lcd_cgb", "B"),
    ("lcd_downgraded", "B"), ("lcd_speed_shift", "B"), ("frame_done", "B"), ("first_frame", "B"),
    ("lcd_reset", "B"), ("lcd_last_cycles", "Q"), ("lcd_clock", "Q"), ("lcd_clock_target", "Q"),
    ("next_stat_mode", "B"), ("stat_transition", "B"),
]
_RENDERER: list[Field] = [("screen", ROWS * COLS * 5), ("wy_activated", "B")]
_RAM_TIMER: list[Field] = [
    ("wram", 0x2000), ("unusable", 0x60), ("io_ports", 0x4C), ("hram", 0x7F), ("wram_select", "B"),
    ("DIV", "B"), ("TIMA", "B"), ("DIV_counter", "H"), ("TIMA_counter", "H"), ("TMA", "B"),
    ("TAC", "B"), ("tima_reload_state", "B"), ("timer_last_cycles", "Q"),
    ("timer_cycles_to_interrupt", "Q"),
    ("rombank", "B"), ("rambank", "B"), ("ram_enabled", "B"), ("memory_model", "B"),
]
_TAIL: list[Field] = [
    ("joy_directional", "B"), ("joy_standard", "B"),
    ("SB", "B"), ("SC", "B"), ("ser_transfer_enabled", "B"), ("ser_internal_clock", "B"),
    ("ser_last_cycles", "Q"), ("ser_cycles_to_interrupt", "Q"), ("ser_clock", "Q"),
    ("ser_clock_target", "Q"), ("sgb", _SGB_BYTES),
]
INT_BYTES = {"B": 1, "H": 2, "Q": 8}
_INT = INT_BYTES


def _cart_fields(cart_type: int, ram_code: int) -> list[Field]:
    fields: list[Field] = [("cart_ram", _PYBOY_RAM_BANKS.get(ram_code, 1) * 0x2000)]
    if cart_type in _RTC_TYPES:
        fields.append(("rtc", _RTC_BYTES))
    if cart_type in (0x01, 0x02, 0x03):
        fields += [("mbc1_bank1", "B"), ("mbc1_bank2", "B")]
    if 0x19 <= cart_type <= 0x1E:
        fields.append(("rumble_supported", "B"))
        if cart_type in _RUMBLE_TYPES:
            fields.append(("rumble_enabled", "B"))
    return fields


def _size(fields: Iterable[Field]) -> int:
    return sum(_INT[k] if isinstance(k, str) else k for _, k in fields)


def field_layout(cart: Cartridge, total: int) -> list[Field]:
    """Every field (name, "B" | "H" | "Q" | byte count) of a ``total``-byte state of ``cart``."""
    return _layout(cart, total)


def blank_fields(cart: Cartridge, sound_bytes: int = 64) -> dict[str, Any]:
    """A parsed state of ``cart`` with every field zero (a template for :func:`from_gbx`
    where PyBoy's own is not at hand; PyBoy itself may not run such a file)."""
    fields: list[Field] = [*_HEAD, ("sound", sound_bytes), *_RENDERER, *_RAM_TIMER,
                           *_cart_fields(cart.data[0x147], cart.data[0x149]), *_TAIL]
    out: dict[str, Any] = {n: 0 if isinstance(k, str) else bytes(k) for n, k in fields}
    out["version"] = PYBOY_STATE_VERSION
    out["io_ports"] = bytes(0x4C)
    return out


def _layout(cart: Cartridge, total: int) -> list[Field]:
    rom = cart.data
    after_sound = _RENDERER + _RAM_TIMER + _cart_fields(rom[0x147], rom[0x149]) + _TAIL
    sound = total - _size(_HEAD) - _size(after_sound)
    if sound <= 0:
        raise SaveStateError("PyBoy state is truncated (too short for its ROM's layout)")
    return [*_HEAD, ("sound", sound), *after_sound]


def parse(data: bytes, cart: Cartridge, source: str = "PyBoy state") -> dict[str, Any]:
    """Split a PyBoy v29 DMG state made for ``cart`` into named fields."""
    # The format byte first: a file that is no savestate at all should be told so.
    if not data or data[0] != PYBOY_STATE_VERSION:
        raise SaveStateError(
            f"{source} is not a gbx savestate nor a PyBoy state of version {PYBOY_STATE_VERSION} "
            f"(first byte {data[0] if data else 'none'}); save it with PyBoy 2.x"
        )
    if len(data) < _size(_HEAD):
        raise SaveStateError(f"{source} is truncated ({len(data)} bytes)")
    out: dict[str, Any] = {}
    off = 0
    for name, kind in _layout(cart, len(data)):
        if isinstance(kind, str):
            n = _INT[kind]
            out[name] = int.from_bytes(data[off:off + n], "little")
        else:
            n = kind
            out[name] = bytes(data[off:off + n])
        off += n
    if out["cgb"] or out["lcd_cgb"]:
        raise SaveStateError(f"{source} is a Game Boy Color state; gbx emulates the DMG only")
    return out


def encode(fields: dict[str, Any], cart: Cartridge) -> bytes:
    """Join parsed fields back into PyBoy's byte layout (inverse of :func:`parse`)."""
    total = _size(_HEAD) + len(fields["sound"]) + _size(
        _RENDERER + _RAM_TIMER + _cart_fields(cart.data[0x147], cart.data[0x149]) + _TAIL
    )
    buf = bytearray()
    for name, kind in _layout(cart, total):
        v = fields[name]
        if isinstance(kind, str):
            buf += int(v).to_bytes(_INT[kind], "little")
        else:
            if len(v) != kind:
                raise ValueError(f"PyBoy field {name!r} must be {kind} bytes, got {len(v)}")
            buf += bytes(v)
    return bytes(buf)


# ---------------------------------------------------------------------------
# PyBoy -> gbx
# ---------------------------------------------------------------------------

_TIMER_PERIOD = {0: 1024, 1: 16, 2: 64, 3: 256}
_MODE2, _LINE, _MODE3 = 80, 456, 172
_MAX_CYCLES = 1 << 62  # PyBoy's u64 cycle counter, kept inside gbx's int64 clock


def _timer_next(div16: int, tac: int, tima: int, pending: bool, reload_in: int) -> int:
    """Cycles from now to the next TIMA reload, as gbx's timer schedules it."""
    if pending:
        return reload_in
    if not tac & 4:
        return L.NEVER
    p = _TIMER_PERIOD[tac & 3]
    return (p - div16 % p) + (255 - tima) * p + 4


def to_gbx(f: dict[str, Any], cart: Cartridge, template: EnvState) -> EnvState:
    """gbx arrays of one env from parsed PyBoy fields (``template`` gives shapes and defaults)."""
    out = {k: v.clone() for k, v in template.items()}
    mem = out["mem"].numpy()
    st = out["st"].numpy()
    tm = out["tm"].numpy()
    mem[L.VRAM_OFF:L.VRAM_OFF + 0x2000] = np.frombuffer(f["vram"], np.uint8)
    mem[L.WRAM_OFF:L.WRAM_OFF + 0x2000] = np.frombuffer(f["wram"], np.uint8)
    mem[L.OAM_OFF:L.OAM_OFF + 0xA0] = np.frombuffer(f["oam"], np.uint8)
    mem[L.HRAM_OFF:L.HRAM_OFF + 0x7F] = np.frombuffer(f["hram"], np.uint8)
    mem[L.HRAM_OFF + L.IE_HRAM_INDEX] = f["IE"]
    io = mem[L.IO_OFF:L.IO_OFF + 0x80]
    # Registers PyBoy keeps in its raw IO array (sound registers are kept there too).
    io[0x10:0x40] = np.frombuffer(f["io_ports"][0x10:0x40], np.uint8)
    io[L.P1] = 0xC0 | (f["io_ports"][0] & 0x30) | 0x0F
    io[L.SB], io[L.SC] = f["SB"], f["SC"] | 0x7E
    io[L.DIV], io[L.TIMA], io[L.TMA], io[L.TAC] = f["DIV"], f["TIMA"], f["TMA"], f["TAC"] | 0xF8
    io[L.IF] = f["IF"] | 0xE0
    for name, reg in (("LCDC", L.LCDC), ("SCY", L.SCY), ("SCX", L.SCX), ("LY", L.LY),
                      ("LYC", L.LYC), ("BGP", L.BGP), ("OBP0", L.OBP0), ("OBP1", L.OBP1),
                      ("WY", L.WY), ("WX", L.WX)):
        io[reg] = f[name]
    io[L.STAT] = f["STAT"] & 0x78
    io[L.DMA] = f["dma_source"]
    io[L.BOOT_OFF_REG] = 0 if f["bootrom_enabled"] else 1

    regs = {L.R_A: f["A"], L.R_F: f["F"] & 0xF0, L.R_B: f["B"], L.R_C: f["C"], L.R_D: f["D"],
            L.R_E: f["E"], L.R_H: f["HL"] >> 8, L.R_L: f["HL"] & 0xFF, L.R_SP: f["SP"],
            L.R_PC: f["PC"]}
    if f["halted"] and not f["stopped"]:
        # PyBoy keeps PC on a HALT while halted and steps past it on waking; gbx has PC
        # past the HALT already (the next instruction, where the return address points).
        regs[L.R_PC] = (f["PC"] + 1) & 0xFFFF
    for k, v in regs.items():
        st[k] = v
    st[L.S_IME] = 1 if f["ime"] else 0
    st[L.S_EI_DELAY] = min(f["ie_delay"], 2)
    st[L.S_HALTED] = 2 if f["stopped"] else (1 if f["halted"] else 0)
    st[L.S_LOCKED] = 0
    st[L.S_HALT_BUG] = 0

    _mbc_to_gbx(f, cart, st, out)

    # Timer: at rest gbx's time 0 is "now".
    div16 = f["DIV_counter"] & 0xFFFF
    pending = f["tima_reload_state"] == 1
    st[L.S_DIV_OFF] = div16
    st[L.S_TIMA_PEND] = 1 if pending else 0
    st[L.T_TSYNC] = 0
    st[L.T_RELOAD] = min(f["TIMA_counter"], 4) if pending else L.NEVER
    st[L.T_TIMER_NEXT] = _timer_next(div16, f["TAC"], f["TIMA"], pending, int(st[L.T_RELOAD]))

    # PPU: current mode and LY from PyBoy; the next transition is the distance to its clock_target.
    lcd_on = bool(f["LCDC"] & 0x80)
    mode = f["STAT"] & 3 if lcd_on else 0
    st[L.S_PPU_MODE] = mode
    st[L.S_MODE3_LEN] = _MODE3 + (f["SCX"] & 7)
    # PyBoy's clocks are u64 cycle counts: far-off targets would never be reached.
    remaining = min(max(int(f["lcd_clock_target"]) - int(f["lcd_clock"]), 0), _LINE)
    if not lcd_on:
        remaining = max(L.CYCLES_PER_FRAME - min(int(f["lcd_clock"]), L.CYCLES_PER_FRAME), 1)
    st[L.T_PPU_NEXT] = remaining
    ly_now = min(f["LY"], 153) if lcd_on else 0
    st[L.S_PPU_PHASE], st[L.S_PPU_MODE] = ppu_phase(lcd_on, ly_now, mode, -1)
    in_line = min(int(f["lcd_clock"]), L.CYCLES_PER_FRAME) - ly_now * _LINE
    st[L.T_LINE_AT] = -min(max(in_line, 0), _LINE) if lcd_on else 0
    st[L.S_PPU_FLAGS] = 0
    st[L.S_STAT_LINE] = 0
    wy, ly = f["WY"], f["LY"]
    st[L.S_WIN_LINE] = max(0, ly - wy) if (f["LCDC"] & 0x20 and ly >= wy) else 0
    st[L.S_SER_LEN] = 0
    st[L.T_SERIAL_END] = L.NEVER
    st[L.T_DMA_END] = -1
    st[L.T_DMA_START] = -1
    st[L.S_LFRAMES] = 0
    cycles = min(int(f["cpu_cycles"]), _MAX_CYCLES)
    tm[L.TM_CLOCK] = cycles
    tm[L.TM_FRAMES] = cycles // L.CYCLES_PER_FRAME
    tm[L.TM_INSTRS] = 0
    out["fb"].zero_()
    return out


def _mbc_to_gbx(f: dict[str, Any], cart: Cartridge, st: np.ndarray, out: EnvState) -> None:
    """Raw MBC registers from PyBoy's fields, then the banks gbx derives from them."""
    ram = np.frombuffer(f["cart_ram"], np.uint8)
    cram = out["cram"].numpy()
    if cart.ram_bytes:
        n = min(len(ram), cram.shape[0])
        cram[:n] = ram[:n]
    st[L.S_RAMG] = 0x0A if f["ram_enabled"] else 0
    st[L.S_MBC_MODE] = 0
    st[L.S_RTC_SEL] = 0
    if cart.mbc == MBC_1:
        st[L.S_MBC_R1] = (f["mbc1_bank1"] & 0x1F) or 1
        st[L.S_MBC_R2] = f["mbc1_bank2"] & 3
        st[L.S_MBC_MODE] = f["memory_model"] & 1
    elif cart.mbc == MBC_3:
        st[L.S_MBC_R1] = f["rombank"] & 0x7F or 1
        st[L.S_MBC_R2] = f["rambank"] & 0x0F
        st[L.S_RTC_SEL] = f["rambank"] if 0x08 <= f["rambank"] <= 0x0C else 0
    elif cart.mbc == MBC_5:
        st[L.S_MBC_R1] = f["rombank"] & 0x1FF
        st[L.S_MBC_R2] = f["rambank"] & 0x0F
    elif cart.mbc == MBC_2:
        st[L.S_MBC_R1] = f["rombank"] & 0x0F or 1
    else:
        st[L.S_MBC_R1] = 1
    update_banks(cart, st)


# ---------------------------------------------------------------------------
# gbx -> PyBoy
# ---------------------------------------------------------------------------


def from_gbx(state: EnvState, cart: Cartridge, template: dict[str, Any]) -> dict[str, Any]:
    """PyBoy fields for one gbx env, starting from ``template`` (parsed PyBoy state)."""
    f = dict(template)
    mem = state["mem"].cpu().numpy()
    st = state["st"].cpu().numpy().astype(np.int64)
    tm = state["tm"].cpu().numpy()
    io = mem[L.IO_OFF:L.IO_OFF + 0x80]
    f["bootrom_enabled"] = 0 if io[L.BOOT_OFF_REG] else 1
    f["A"], f["F"], f["B"], f["C"], f["D"], f["E"] = (
        int(st[i]) & 0xFF for i in (L.R_A, L.R_F, L.R_B, L.R_C, L.R_D, L.R_E)
    )
    f["HL"] = ((int(st[L.R_H]) & 0xFF) << 8) | (int(st[L.R_L]) & 0xFF)
    f["SP"], f["PC"] = int(st[L.R_SP]) & 0xFFFF, int(st[L.R_PC]) & 0xFFFF
    f["ime"] = int(st[L.S_IME] != 0)
    f["ie_delay"] = int(st[L.S_EI_DELAY]) & 0xFF
    f["halted"] = int(st[L.S_HALTED] == 1)
    if f["halted"]:
        f["PC"] = (f["PC"] - 1) & 0xFFFF  # PyBoy: PC on the HALT itself (see to_gbx)
    f["stopped"] = int(st[L.S_HALTED] == 2)
    f["IE"] = int(mem[L.HRAM_OFF + L.IE_HRAM_INDEX])
    f["intr_queued"] = 0
    f["IF"] = int(io[L.IF]) & 0x1F
    f["cpu_cycles"] = int(tm[L.TM_CLOCK])
    f["dma_active"], f["dma_reading"], f["dma_index"] = 0, 0, 0
    f["dma_source"] = int(io[L.DMA])
    f["dma_start_cycle"] = 0
    f["vram"] = mem[L.VRAM_OFF:L.VRAM_OFF + 0x2000].tobytes()
    f["oam"] = mem[L.OAM_OFF:L.OAM_OFF + 0xA0].tobytes()
    for name, reg in (("LCDC", L.LCDC), ("BGP", L.BGP), ("OBP0", L.OBP0), ("OBP1", L.OBP1),
                      ("LY", L.LY), ("LYC", L.LYC), ("SCY", L.SCY), ("SCX", L.SCX),
                      ("WY", L.WY), ("WX", L.WX)):
        f[name] = int(io[reg])
    lcd_on = bool(io[L.LCDC] & 0x80)
    mode = int(st[L.S_PPU_MODE]) if lcd_on else 0
    ly = int(io[L.LY])
    coincide = 4 if (lcd_on and ly == int(io[L.LYC])) else 0
    f["STAT"] = 0x80 | (int(io[L.STAT]) & 0x78) | coincide | mode
    nxt = max(int(st[L.T_PPU_NEXT]), 0)
    f["lcd_reset"], f["first_frame"], f["frame_done"] = 0, 0, 0
    if lcd_on:
        # PyBoy's clock counts cycles from the start of the frame; gbx knows the
        # distance to the next transition, from which the position in the line follows.
        len3 = int(st[L.S_MODE3_LEN])
        end_of_mode = {2: _MODE2, 3: _MODE2 + len3, 0: _LINE, 1: _LINE}[mode]
        pos = max(end_of_mode - nxt, 0)
        clock = ly * _LINE + pos
        f["lcd_clock"] = clock
        f["lcd_clock_target"] = clock + nxt
        f["next_stat_mode"] = {2: 3, 3: 0, 0: 2 if ly < 143 else 1, 1: 1}[mode]
        if mode == 1 and ly == 153:
            f["next_stat_mode"] = 1
        f["stat_transition"] = (
            _STAT_TRANSITION_ADVANCE_LY if mode == 0 and ly < 143 else _STAT_TRANSITION_NONE
        )
    else:
        f["lcd_clock"] = max(L.CYCLES_PER_FRAME - nxt, 0)
        f["lcd_clock_target"] = L.CYCLES_PER_FRAME
        f["next_stat_mode"] = 0
        f["stat_transition"] = _STAT_TRANSITION_NONE
    f["lcd_last_cycles"] = f["cpu_cycles"]
    f["wram"] = mem[L.WRAM_OFF:L.WRAM_OFF + 0x2000].tobytes()
    f["hram"] = mem[L.HRAM_OFF:L.HRAM_OFF + 0x7F].tobytes()
    ports = bytearray(template["io_ports"])
    ports[0x10:0x40] = io[0x10:0x40].tobytes()
    ports[0] = int(io[L.P1]) & 0x30
    f["io_ports"] = bytes(ports)
    div16 = int(st[L.S_DIV_OFF]) & 0xFFFF
    f["DIV_counter"], f["DIV"] = div16, div16 >> 8
    tima, pending, reload_at, irq = _timer_now(st, io)
    f["IF"] |= irq
    f["TIMA"], f["TMA"], f["TAC"] = tima, int(io[L.TMA]), int(io[L.TAC]) & 0x07
    f["tima_reload_state"] = 1 if pending else 0
    f["TIMA_counter"] = max(reload_at, 0) & 0xFFFF if pending else 0
    f["timer_last_cycles"] = f["cpu_cycles"]
    f["SB"], f["SC"] = int(io[L.SB]), int(io[L.SC])
    f["ser_transfer_enabled"] = int(io[L.SC]) & 0x80
    f["ser_internal_clock"] = int(io[L.SC]) & 1
    f["ser_last_cycles"] = f["cpu_cycles"]
    buttons = int(st[L.S_BUTTONS])
    f["joy_directional"] = 0x0F & ~(buttons & 0x0F)
    f["joy_standard"] = 0x0F & ~((buttons >> 4) & 0x0F)
    _mbc_from_gbx(state, cart, st, f)
    return f


def _timer_now(st: np.ndarray, io: np.ndarray) -> tuple[int, bool, int, int]:
    """TIMA at time 0 (now): gbx brings TIMA up to date lazily, from cycle ``T_TSYNC``.

    Returns (TIMA, reload pending, cycle of the pending reload, IF bits raised).
    The same rules as the emulator's ``timer_sync``.
    """
    cur, t = int(st[L.T_TSYNC]), 0
    tima, tac, tma = int(io[L.TIMA]), int(io[L.TAC]), int(io[L.TMA])
    pend, reload_at, irq = int(st[L.S_TIMA_PEND]) != 0, int(st[L.T_RELOAD]), 0
    div_off = int(st[L.S_DIV_OFF])
    while cur < t:
        if pend:
            if reload_at <= t:
                tima, pend, irq, cur = tma, False, 4, reload_at
            else:
                break
        if not tac & 4:
            break
        p = _TIMER_PERIOD[tac & 3]
        s0 = (cur + div_off) & 0xFFFF
        edges = (s0 + (t - cur)) // p - s0 // p
        if tima + edges < 256:
            tima += edges
            break
        e = cur + (p - s0 % p) + (255 - tima) * p
        tima, pend, reload_at, cur = 0, True, e + 4, e
    return tima, pend, reload_at, irq


def _mbc_from_gbx(state: EnvState, cart: Cartridge, st: np.ndarray, f: dict[str, Any]) -> None:
    ram = bytearray(len(f["cart_ram"]))
    if cart.ram_bytes:
        cram = state["cram"].cpu().numpy()
        n = min(len(ram), cram.shape[0])
        ram[:n] = cram[:n].tobytes()
    f["cart_ram"] = bytes(ram)
    f["ram_enabled"] = int((int(st[L.S_RAMG]) & 0x0F) == 0x0A)
    r1, r2, mode = int(st[L.S_MBC_R1]), int(st[L.S_MBC_R2]), int(st[L.S_MBC_MODE])
    f["rombank"] = int(st[L.S_BANKX]) & 0xFF
    f["rambank"] = 0
    if cart.mbc == MBC_1:
        f["mbc1_bank1"], f["mbc1_bank2"], f["memory_model"] = r1 & 0x1F, r2 & 3, mode & 1
        f["rambank"] = r2 & 3 if mode else 0
    elif cart.mbc == MBC_5:
        f["rombank"] = r1 & 0x1FF
        f["rambank"] = r2 & 0x0F
    elif cart.mbc == MBC_3:
        f["rombank"] = r1 & 0x7F
        f["rambank"] = r2 & 0x0F
    elif cart.mbc == MBC_2:
        f["rombank"] = r1 & 0x0F


# ---------------------------------------------------------------------------
# Batch-level entry points
# ---------------------------------------------------------------------------


def load_pyboy_state(
    batch: Any, data: bytes, env: int | None = None, source: str = "PyBoy state"
) -> None:
    """Load a PyBoy state (bytes) into env ``env`` of ``batch`` (all envs when None)."""
    fields = parse(data, batch.cart, source)
    if fields["bootrom_enabled"]:
        raise SaveStateError(
            f"{source} was saved while PyBoy's boot ROM was running; save it after the game "
            "has started (gbx starts at 0x0100 without a boot ROM)"
        )
    tensors = batch.state_tensors()
    template = capture(tensors, 0 if env is None else env)
    arrays = to_gbx(fields, batch.cart, {k: v.cpu() for k, v in template.items()})
    arrays = sanitize(arrays, batch.cart)
    check_compatible(tensors, arrays)
    write_env(tensors, env, arrays)


def pyboy_template(cart: Cartridge) -> dict[str, Any]:
    """A parsed PyBoy state of ``cart`` at power-on, made by PyBoy itself (needs ``pyboy``)."""
    import io
    import os
    import tempfile

    try:
        from pyboy import PyBoy
    except ImportError as exc:
        raise SaveStateError(
            "writing PyBoy states needs the pyboy package (pip install pyboy)"
        ) from exc
    fd, path = tempfile.mkstemp(suffix=".gb")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(cart.data)
        emu = PyBoy(path, window="null", sound_emulated=False)
        try:
            buf = io.BytesIO()
            emu.save_state(buf)
        finally:
            emu.stop(save=False)
    finally:
        os.unlink(path)
    return parse(buf.getvalue(), cart, "PyBoy template")


def save_pyboy_state(batch: Any, env: int, template: dict[str, Any] | None = None) -> bytes:
    """PyBoy state bytes of env ``env`` (``template``: parsed PyBoy state of the same ROM)."""
    tpl = template if template is not None else pyboy_template(batch.cart)
    state = {k: v.cpu() for k, v in capture(batch.state_tensors(), env).items()}
    return encode(from_gbx(state, batch.cart, tpl), batch.cart)


__all__ = [
    "CONVERSION_VERSION",
    "PYBOY_STATE_VERSION",
    "encode",
    "from_gbx",
    "load_pyboy_state",
    "parse",
    "pyboy_template",
    "save_pyboy_state",
    "to_gbx",
]
