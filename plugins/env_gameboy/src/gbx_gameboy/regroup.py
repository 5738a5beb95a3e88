"""Game Boys that ran alike share warps on a GPU (``GameBoyBatch(regroup=...)``).

A GPU warp runs its Game Boys in lockstep: where they run different code, it runs every
path one after the other, each for the threads that take it, and it keeps its slot on the
SM until its last Game Boy is done. Random play spreads a batch's Game Boys over a game's
phases (playing, the game-over screen, the title), and a warp of neighbouring envs holds a
mix of them. Before each launch, a batch that regroups sorts its envs by the instructions
each ran in the launch before (a stable radix sort on the device), copies every env's
state into the slot of that order, runs the launch on the copy, and copies each env's
state back. Game Boys that ran exactly as many instructions nearly always ran the same
code, so neighbouring slots, the threads of one warp, run alike.

Nothing of this is visible outside a launch: between launches every array is in env
order, and every env's state is what it would be without regrouping, bit for bit (envs
never read each other's state). The batch keeps a second copy of its per-env arrays
(``batch_bytes`` counts it). The first launch, with no instructions counted yet, keeps
env order; so does a launch after which every env ran alike.
"""

from __future__ import annotations

from typing import Any

from gbx_gameboy import layout as L
from gbx_gameboy.kstate import GB
from gbx_gameboy.warp_setup import wp

_TILE = wp.constant(L.TILE)
_TM_INSTRS = wp.constant(L.TM_INSTRS)
_KEY_MAX = wp.constant(wp.int64(2**31 - 1))

# The per-env arrays a launch reads and writes; the batch struct's other fields (the
# ROM, its predecoded forms, the constants, the phase clocks) are shared by both copies.
TILED_ARRAYS = ("mem", "cram", "st", "tm", "ser", "apu")
ENV_MAJOR_ARRAYS = ("fb", "pend", "lines")


