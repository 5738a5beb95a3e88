"""Assembler syntax: labels, expressions, constants, sections, header, control, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbx_gameboy.asm import (
    AsmError,
    assemble,
    assemble_file,
    assemble_with_symbols,
    format_symbols,
)


def code(src: str, at: int = 0x150, n: int = 16) -> bytes:
    return assemble(f'SECTION "t", ROM0[${at:X}]\n{src}')[at : at + n]


def test_global_and_local_labels_with_forward_references() -> None:
    src = """
Start:
    jp Other.done
.loop:
    jr .loop
Other:
    jr .loop
.loop:
    nop
.done:
    dw Start.loop, .loop
"""
    out = code(src, n=12)
    # Start=$150: jp $015A (3), Start.loop=$153 jr -2, Other=$155 jr +0 -> $157, nop, .done=$158
    assert out.hex() == "c3580118fe1800" + "00" + "5301" + "5701"


def test_expressions() -> None:
    src = """
X EQU 3
DEF Y EQU X * 2 + 1
Z = (Y << 4) | %0101
    db 1 + 2 * 3, (1 + 2) * 3, 7 / 2, -7 / 2, 7 % 3, 17 % %11
    db $1F & 0x0E, 5 ^ 3, ~0 & $FF, 1 << 3 >> 1, 'A', "B" + 1
    db HIGH($ABCD), LOW($ABCD), Z, 2 == 2, 3 < 2, 1 && 0, 0 || 4, !0
    dw @, $
    db 0b11, -1
"""
    out = code(src, n=32)
    assert list(out[:6]) == [7, 9, 3, 0xFD, 1, 2]
    assert list(out[6:12]) == [0x0E, 6, 0xFF, 4, 65, 67]
    assert list(out[12:20]) == [0xAB, 0xCD, 0x75, 1, 0, 0, 1, 1]
    assert out[20:24].hex() == "6401" * 2  # both name the start of the dw line
    assert list(out[24:26]) == [3, 0xFF]


def test_variables_can_be_redefined_but_equ_cannot() -> None:
    assert list(code("N = 1\nN = N + 1\n db N")[:1]) == [2]
    with pytest.raises(AsmError, match="defined twice"):
        assemble("A1 EQU 1\nA1 EQU 2")


def test_sections_banks_and_bank_function() -> None:
    src = """
SECTION "home", ROM0[$0150]
    ld a, BANK(Far)
    ld hl, Far
SECTION "far", ROMX[$4000], BANK[2]
    ds 16
Far:
    db $AA
SECTION "vars", WRAM0[$C100]
wCounter: ds 2
wFlag: ds 1
SECTION "code2", ROM0
    ld a, [wFlag]
"""
    rom = assemble(src)
    assert len(rom) == 4 * 0x4000 and rom[0x148] == 1  # 3 banks used -> 64 KiB
    assert rom[0x150:0x155].hex() == "3e02211040"
    assert rom[2 * 0x4000 + 16] == 0xAA
    # the floating section lands at the first free ROM0 byte: $0000
    assert rom[0:3].hex() == "fa02c1"


def test_org_and_ds_fill() -> None:
    src = """
SECTION "a", ROM0[$0200]
    db 1
    ds 3, $EE
    ds 4, 1, 2
    org $0300
    db 2
"""
    rom = assemble(src)
    assert rom[0x200:0x208].hex() == "01eeeeee01020102" and rom[0x300] == 2


def test_header_fields_padding_and_checksums() -> None:
    src = """
HEADER_TITLE "GBX TEST"
HEADER_CART_TYPE $01
HEADER_ROM_SIZE 2
HEADER_RAM_SIZE 0
HEADER_VERSION 3
SECTION "entry", ROM0[$0100]
    nop
    jp $0150
    ds $150 - @, 0
"""
    rom = assemble(src)
    assert len(rom) == 128 * 1024
    assert rom[0x134:0x144] == b"GBX TEST".ljust(16, b"\0")
    assert (rom[0x147], rom[0x148], rom[0x149], rom[0x14C]) == (1, 2, 0, 3)
    assert rom[0x104:0x134] == bytes(48)  # logo left empty
    x = 0
    for b in rom[0x134:0x14D]:
        x = (x - b - 1) & 0xFF
    assert rom[0x14D] == x
    total = (sum(rom) - rom[0x14E] - rom[0x14F]) & 0xFFFF
    assert rom[0x14E] << 8 | rom[0x14F] == total


def test_macros_rept_if(tmp_path: Path) -> None:
    src = """
MACRO twice
    db \\1, \\1
.x\\@:
    db _NARG
ENDM
DEBUG EQU 0
SECTION "m", ROM0[$0150]
Start:
    twice 7
    REPT 3
    db $55
    ENDR
    IF DEBUG
    db 1
    ELIF DEBUG == 0
    db 2
    ELSE
    db 3
    ENDC
