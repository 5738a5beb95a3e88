"""gbx's own SM83 (Game Boy CPU) assembler, RGBDS-like syntax, pure Python.

Usage::

    from gbx_gameboy.asm import assemble, assemble_file, AsmError
    rom: bytes = assemble(source, origin_file="game.asm")

The result is a complete ROM image: sections laid out by bank, the header fields set by
``HEADER_*`` directives, padded to the declared ROM size, header checksum ($014D) and global
checksum ($014E-$014F) filled in.  The Nintendo logo area ($0104-$0133) stays zero unless the
source writes it (the emulators of this project do not check it).

Syntax (mnemonics, registers and directives are case-insensitive; symbols are not):

* Instructions: every SM83 instruction, operands as in RGBDS: ``ld a, [hl+]`` (also
  ``[hli]``, ``[hl-]``, ``[hld]``, ``ldi``/``ldd``), ``ldh [$FF40], a`` (or ``ldh [$40], a``),
  ``ld [c], a`` / ``ldh a, [$FF00+c]``, ``ld hl, sp+5`` (``ldhl sp, 5``), ``add sp, -2``,
  ``ld [nn], sp``, ``jp hl``, ``jr nz, .loop``, ``rst $38``, ``bit 7, [hl]``.  ALU ops take
  ``add a, b`` or ``add b``.  ``stop`` assembles to ``$10 $00``.
* Labels: ``Name:`` (``Name::`` too) starts a scope; ``.local:`` belongs to the last global
  label and is reachable elsewhere as ``Name.local``.
* Constants: ``NAME EQU expr`` / ``DEF NAME EQU expr`` (fixed), ``NAME = expr`` (redefinable).
* Expressions: ``+ - * / % & | ^ << >> ~ !``, comparisons, ``&& ||``, parentheses; numbers
  ``42``, ``$2A``, ``0x2A``, ``%101010``, ``0b101010``, ``'A'``; ``$`` or ``@`` is the address
  of the current instruction; functions ``HIGH(x)``, ``LOW(x)``, ``BANK(label)``,
  ``DEFINED(name)``.
* Sections: ``SECTION "name", ROM0[$0150]``, ``SECTION "b2", ROMX[$4000], BANK[2]``; the
  address and bank may be left out (floating: first fit).  RAM sections (``WRAM0``,
  ``WRAMX``, ``HRAM``, ``VRAM``, ``SRAM``) only reserve space with ``ds`` and give labels
  addresses.  ``org $addr`` opens an unnamed section at that address in the same region.
* Data: ``db 1, "text", 'c'``, ``dw $1234, Label``, ``ds count[, fill...]``,
  ``INCBIN "file"[, start[, length]]``, ``INCLUDE "file"``.
* Control: ``IF/ELIF/ELSE/ENDC``, ``REPT n ... ENDR``, ``MACRO name ... ENDM`` (arguments
  ``\\1``..``\\9``, ``\\@`` a unique suffix, ``_NARG`` the count), ``ASSERT expr, "msg"``.
* Header: ``HEADER_TITLE "NAME"`` (<= 16 chars), ``HEADER_CART_TYPE n`` ($0147),
  ``HEADER_ROM_SIZE n`` ($0148, 32 KiB << n; default: the smallest that holds every bank
  used), ``HEADER_RAM_SIZE n`` ($0149), ``HEADER_VERSION n`` ($014C).

Errors raise :class:`AsmError` whose text is ``file:line: message``.
``assemble_with_symbols`` / ``assemble_file_with_symbols`` also return every label as
``name -> (bank, address)``; ``format_symbols`` writes them as ``BB:AAAA name`` lines.
"""

from __future__ import annotations

from .assembler import (
    assemble,
    assemble_file,
    assemble_file_with_symbols,
    assemble_with_symbols,
    format_symbols,
)
from .errors import AsmError

__all__ = [
    "AsmError",
    "assemble",
    "assemble_file",
    "assemble_file_with_symbols",
    "assemble_with_symbols",
    "format_symbols",
]
