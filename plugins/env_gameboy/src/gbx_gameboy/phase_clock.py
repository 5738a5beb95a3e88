"""Optional per-phase cycle counters of the run kernel (``GBX_GAMEBOY_PHASE_CLOCKS=1``).

Built in, the run loop reads the SM's cycle counter (``clock64``; the CPU's cycle counter on
the CPU device) around each phase of every instruction and adds the differences per env to
``GB.clocks``; it also counts the warp's live threads at each opcode fetch, which shows how
well the 32 Game Boys of a warp stay together. ``gbx bench emulator`` adds the breakdown to
its record. Off by default: the counters cost registers and time, and a build with them is a
separate kernel (the environment variable is read when the module is imported).
"""

from __future__ import annotations

import os

from gbx_gameboy.warp_setup import wp

wp.set_module_options({"enable_backward": False})

PHASE_CLOCKS = os.environ.get("GBX_GAMEBOY_PHASE_CLOCKS", "") == "1"
PHASES = ("catch_up", "interrupts_halt", "fetch", "reads", "register_work", "writes")
ROW_LANES = len(PHASES)  # sum over fetches of the warp's live threads
ROW_FETCHES = ROW_LANES + 1  # loop iterations that fetched an opcode
ROW_CATCH_UPS = ROW_LANES + 2  # iterations that ran the event catch-up
CLOCK_ROWS = ROW_LANES + 3


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
return (long long)clock64();
#else
return (long long)__builtin_readcyclecounter();
#endif
"""
)
def cycle_clock() -> wp.int64:  # type: ignore[empty-body]
    """The thread's cycle counter (SM clock on a GPU)."""
    ...


@wp.func_native(
    """
#if defined(__CUDA_ARCH__)
return (int)__popc(__activemask());
#else
return 1;
#endif
"""
)
def live_lanes() -> int:  # type: ignore[empty-body]
    """Threads of the warp executing this instruction together (1 on the CPU)."""
    ...


def summarize(rows: list[int]) -> dict[str, object]:
    """Per-phase shares, cycles per loop iteration and live threads per fetch, from the
    ``clocks`` rows summed over envs."""
    total = sum(rows[: len(PHASES)]) or 1
    fetches = max(rows[ROW_FETCHES], 1)
    return {
        "phase_share": {name: round(rows[i] / total, 4) for i, name in enumerate(PHASES)},
        "cycles_per_iteration": round(total / fetches, 1),
        "live_lanes_per_fetch": round(rows[ROW_LANES] / fetches, 2),
        "catch_ups_per_iteration": round(rows[ROW_CATCH_UPS] / fetches, 5),
        "fetches": rows[ROW_FETCHES],
    }