"""
    rom = assemble(src)
    assert rom[0x150:0x157].hex() == "07070155555502"


def test_include_and_incbin(tmp_path: Path) -> None:
    (tmp_path / "consts.inc").write_text("VALUE EQU $42\n")
    (tmp_path / "blob.bin").write_bytes(bytes([9, 8, 7, 6]))
    main = tmp_path / "main.asm"
    main.write_text(
        'INCLUDE "consts.inc"\nSECTION "s", ROM0[$150]\n db VALUE\n INCBIN "blob.bin", 1, 2\n'
    )
    rom = assemble_file(main)
    assert rom[0x150:0x153].hex() == "420807"


@pytest.mark.parametrize(
    ("src", "line", "message"),
    [
        ("  nop\n  frob a", 2, "unknown mnemonic or directive 'frob'"),
        ("  ld a, sp", 1, "bad operands for 'ld'"),
        ("  jp Nowhere", 1, "undefined symbol 'Nowhere'"),
        ("  ld a, 300", 1, "value 300 out of range for 8-bit operand"),
        ("  jr Far\n  ds 200\nFar:", 1, "jr target out of range"),
        ("  bit 8, a", 1, "bit number 8 out of range"),
        ("  rst $10 + 1", 1, "rst target $11 invalid"),
        ("  ldh a, [$1234]", 1, "ldh address $1234 out of range"),
        ("  add sp, 200", 1, "out of range for signed 8-bit"),
        ("  db 1,", 1, "empty operand"),
        ("  ld a, (1 + ", 1, "expression ends too early"),
        ('  db "open', 1, "unterminated string"),
        (".x:", 1, "local label '.x' used before any global label"),
        ("  ds Later\nLater:", 1, "ds count uses 'Later', which is not defined above it"),
    ],
)
def test_error_messages_name_file_and_line(src: str, line: int, message: str) -> None:
    header = 'SECTION "s", ROM0[$0150]\n'
    with pytest.raises(AsmError) as err:
        assemble(header + src, origin_file="game.asm")
    text = str(err.value)
    assert text.startswith(f"game.asm:{line + 1}: ") and message in text and "\n" not in text


def test_overlapping_sections_are_rejected() -> None:
    src = 'SECTION "a", ROM0[$0150]\n ds 16\nSECTION "b", ROM0[$0158]\n nop\n'
    with pytest.raises(AsmError, match=r"x.asm:3: section 'b' overlaps section 'a' at \$0158"):
        assemble(src, origin_file="x.asm")


def test_code_outside_section_and_data_in_ram_are_rejected() -> None:
    with pytest.raises(AsmError, match="outside any SECTION"):
        assemble("  nop")
    with pytest.raises(AsmError, match="only 'ds' allowed"):
        assemble('SECTION "v", WRAM0\n db 1')


def test_section_too_big_for_its_region() -> None:
    with pytest.raises(AsmError, match="does not fit in ROM0"):
        assemble('SECTION "big", ROM0[$3FF0]\n ds 32')


def test_header_conflict_and_rom_size_too_small() -> None:
    with pytest.raises(AsmError, match="HEADER_TITLE conflicts with section data at \\$0134"):
        assemble('HEADER_TITLE "AB"\nSECTION "h", ROM0[$0134]\n db 1')
    with pytest.raises(AsmError, match="ROM size code 0 holds 2 banks but bank 3 is used"):
        assemble('HEADER_ROM_SIZE 0\nSECTION "x", ROMX[$4000], BANK[3]\n nop')


def test_build_is_deterministic() -> None:
    src = 'SECTION "a", ROM0[$150]\nLoop: jr Loop\n'
    assert assemble(src) == assemble(src)


def test_symbols_are_returned_and_formatted() -> None:
    src = """
SECTION "code", ROM0[$0150]
Start:
.loop:
    jr .loop
SECTION "far", ROMX[$4000], BANK[3]
Far:
SECTION "vars", WRAM0[$C000]
wVar: ds 1
"""
    rom, symbols = assemble_with_symbols(src)
    assert symbols == {
        "Start": (0, 0x150), "Start.loop": (0, 0x150), "Far": (3, 0x4000), "wVar": (0, 0xC000)
    }
    assert rom == assemble(src)
    assert format_symbols(symbols).splitlines() == [
        "00:0150 Start", "00:0150 Start.loop", "00:C000 wVar", "03:4000 Far"
    ]


def test_percent_is_binary_after_keywords_and_modulo_after_values() -> None:
    src = "X EQU %101\n    db X % 3, X%3, (X) %11, X + %11\n    and %11"
    assert list(code(src, n=6)) == [2, 2, 5, 8, 0xE6, 3]  # (X) %11 is 5 modulo eleven


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("    IF 1\n    nop", "IF without ENDC"),
        ("    ELSE", "ELSE without IF"),
        ("    REPT 2\n    nop", "REPT without ENDR"),
        ("    ENDR", "ENDR/ENDM without REPT/MACRO"),
        ("MACRO m\n    db \\2\nENDM\n    m 1", "macro 'm' uses \\2 but got 1 args"),
        ("MACRO ld\nENDM", "macro name 'ld' is an instruction mnemonic"),
        ("    ASSERT 1 == 2, \"one is not two\"", "assertion failed: one is not two"),
        ('    INCLUDE "nowhere.inc"', "file 'nowhere.inc' not found"),
        ("    db 256", "value 256 out of range for 8-bit operand"),
        ("    dw $10000", "out of range for 16-bit operand"),
        ("X EQU 1\n    ld X, a", "bad operands for 'ld'"),
        ("    push sp", "bad operands for 'push'"),
        ("    jr z", "bad operands for 'jr'"),
        ("    jp pe, 0", "'jp' condition must be nz, z, nc or c"),
    ],
)
def test_more_error_messages(src: str, message: str) -> None:
    with pytest.raises(AsmError) as err:
        assemble('SECTION "s", ROM0[$0150]\n' + src)
    assert message in str(err.value)
