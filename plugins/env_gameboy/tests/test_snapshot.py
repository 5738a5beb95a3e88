"""Snapshots of one env and masked restores into a batch (fake state arrays)."""

from __future__ import annotations

import pytest
import torch

from gbx_gameboy.snapshot import MaskedRestore, SnapshotBank, capture, write_env
from gbx_gameboy.tiles import tile_envs


def devices() -> list[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def fake_state(n: int, device: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """The batch's layout: tiled per-env arrays (n envs, the last tile padded) and ``fb``."""
    g = torch.Generator().manual_seed(seed)

    def rows(lo: int, hi: int, k: int, dtype: torch.dtype) -> torch.Tensor:
        return tile_envs(torch.randint(lo, hi, (n, k), generator=g, dtype=dtype)).to(device)

    return {
        "mem": rows(0, 256, 300, torch.uint8),
        "st": rows(-2**31, 2**31 - 1, 45, torch.int32),
        "tm": rows(-2**62, 2**62, 4, torch.int64),
        "fb": torch.randint(0, 4, (n, 6, 8), generator=g, dtype=torch.uint8).to(device),
    }


def env_equal(state: dict[str, torch.Tensor], env: int, want: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(v, want[k]) for k, v in capture(state, env).items())


@pytest.mark.parametrize("device", devices())
def test_masked_restore_touches_only_flagged_envs(device: str) -> None:
    state = fake_state(7, device)
    golden = capture(state, 2)
    assert golden["mem"].shape == (300,) and golden["fb"].shape == (6, 8)
    for t in state.values():
        t.copy_(fake_state(7, device, seed=1)[next(k for k in state if state[k] is t)])
    before = {k: v.clone() for k, v in state.items()}
    restore = MaskedRestore(state, SnapshotBank.from_states([golden], device))
    mask = torch.tensor([True, False, False, True, False, False, True], device=device)
    restore.restore(mask)
    for e in range(7):
        if bool(mask[e]):
            assert env_equal(state, e, golden), e
        else:
            assert env_equal(state, e, capture(before, e)), e
    # An all-false mask changes nothing.
    snap = {k: v.clone() for k, v in state.items()}
    restore.restore(torch.zeros(7, dtype=torch.bool, device=device))
    assert all(torch.equal(state[k], snap[k]) for k in state)


@pytest.mark.parametrize("device", devices())
def test_random_bank_entries(device: str) -> None:
    bank_states = [capture(fake_state(3, device, seed=s), 0) for s in (10, 11, 12)]
    state = fake_state(64, device)
    restore = MaskedRestore(state, SnapshotBank.from_states(bank_states, device))
    restore.seed(5)
    mask = torch.arange(64, device=device) % 2 == 0
    before = {k: v.clone() for k, v in state.items()}
    restore.restore_random(mask)
    hits = set()
    for e in range(64):
        if e % 2 == 0:
            match = [i for i, s in enumerate(bank_states) if env_equal(state, e, s)]
            assert len(match) == 1
            hits.add(match[0])
        else:
            assert env_equal(state, e, capture(before, e))
    assert hits == {0, 1, 2}
    # Per-env explicit indices.
    idx = torch.full((64,), 1, dtype=torch.int32, device=device)
    restore.restore(torch.ones(64, dtype=torch.bool, device=device), idx)
    assert all(env_equal(state, e, bank_states[1]) for e in range(64))


def test_write_env_one_or_all_and_shape_errors() -> None:
    state = fake_state(4, "cpu")
    src = capture(fake_state(2, "cpu", seed=3), 1)
    write_env(state, 1, src)
    assert env_equal(state, 1, src) and not env_equal(state, 0, src)
    write_env(state, None, src)
    assert all(env_equal(state, e, src) for e in range(4))
    bad = dict(src)
    bad["mem"] = bad["mem"][:10]
    with pytest.raises(ValueError, match="'mem'"):
        write_env(state, 0, bad)
    with pytest.raises(ValueError, match="missing"):
        write_env(state, 0, {k: v for k, v in src.items() if k != "tm"})


def test_restore_allocates_no_torch_memory() -> None:
    from torch.profiler import ProfilerActivity, profile

    state = fake_state(16, "cpu")
    restore = MaskedRestore(state, SnapshotBank.from_states([capture(state, 0)], "cpu"))
    mask = torch.rand(16) < 0.5
    restore.restore_random(mask)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        restore.restore_random(mask)
        restore.restore(mask)
    assert sum(max(e.self_cpu_memory_usage, 0) for e in prof.key_averages()) == 0


@pytest.mark.parametrize("device", devices())
def test_split_draws_the_head_with_its_fraction(device: str) -> None:
    bank_states = [capture(fake_state(4, device, seed=s), 0) for s in (20, 21, 22, 23)]
    n = 2048
    state = fake_state(n, device)
    restore = MaskedRestore(state, SnapshotBank.from_states(bank_states, device))
    restore.seed(7)
    everyone = torch.ones(n, dtype=torch.bool, device=device)

    def entries() -> list[int]:
        # Which bank entry each env holds: the bank states differ in every array.
        return [next(i for i, s in enumerate(bank_states) if env_equal(state, e, s))
                for e in range(n)]

    for fraction in (0.0, 1.0):
        restore.split(1, fraction)
        restore.restore_random(everyone)
        got = entries()
        assert all((i == 0) == (fraction == 1.0) for i in got)
        if fraction == 0.0:
            assert set(got) == {1, 2, 3}
    restore.split(2, 0.25)
    restore.restore_random(everyone)
    got = entries()
    head = sum(i < 2 for i in got)
    # Binomial(2048, 0.25): mean 512, sd ~19.6; the bounds are over 5 sd wide.
    assert 410 < head < 614, head
    assert set(got) == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="head"):
        restore.split(4, 0.5)


def test_split_restore_allocates_no_torch_memory() -> None:
    from torch.profiler import ProfilerActivity, profile

    state = fake_state(16, "cpu")
    bank = SnapshotBank.from_states([capture(state, 0), capture(state, 1)], "cpu")
    restore = MaskedRestore(state, bank)
    restore.split(1, 0.5)
    mask = torch.rand(16) < 0.5
    restore.restore_random(mask)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        restore.restore_random(mask)
    assert sum(max(e.self_cpu_memory_usage, 0) for e in prof.key_averages()) == 0