# A tiled array moves into slot order and back by gathers: slot ``s`` gets env
# ``order[s]``, env ``e`` gets slot ``inverse[e]``, each written where consecutive threads
# write consecutive bytes. Read element by element, a slot's neighbours come from other
# tiles, so each read brings a 32-byte sector for one element: fine for the few hundred
# bytes an env has in ``st``, ``tm`` and ``apu``, but with ``mem`` moved so a batch of
# 65,536 envs took 21 ms each way on an H200, against a 24-frame launch's 260 on
# flappyboy. Byte arrays whose rows come in fours (``mem``, the serial ring, cartridge
# RAM) take two passes of 4-byte words through a scratch array in env order instead
# (below): 4.1 ms each way, the framebuffer's 2 included (docs/benchmarks.md, "Envs
# regrouped by their last launch's work").
@wp.kernel
def gather_tiled(src: wp.array3d(dtype=Any), source: wp.array(dtype=wp.int32),
                 dst: wp.array3d(dtype=Any)):
    """Column ``l`` of tile ``t`` of ``dst`` gets env ``source[t * TILE + l]`` of ``src``,
    row by row."""
    r, s = wp.tid()
    e = source[s]
    dst[s // _TILE, r, s % _TILE] = src[e // _TILE, r, e % _TILE]


for _dtype in (wp.uint8, wp.int32, wp.int64):
    wp.overload(gather_tiled, {"src": wp.array3d(dtype=_dtype),
                               "source": wp.array(dtype=wp.int32),
                               "dst": wp.array3d(dtype=_dtype)})


# A byte array whose rows come in fours moves as 4-byte words: a thread takes 4 rows
# of 4 envs, transposes the 4 x 4 bytes in its registers, and stores 4 words.
@wp.func
def byte_of(w: wp.uint32, i: int) -> wp.uint32:
    return (w >> wp.uint32(8 * i)) & wp.uint32(0xFF)


@wp.func
def transpose4(w0: wp.uint32, w1: wp.uint32, w2: wp.uint32, w3: wp.uint32,
               i: int) -> wp.uint32:
    """Byte ``i`` of each of the four words, as one word (w0's in its low byte)."""
    return (byte_of(w0, i) | (byte_of(w1, i) << wp.uint32(8)) | (byte_of(w2, i) << wp.uint32(16))
            | (byte_of(w3, i) << wp.uint32(24)))


@wp.kernel
def byte_tiles_to_rows(src: wp.array3d(dtype=wp.uint32), rows: wp.array2d(dtype=wp.uint32)):
    """``src``: a tiled byte array as words ``(tiles, rows, TILE / 4)``; ``rows``: its
    env rows as words ``(envs, rows / 4)``."""
    t, q, j = wp.tid()
    w0 = src[t, 4 * q, j]
    w1 = src[t, 4 * q + 1, j]
    w2 = src[t, 4 * q + 2, j]
    w3 = src[t, 4 * q + 3, j]
    for i in range(4):
        rows[t * _TILE + 4 * j + i, q] = transpose4(w0, w1, w2, w3, i)


@wp.kernel
def byte_rows_to_tiles(rows: wp.array2d(dtype=wp.uint32), source: wp.array(dtype=wp.int32),
                       dst: wp.array3d(dtype=wp.uint32)):
    """Column ``l`` of tile ``t`` of ``dst`` gets row ``source[t * TILE + l]``, as words."""
    t, q, j = wp.tid()
    s = t * _TILE + 4 * j
    w0 = rows[source[s], q]
    w1 = rows[source[s + 1], q]
    w2 = rows[source[s + 2], q]
    w3 = rows[source[s + 3], q]
    for k in range(4):
        dst[t, 4 * q + k, j] = transpose4(w0, w1, w2, w3, k)


@wp.kernel
def gather_env_words(src: wp.array2d(dtype=wp.uint32), source: wp.array(dtype=wp.int32),
                     dst: wp.array2d(dtype=wp.uint32)):
    """An array in env order, ``(envs, 4-byte words)``: row ``i`` of ``dst`` gets row
    ``source[i]`` of ``src``, one word a thread."""
    i, w = wp.tid()
    dst[i, w] = src[source[i], w]


@wp.kernel
def pad_orders(sorted_envs: wp.array(dtype=wp.int32), num_envs: int,
               order: wp.array(dtype=wp.int32), inverse: wp.array(dtype=wp.int32)):
    """Slot -> env (``order``) and env -> slot (``inverse``) over whole tiles: the
    columns past the batch's envs stay where they are."""
    s = wp.tid()
    e = s
    if s < num_envs:
        e = sorted_envs[s]
    order[s] = e
    inverse[e] = s


@wp.kernel
def gather_words(src: wp.array(dtype=wp.int32), order: wp.array(dtype=wp.int32),
                 dst: wp.array(dtype=wp.int32)):
    """A launch's buttons in slot order."""
    s = wp.tid()
    dst[s] = src[order[s]]


@wp.kernel
def note_instructions(tm: wp.array3d(dtype=wp.int64), before: wp.array(dtype=wp.int64)):
    """Each slot's instruction count as its launch starts."""
    s = wp.tid()
    before[s] = tm[s // _TILE, _TM_INSTRS, s % _TILE]


@wp.kernel
def instruction_keys(tm: wp.array3d(dtype=wp.int64), before: wp.array(dtype=wp.int64),
                     order: wp.array(dtype=wp.int32), keys: wp.array(dtype=wp.int32)):
    """Each env's sort key for the next launch: the instructions it ran in this one."""
    s = wp.tid()
    ran = tm[s // _TILE, _TM_INSTRS, s % _TILE] - before[s]
    keys[order[s]] = wp.int32(wp.min(ran, _KEY_MAX))


@wp.kernel
def sort_input(keys: wp.array(dtype=wp.int32), sort_keys: wp.array(dtype=wp.int32),
               sort_values: wp.array(dtype=wp.int32)):
    e = wp.tid()
    sort_keys[e] = keys[e]
    sort_values[e] = e


def _byte_words(a: Any) -> Any:
    """A tiled byte array as ``(tiles, rows, TILE / 4)`` words, sharing its memory."""
    return wp.array(ptr=a.ptr, dtype=wp.uint32, shape=(a.shape[0], a.shape[1], L.TILE // 4),
                    device=a.device)


def _words(a: Any, num_envs: int) -> Any:
    """An array in env order as ``(envs, 4-byte words)``, sharing its memory."""
    words = a.capacity // 4 // num_envs
    return wp.array(ptr=a.ptr, dtype=wp.uint32, shape=(num_envs, words), device=a.device)


class Regrouper:
    """The slot-ordered copy of a batch's per-env arrays, and the sort that fills it.

    ``gather`` (before a launch) sorts the envs by the instructions each ran in the last
    launch and copies their state into ``slots`` (a batch struct of the copy), ``scatter``
    (after it) copies it back and counts what each ran. ``order`` is slot -> env."""

    def __init__(self, g: Any, num_envs: int, device: str) -> None:
        self.num_envs = n = num_envs
        self.device = device
        padded = L.tiles_for(n) * L.TILE
        slots = GB()
        for name in GB.vars:
            setattr(slots, name, getattr(g, name))
        for name in TILED_ARRAYS:
            setattr(slots, name, wp.zeros_like(getattr(g, name)))
        # An array in env order is moved only where it has a row per env: the lines'
        # registers are a (1, 1) placeholder where the batch draws at once.
        env_major = [name for name in ENV_MAJOR_ARRAYS if getattr(g, name).shape[0] == n]
        for name in env_major:
            setattr(slots, name, wp.zeros_like(getattr(g, name)))
        slots.mem_ptr, slots.st_ptr, slots.tm_ptr = slots.mem.ptr, slots.st.ptr, slots.tm.ptr
        slots.cram_ptr, slots.ser_ptr, slots.apu_ptr = slots.cram.ptr, slots.ser.ptr, slots.apu.ptr
        self.slots = slots
        # the tiled arrays' pairs; a byte array whose rows come in fours moves as words
        # through a view of one scratch buffer as its env rows
        by_words: list[tuple[Any, Any]] = []
        self._by_elements: list[tuple[Any, Any]] = []
        for name in TILED_ARRAYS:
            env, slot = getattr(g, name), getattr(slots, name)
            words = env.dtype == wp.uint8 and env.shape[1] % 4 == 0
            (by_words if words else self._by_elements).append((env, slot))
        row_bytes = max([env.shape[1] for env, _ in by_words], default=0)
        self._rows_buffer = wp.zeros(max(1, padded * row_bytes), dtype=wp.uint8, device=device)
        self._by_words: list[tuple[Any, Any, Any]] = [
            (_byte_words(env), _byte_words(slot),
             wp.array(ptr=self._rows_buffer.ptr, dtype=wp.uint32,
                      shape=(padded, env.shape[1] // 4), device=device))
            for env, slot in by_words]
        self._words = [(_words(getattr(g, name), n), _words(getattr(slots, name), n))
                       for name in env_major]
        self.keys = wp.zeros(n, dtype=wp.int32, device=device)
        self._sort_keys = wp.zeros(2 * n, dtype=wp.int32, device=device)
        self._sort_values = wp.zeros(2 * n, dtype=wp.int32, device=device)
        self._order = wp.zeros(padded, dtype=wp.int32, device=device)
        self._inverse = wp.zeros(padded, dtype=wp.int32, device=device)
        self.order = self._order[:n]
        self._before = wp.zeros(n, dtype=wp.int64, device=device)
        self.buttons = wp.zeros(n, dtype=wp.int32, device=device)

    def _move(self, to_slots: bool) -> None:
        source = self._order if to_slots else self._inverse
        for env, slot, rows in self._by_words:
            src, dst = (env, slot) if to_slots else (slot, env)
            dim = (src.shape[0], src.shape[1] // 4, src.shape[2])
            wp.launch(byte_tiles_to_rows, dim=dim, inputs=[src, rows], device=self.device)
            wp.launch(byte_rows_to_tiles, dim=dim, inputs=[rows, source, dst],
                      device=self.device)
        for env, slot in self._by_elements:
            src, dst = (env, slot) if to_slots else (slot, env)
            wp.launch(gather_tiled, dim=(src.shape[1], source.shape[0]),
                      inputs=[src, source, dst], device=self.device)
        for env, slot in self._words:
            src, dst = (env, slot) if to_slots else (slot, env)
            wp.launch(gather_env_words, dim=src.shape, inputs=[src, source, dst],
                      device=self.device)

    def gather(self, buttons: Any | None) -> Any | None:
        """Sort, then copy every env's state into its slot; returns ``buttons`` in slot
        order (None stays None)."""
        n, dev = self.num_envs, self.device
        wp.launch(sort_input, dim=n, inputs=[self.keys, self._sort_keys, self._sort_values],
                  device=dev)
        wp.utils.radix_sort_pairs(self._sort_keys, self._sort_values, n)
        wp.launch(pad_orders, dim=self._order.shape[0],
                  inputs=[self._sort_values, n, self._order, self._inverse], device=dev)
        self._move(True)
        wp.launch(note_instructions, dim=n, inputs=[self.slots.tm, self._before], device=dev)
        if buttons is None:
            return None
        wp.launch(gather_words, dim=n, inputs=[buttons, self.order, self.buttons], device=dev)
        return self.buttons

    def scatter(self) -> None:
        """Count each env's instructions of the launch, then copy every env's state back."""
        wp.launch(instruction_keys, dim=self.num_envs,
                  inputs=[self.slots.tm, self._before, self.order, self.keys],
                  device=self.device)
        self._move(False)
