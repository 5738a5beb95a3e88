"""Timing both run-kernel variants on a batch's own launches (variant_timing.py), and a
batch that does so (``kernel="measure"``)."""

from __future__ import annotations

import pytest
import torch

from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.machine import GameBoyBatch
from gbx_gameboy.variant_timing import VariantClock, choose, fastest


def test_fastest_takes_the_lowest_median() -> None:
    assert fastest({"cuda": [3.0, 1.0, 3.0], "cpu": [2.0, 2.0, 0.5]}) == "cpu"
    assert fastest({"cuda": [1.0], "cpu": [1.0]}) == "cuda"  # a tie: the first named
    with pytest.raises(ValueError, match="at least one time"):
        fastest({"cuda": [1.0], "cpu": []})


def test_choose_switches_only_for_a_clear_gain() -> None:
    times = {"cuda": [1.0, 1.0, 1.0], "cpu": [0.95, 0.95, 0.95]}
    assert choose(times, "cuda", margin=0.10) == "cuda"  # 5% faster: keep what runs
    assert choose(times, "cuda", margin=0.04) == "cpu"
    assert choose({"cuda": [1.0], "cpu": [0.8]}, "cuda", margin=0.10) == "cpu"
    assert choose({"cuda": [0.8], "cpu": [1.0]}, "cuda", margin=0.10) == "cuda"


def _launch(clock: VariantClock, frames: int, speed: dict[str, float]) -> str:
    """One launch of ``frames`` frames, timed (at once) if the clock asks."""
    variant, ticket = clock.next_launch(frames)
    if ticket is not None:
        clock.add_time(ticket, frames * speed[variant])
    return variant


def test_rounds_take_turns_early_then_less_often_and_keep_the_faster() -> None:
    clock = VariantClock(("cuda", "cpu"), trials=2, settle=1, early_gaps=(6,),
                         retime_every=10, margin=0.1)
    speed = {"cuda": 2.0, "cpu": 1.0}  # seconds per frame
    ran = [_launch(clock, 24, speed) for _ in range(7)]
    # launch 0 settles; the round is launches 1-4; its last time makes the choice
    assert ran == ["cuda", "cuda", "cpu", "cuda", "cpu", "cpu", "cpu"]
    assert clock.choice == "cpu" and clock.rounds == 1
    assert clock.last_round == {"cuda": [2.0, 2.0], "cpu": [1.0, 1.0]}
    # launches of cycles are never timed, and do not take a round's turn
    assert clock.next_launch(0) == ("cpu", None)
    # the second round starts 6 launches after the first did (launch 7), the next ones
    # 10 after the one before (17, 27, ...); a round can change the choice back
    speed = {"cuda": 0.5, "cpu": 1.0}
    ran = [_launch(clock, 24, speed) for _ in range(20)]
    assert ran[:4] == ["cuda", "cpu", "cuda", "cpu"] and clock.rounds == 3
    assert ran[4:9] == ["cuda"] * 5 and ran[9:13] == ["cuda", "cpu", "cuda", "cpu"]
    assert clock.choice == "cuda"


def test_times_arriving_late_and_out_of_order_decide_when_the_last_is_in() -> None:
    clock = VariantClock(("cuda", "cpu"), trials=1, settle=0, early_gaps=(), retime_every=4)
    first = clock.next_launch(24)
    second = clock.next_launch(48)
    assert [first[0], second[0]] == ["cuda", "cpu"]
    assert clock.timing and clock.next_launch(24) == ("cuda", None)  # waiting: the plan's
    clock.add_time(second[1], 48 * 1.0)  # type: ignore[arg-type]
    assert clock.timing and clock.choice == "cuda" and clock.rounds == 0
    clock.add_time(first[1], 24 * 3.0)  # type: ignore[arg-type]
    assert not clock.timing and clock.choice == "cpu" and clock.rounds == 1
    # a round that is due while times are still out starts once they are in
    clock.next_launch(24)
    assert clock.next_launch(24)[1] is not None


def test_a_held_clock_starts_no_round_until_released() -> None:
    clock = VariantClock(("cuda", "cpu"), trials=1, settle=0, early_gaps=(), retime_every=4)
    speed = {"cuda": 1.0, "cpu": 2.0}
    assert [_launch(clock, 24, speed) for _ in range(2)] == ["cuda", "cpu"]
    assert clock.rounds == 1
    clock.hold(True)
    # the next round falls due at launch 4; held, launches 2-7 run the choice, untimed
    for _ in range(6):
        assert clock.next_launch(24) == ("cuda", None)
    clock.hold(False)
    # released: the round that fell due starts at once
    first = clock.next_launch(24)
    assert first[0] == "cuda" and first[1] is not None


