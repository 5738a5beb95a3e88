"""The run loop's always-run SASS path: what every emulated instruction executes on a GPU.

ptxas's totals (stack frame, spill stores and loads) count every spill instruction of the
kernel once, wherever it is; most lie on rare paths. What costs time is the local-memory
traffic on the path that every fetched Game Boy instruction takes. This module reads the
run kernel's SASS (``nvdisasm -c`` of ptxas's cubin), splits it into basic blocks, finds
the instruction loop (the loop with the widest span inside Warp's grid-stride loop) and
its anchor (the block that loads an instruction's predecoded entry, the one 16-byte load
of the fetch from ROM), and counts the instructions, local loads (LDL) and local stores
(STL) of the blocks that every pass through the anchor runs: those that dominate it from
the loop header and those that post-dominate it up to the loop's back-edge. That is the
path of every instruction fetched from cartridge ROM.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_LABEL = re.compile(r"^(\.L_x_\d+):")
# One instruction of nvdisasm's output (the line stripped): its address, then its text.
INSTRUCTION = re.compile(r"^/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
# The fetch's predecoded entry (decode.rom_predecode_entries): one 16-byte global load.
_ENTRY_LOAD = (re.compile(r"^LDG\.E\.128(\.\w+)* R\d+, desc\[UR\d+\]\[R\d+\.64\]"),)


@dataclass(frozen=True)
class LoopPath:
    """Per emulated instruction, at least: SASS instructions, local loads and stores."""

    instructions: int
    local_loads: int
    local_stores: int

    def to_json(self) -> dict[str, int]:
        return {"instructions": self.instructions, "local_loads": self.local_loads,
                "local_stores": self.local_stores}


def function_body(sass: str, entry: str) -> list[str]:
    """The instruction and label lines of ``entry``'s own code (not its callees)."""
    out: list[str] = []
    inside = False
    for line in sass.splitlines():
        s = line.strip()
        if s.startswith(f".text.{entry}:"):
            inside = True
        elif s.startswith(f"${entry}$") or (inside and s.startswith(".text.")):
            inside = False
        elif inside and (_LABEL.match(s) or INSTRUCTION.match(s)):
            out.append(s)
    return out


def _blocks(body: list[str]) -> tuple[list[list[str]], dict[int, set[int]]]:
    """Basic blocks (their instruction texts) and successor sets."""
    instrs: list[str] = []
    labels: dict[str, int] = {}
    for s in body:
        m = _LABEL.match(s)
        if m:
            labels[m.group(1)] = len(instrs)
        else:
            m2 = INSTRUCTION.match(s)
            if m2:
                instrs.append(m2.group(2))
    leaders = {0} | set(labels.values())
    for i, text in enumerate(instrs):
        if re.search(r"\b(BRA|EXIT|RET|BRX)\b", text) and i + 1 < len(instrs):
            leaders.add(i + 1)
    starts = sorted(x for x in leaders if x < len(instrs))
    block_of = {}
    blocks: list[list[str]] = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(instrs)
        blocks.append(instrs[start:end])
        for i in range(start, end):
            block_of[i] = k
    succ: dict[int, set[int]] = {k: set() for k in range(len(blocks))}
    for k in range(len(starts)):
        end = starts[k + 1] if k + 1 < len(starts) else len(instrs)
        last = instrs[end - 1]
        target = _TARGET.search(last)
        if "BRA" in last and target:
            succ[k].add(block_of[labels[target.group(1)]])
            unconditional = last.startswith("BRA") and not re.match(r"^BRA\s+!?P\d", last)
            if not unconditional and end < len(instrs):
                succ[k].add(block_of[end])
        elif re.search(r"\b(EXIT|RET)\b", last) and not last.startswith("@"):
            continue
        elif end < len(instrs):
            succ[k].add(block_of[end])
    return blocks, succ


def _dominators(nodes: set[int], root: int, preds: dict[int, set[int]]) -> dict[int, set[int]]:
    dom = {n: set(nodes) for n in nodes}
    dom[root] = {root}
    changed = True
    while changed:
        changed = False
        for n in sorted(nodes):
            if n == root:
                continue
            sets = [dom[p] for p in preds[n] if p in nodes]
            new = (set.intersection(*sets) if sets else set()) | {n}
            if new != dom[n]:
                dom[n] = new
                changed = True
    return dom


def loop_path(sass: str, entry: str) -> LoopPath | None:
    """The always-run path of ``entry``'s instruction loop, or None if not found."""
    blocks, succ = _blocks(function_body(sass, entry))
    back = [(k, s) for k in succ for s in succ[k] if s <= k]
    if not back:
        return None
    heads = Counter(s for _, s in back)
    span = {h: max(k - h for k, s in back if s == h) for h in heads}
    outer = max(span, key=lambda h: span[h])  # Warp's grid-stride loop around the body
    inner = [h for h in span if h != outer]
    if not inner:
        return None
    head = max(inner, key=lambda h: span[h])
    loop: set[int] = set()
    todo = [head]
    while todo:  # the blocks reachable from the header without passing it again
        n = todo.pop()
        if n not in loop:
            loop.add(n)
            todo.extend(s for s in succ[n] if s != head)
    anchor = next((k for k in sorted(loop)
                   if all(any(p.match(t) for t in blocks[k]) for p in _ENTRY_LOAD)), None)
    if anchor is None:
        return None
    preds: dict[int, set[int]] = {n: set() for n in loop}
    for n in loop:
        for s in succ[n]:
            if s in loop and s != head:
                preds[s].add(n)
    # Post-dominators towards the next iteration: every edge back to the header (the end
    # of an instruction, or a ``continue``) goes to one sink.
    sink = -1
    rsucc = {n: {s for s in succ[n] if s in loop and s != head} | ({sink} if head in succ[n]
                                                                   else set()) for n in loop}
    rsucc[sink] = set()
    rpred: dict[int, set[int]] = {n: set() for n in rsucc}
    for n, ss in rsucc.items():
        for s in ss:
            rpred[s].add(n)
    reaches: set[int] = set()  # the blocks from which the next iteration can be reached
    todo = [sink]
    while todo:
        n = todo.pop()
        if n not in reaches:
            reaches.add(n)
            todo.extend(rpred[n])
    dom = _dominators(loop, head, preds)
    pdom = _dominators(reaches, sink, {n: rsucc[n] & reaches for n in reaches})
    path = (dom[anchor] | pdom.get(anchor, {anchor})) - {sink}

    def count(pattern: str) -> int:
        return sum(1 for k in path for t in blocks[k] if re.match(pattern, t))

    return LoopPath(count(r"."), count(r"LDL\b"), count(r"STL\b"))
