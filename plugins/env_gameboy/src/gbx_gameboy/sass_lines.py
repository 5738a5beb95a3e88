"""Where a profiled kernel's instructions go, per line of its Python source.

Nsight Compute's source page (``ncu -i REPORT --page source --csv --print-source sass``)
gives, for each SASS instruction of a kernel, how many times a warp executed it, how many
threads took part in those executions and how many times the sampler found a warp stalled
on it. Warp writes a kernel's Python lines into C++ with ``#line`` directives, so a
build of the same kernel with line information (NVRTC and ptxas ``-lineinfo``,
``nvdisasm -gi``) names, for each SASS instruction, the Python line it comes from and
the lines of the functions inlined on the way. This module
lines the profile's instructions up with such a build and adds them up per line: the
measurement that says which statements of the run loop cost the most.

Functional core only; ``gbx gameboy sass-lines`` builds the kernel and prints the table.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gbx_gameboy.sass_path import INSTRUCTION

# A quarter of a warp: an instruction run with no more threads than this is code the warp
# runs for a few of its Game Boys while the rest wait (``sparse_share``).
SPARSE_THREADS = 8

_FILE_LINE = re.compile(r'//## File "([^"]+)", line (\d+)')
_LOCAL = re.compile(r"^(LDL|STL)\b")


@dataclass(frozen=True)
class BuiltInstruction:
    """One SASS instruction of a line-info build: its text, and where it comes from, the
    innermost source location first (``cpu.py:898``, then the lines it is inlined at)."""

    text: str
    chain: tuple[str, ...]


@dataclass(frozen=True)
class ProfiledInstruction:
    """One row of Nsight Compute's SASS source page."""

    text: str
    executed: int  # warp-level instructions executed
    samples: int  # warp stall samples on it
    threads: int = 0  # thread-level instructions executed (0: the page has no such column)


@dataclass(frozen=True)
class LineCost:
    """What the instructions of one source line cost in a profile."""

    line: str  # "cpu.py:898"; "?" where no instruction of the build matched
    executed: int
    samples: int
    local: int  # executed local-memory instructions (LDL, STL): spills and stack arrays
    threads: int = 0  # thread-level instructions executed: threads / executed is how many
    # threads of a warp were active on the line's instructions, on average


def opcode(text: str) -> str:
    """The mnemonic of a SASS instruction's text, without its predicate."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def read_sass_lines(sass: str, entry: str) -> list[BuiltInstruction]:
    """The instructions of ``entry``'s section in ``nvdisasm -c -gi`` output (its code,
    then its out-of-line callees, as Nsight Compute lists them), each with its source
    chain."""
    out: list[BuiltInstruction] = []
    inside = False
    pending: list[str] = []
    chain: tuple[str, ...] = ()
    for line in sass.splitlines():
        if line.startswith(".text."):
            if inside:
                break
            inside = line.rstrip(":") == f".text.{entry}"
            continue
        if not inside:
            continue
        if (m := _FILE_LINE.search(line)) is not None:
            pending.append(f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}")
            continue
        if (m := INSTRUCTION.match(line.strip())) is not None:
            if pending:
                chain, pending = tuple(pending), []
            out.append(BuiltInstruction(m.group(2).strip(), chain))
    if not out:
        raise ValueError(f"no instructions of {entry} in the disassembly")
    return out


def read_ncu_source_csv(text: str) -> list[ProfiledInstruction]:
    """The rows of ``ncu -i REPORT --page source --csv --print-source sass`` (one kernel:
    its name row, the header, then one row per instruction)."""
    rows = list(csv.reader(io.StringIO(text)))
    head = next((i for i, r in enumerate(rows) if "Source" in r and "Address" in r), None)
    if head is None:
        raise ValueError("not an Nsight Compute source page: no Address and Source columns; "
                         "export it with ncu -i REPORT --page source --csv --print-source sass")
    cols = rows[head]
    try:
        src = cols.index("Source")
        executed = cols.index("Instructions Executed")
    except ValueError:
        raise ValueError("the source page has no Instructions Executed column; profile "
                         "with --section SourceCounters") from None
    samples = cols.index("Warp Stall Sampling (All Samples)") if (
        "Warp Stall Sampling (All Samples)" in cols) else None
    threads = cols.index("Thread Instructions Executed") if (
        "Thread Instructions Executed" in cols) else None

    def number(row: list[str], i: int | None) -> int:
        return int(float(row[i])) if i is not None and i < len(row) and row[i] else 0

    return [ProfiledInstruction(r[src].strip(), number(r, executed), number(r, samples),
                                number(r, threads))
            for r in rows[head + 1:] if len(r) > src and r[src].strip()]


def align(built: Sequence[str], profiled: Sequence[str]) -> list[int | None]:
    """For each profiled opcode, the index of the same instruction in the build (None
    where none matches): one to one when the two sequences are the same, else by the
    longest matching blocks (the profiled GPU may have assembled the kernel a little
    differently)."""
    if list(built) == list(profiled):
        return list(range(len(profiled)))
    found: list[int | None] = [None] * len(profiled)
    matcher = difflib.SequenceMatcher(None, list(built), list(profiled), autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            found[block.b + k] = block.a + k
    return found


def source_line(chain: tuple[str, ...], by: str, package_files: frozenset[str]) -> str:
    """The line an instruction is charged to: ``outer``, the outermost line in the
    package's files (the kernel's own statement), or ``inner``, the innermost one (inside
    the helper that line calls); "?" when its chain names none."""
    ours = [c for c in chain if c.split(":")[0] in package_files]
    if not ours:
        return "?"
    return ours[-1] if by == "outer" else ours[0]


def line_costs(built: Sequence[BuiltInstruction], profiled: Sequence[ProfiledInstruction],
               package_files: frozenset[str], by: str = "outer") -> tuple[list[LineCost], int]:
    """The profile added up per source line, most executed first, and how many profiled
    instructions were matched to the build."""
    if by not in ("outer", "inner"):
        raise ValueError(f"by must be outer or inner, got {by!r}")
    index = align([opcode(b.text) for b in built], [opcode(p.text) for p in profiled])
    totals: dict[str, list[int]] = {}
    for p, i in zip(profiled, index, strict=True):
        line = "?" if i is None else source_line(built[i].chain, by, package_files)
        t = totals.setdefault(line, [0, 0, 0, 0])
        t[0] += p.executed
        t[1] += p.samples
        if _LOCAL.match(opcode(p.text)):
            t[2] += p.executed
        t[3] += p.threads
    costs = [LineCost(k, *v) for k, v in totals.items()]
    costs.sort(key=lambda c: (-c.executed, c.line))
    return costs, sum(i is not None for i in index)


def sparse_share(profiled: Sequence[ProfiledInstruction], most: float) -> float:
    """The share of the executed warp instructions that ran with at most ``most`` threads
    active on average (per instruction): the code a warp runs for a few of its threads
    while the others wait, as a divergent branch makes it. 0 when the profile has no
    thread counts."""
    executed = sum(p.executed for p in profiled if p.threads)
    if executed == 0:
        return 0.0
    return sum(p.executed for p in profiled
               if p.threads and p.threads <= most * p.executed) / executed
