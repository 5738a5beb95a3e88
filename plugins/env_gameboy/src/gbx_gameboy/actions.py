"""Action codecs: map a discrete action index to a Game Boy button bitmask.

The machine takes one button byte per env (bit set = pressed):
bit0 RIGHT, bit1 LEFT, bit2 UP, bit3 DOWN, bit4 A, bit5 B, bit6 SELECT, bit7 START.
A codec is a fixed, named list of button combinations; ``encode`` turns an
``int64 [N]`` action tensor into ``int32 [N]`` masks (the dtype the machine
reads) with one device gather.
"""

from __future__ import annotations

import attrs
import torch

RIGHT, LEFT, UP, DOWN, A, B, SELECT, START = (1 << i for i in range(8))
NOOP = 0

BUTTON_BITS: dict[str, int] = {
    "RIGHT": RIGHT,
    "LEFT": LEFT,
    "UP": UP,
    "DOWN": DOWN,
    "A": A,
    "B": B,
    "SELECT": SELECT,
    "START": START,
    "NOOP": NOOP,
}

# Each codec lists button names; the position in the tuple is the action index.
_BUTTONS7 = ("A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT")
CODECS: dict[str, tuple[str, ...]] = {
    "buttons7": _BUTTONS7,
    "default": _BUTTONS7,
    "buttons8_noop": (*_BUTTONS7, "NOOP"),
    "buttons9": (*_BUTTONS7, "NOOP", "SELECT"),
}


@attrs.frozen
class ActionCodec:
    """A named list of buttons with its lookup table on one device."""

    name: str
    buttons: tuple[str, ...]
    table: torch.Tensor  # int32 [num_actions]

    @property
    def num_actions(self) -> int:
        return len(self.buttons)

    def encode(self, actions: torch.Tensor) -> torch.Tensor:
        """``int64 [N]`` action indices -> ``int32 [N]`` button masks (on the table's device)."""
        return self.table[actions]

    def encode_into(self, actions: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Like :meth:`encode` but writing into a preallocated ``int32 [N]`` tensor."""
        return torch.index_select(self.table, 0, actions, out=out)


def make_codec(name: str, device: torch.device | str = "cpu") -> ActionCodec:
    """Build the codec called ``name`` (see :data:`CODECS`) with its table on ``device``."""
    if name not in CODECS:
        raise ValueError(f"unknown action codec {name!r}; choose one of {', '.join(CODECS)}")
    buttons = CODECS[name]
    table = torch.tensor([BUTTON_BITS[b] for b in buttons], dtype=torch.int32, device=device)
    return ActionCodec(name=name, buttons=buttons, table=table)


def parse_presses(spec: str) -> list[tuple[str, int]]:
    """Parse ``"START@60,A@120"`` into ``[("START", 60), ("A", 120)]`` (frame numbers)."""
    out: list[tuple[str, int]] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        button, sep, frame = item.partition("@")
        button = button.strip().upper()
        if not sep or button not in BUTTON_BITS or button == "NOOP" or not frame.strip().isdigit():
            raise ValueError(
                f"bad button press {item!r}: write BUTTON@FRAME, e.g. START@60, with BUTTON one of "
                "A, B, START, SELECT, UP, DOWN, LEFT, RIGHT"
            )
        out.append((button, int(frame)))
    return sorted(out, key=lambda p: p[1])


def press_schedule(
    presses: list[tuple[str, int]], total_frames: int, hold: int = 8
) -> list[tuple[int, int]]:
    """Split ``total_frames`` into segments ``(frames, button_mask)`` for timed presses.

    Each press holds its button for ``hold`` frames from its frame number (presses
    that overlap are combined); frames with nothing pressed have mask 0.
    """
    masks = [0] * total_frames
    for button, frame in presses:
        for f in range(max(frame, 0), min(frame + hold, total_frames)):
            masks[f] |= BUTTON_BITS[button]
    segments: list[tuple[int, int]] = []
    for m in masks:
        if segments and segments[-1][1] == m:
            segments[-1] = (segments[-1][0] + 1, m)
        else:
            segments.append((1, m))
    return segments


def run_with_presses(
    batch: object, total_frames: int, presses: list[tuple[str, int]], render_last: bool = True
) -> None:
    """Run every env of ``batch`` for ``total_frames`` frames, pressing buttons on schedule."""
    segs = press_schedule(presses, total_frames)
    device = batch.fb.device  # type: ignore[attr-defined]
    n = batch.num_envs  # type: ignore[attr-defined]
    for i, (frames, mask) in enumerate(segs):
        last = render_last and i == len(segs) - 1
        buttons = torch.full((n,), mask, dtype=torch.int32, device=device)
        batch.step_frames(buttons, frames, frames, render_last=last)  # type: ignore[attr-defined]