def test_a_round_under_way_runs_on_while_held() -> None:
    clock = VariantClock(("cuda", "cpu"), trials=1, settle=0, early_gaps=(), retime_every=4)
    first = clock.next_launch(24)
    clock.hold(True)
    second = clock.next_launch(24)
    assert first[1] is not None and second == ("cpu", second[1]) and second[1] is not None
    clock.add_time(first[1], 24.0)  # type: ignore[arg-type]
    clock.add_time(second[1], 48.0)  # type: ignore[arg-type]
    assert clock.rounds == 1 and not clock.timing


def test_clock_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="two or more different variants"):
        VariantClock(("cuda", "cuda"))
    with pytest.raises(ValueError, match="at least one round of trials"):
        VariantClock(("cuda", "cpu"), trials=3, early_gaps=(5,))
    with pytest.raises(ValueError, match="margin"):
        VariantClock(("cuda", "cpu"), margin=1.0)


def _steps(batch: GameBoyBatch, steps: int) -> dict[str, torch.Tensor]:
    batch.run_frames(20)
    gen = torch.Generator().manual_seed(3)
    for _ in range(steps):
        buttons = torch.randint(0, 256, (batch.num_envs,), generator=gen, dtype=torch.int32)
        batch.step_frames(buttons.to(batch.state_tensors()["fb"].device), 6, release_after=3,
                          render_last=True)
    return {k: v.clone() for k, v in batch.state_tensors().items()}


def test_a_measured_batch_switches_variants_and_keeps_every_state_bit() -> None:
    # A batch that times both variants runs launches on each (the CUDA variant's drawn
    # lines, deferred to the kernel after its launch, included), ends exactly where a
    # batch of one variant does, and then runs the one its round timed as the faster.
    measured = GameBoyBatch(str(DEFAULT_ROM), 6, "cpu", threads=1, kernel="measure")
    assert measured.kernel == "cpu" and measured.variant_times == {}
    state = _steps(measured, 9)
    times = measured.variant_times
    assert set(times) == {"cpu", "cuda"} and all(t > 0 for t in times.values())
    # the plan's variant (the CPU one for a small batch) unless the other was clearly faster
    assert measured.kernel == choose({v: [t] for v, t in times.items()}, "cpu")
    plain = _steps(GameBoyBatch(str(DEFAULT_ROM), 6, "cpu", threads=1, kernel="cpu"), 9)
    for name, tensor in state.items():
        assert torch.equal(tensor, plain[name]), f"{name} differs"
    assert len(torch.unique(state["fb"])) >= 3, "the compared frame is blank"


def test_kernel_names_are_checked() -> None:
    with pytest.raises(ValueError, match="auto, cpu, cuda, measure"):
        GameBoyBatch(str(DEFAULT_ROM), 1, "cpu", kernel="fastest")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_a_measured_batch_on_a_gpu_times_its_launches_by_events() -> None:
    measured = GameBoyBatch(str(DEFAULT_ROM), 8, "cuda", kernel="measure")
    state = _steps(measured, 9)
    measured.synchronize()
    measured.step_frames(torch.zeros(8, dtype=torch.int32, device="cuda"), 1, release_after=0)
    times = measured.variant_times  # the round's last times, taken at the launch after it
    assert set(times) == {"cpu", "cuda"} and all(t > 0 for t in times.values())
    # the plan's variant (the CPU one for a small batch) unless the other was clearly faster
    assert measured.kernel == choose({v: [t] for v, t in times.items()}, "cpu")
    plain = _steps(GameBoyBatch(str(DEFAULT_ROM), 8, "cpu", threads=1, kernel="cpu"), 9)
    for name, tensor in state.items():
        assert torch.equal(tensor.cpu(), plain[name]), f"{name} differs"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_auto_times_both_variants_where_the_launch_plan_picks_the_cuda_one() -> None:
    from gbx_gameboy.machine import CPU_VARIANT_MAX_WARP_THREADS, RESIDENT_WARPS_PER_SM

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n = 2 * CPU_VARIANT_MAX_WARP_THREADS * RESIDENT_WARPS_PER_SM * sms  # 8 per warp
    batch = GameBoyBatch(str(DEFAULT_ROM), n, "cuda")
    assert batch.block_threads > CPU_VARIANT_MAX_WARP_THREADS and batch.kernel == "cuda"
    _steps(batch, 9)
    batch.synchronize()
    batch.step_frames(torch.zeros(n, dtype=torch.int32, device="cuda"), 1, release_after=0)
    assert set(batch.variant_times) == {"cpu", "cuda"}
    small = GameBoyBatch(str(DEFAULT_ROM), 64, "cuda")  # the CPU variant's plan: no timing
    _steps(small, 9)
    assert small.kernel == "cpu" and small.variant_times == {}
