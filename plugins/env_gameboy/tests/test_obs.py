"""Observation extraction, 2-bit packing and in-place frame stacks."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from gbx_gameboy.obs import (
    FrameStack,
    ObsExtractor,
    downsample_max2x2,
    extract_obs,
    obs_hw,
    pack_shades,
    unpack_shades,
)


def devices() -> list[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def allocated_bytes(fn) -> int:
    """Bytes the torch profiler saw allocated while running ``fn``."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return sum(max(e.self_cpu_memory_usage, 0) for e in prof.key_averages())


@pytest.mark.parametrize("device", devices())
def test_downsample_is_2x2_max_and_keeps_single_pixels(device: str) -> None:
    fb = torch.zeros((2, 144, 160), dtype=torch.uint8, device=device)
    fb[0, 37, 91] = 3  # a 1-pixel dark feature at odd coordinates
    fb[1] = torch.randint(0, 4, (144, 160), device=device, dtype=torch.uint8)
    out = torch.empty((2, 72, 80), dtype=torch.uint8, device=device)
    downsample_max2x2(fb, out)
    assert out[0, 18, 45] == 3 and int(out[0].sum()) == 3
    want = torch.tensor(
        [[max(int(fb[1, 2 * y + a, 2 * x + b]) for a in (0, 1) for b in (0, 1)) for x in range(80)]
         for y in range(72)], dtype=torch.uint8)
    assert torch.equal(out[1].cpu(), want)
    full = torch.empty((2, 144, 160), dtype=torch.uint8, device=device)
    assert torch.equal(extract_obs(fb, "144x160", full), fb)
    assert obs_hw("72x80") == (72, 80)
    with pytest.raises(ValueError, match="72x80"):
        obs_hw("84x84")


@pytest.mark.parametrize("device", devices())
def test_pack_unpack_round_trip(device: str) -> None:
    x = torch.randint(0, 4, (3, 5, 72, 80), dtype=torch.uint8, device=device)
    p = pack_shades(x)
    assert p.shape == (3, 5, 72, 20) and p.dtype == torch.uint8
    assert torch.equal(unpack_shades(p), x)
    # Bit layout: pixel j of a group of four sits in bits 2j..2j+1.
    one = torch.tensor([[1, 2, 3, 0]], dtype=torch.uint8)
    assert pack_shades(one).item() == 1 | 2 << 2 | 3 << 4
    with pytest.raises(ValueError, match="divisible by 4"):
        pack_shades(torch.zeros(3, 6, dtype=torch.uint8))


@pytest.mark.parametrize("device", devices())
def test_frame_stack_shifts_in_place(device: str) -> None:
    fs = FrameStack(3, 4, (6, 8), torch.device(device))
    ptr = fs.buffer.data_ptr()
    frames = [torch.full((3, 6, 8), i, dtype=torch.uint8, device=device) for i in range(6)]
    fs.fill(frames[0])
    for f in frames[1:]:
        out = fs.push(f)
    assert out.data_ptr() == ptr
    assert fs.buffer[:, :, 0, 0].tolist() == [[2, 3, 4, 5]] * 3
    mask = torch.tensor([False, True, False], device=device)
    fs.push(frames[1], reset_mask=mask)
    assert fs.buffer[:, :, 0, 0].tolist() == [[3, 4, 5, 1], [1, 1, 1, 1], [3, 4, 5, 1]]
    assert fs.buffer.data_ptr() == ptr


def test_frame_stack_k1_is_a_plain_copy() -> None:
    fs = FrameStack(2, 1, (4, 4), torch.device("cpu"))
    f = torch.full((2, 4, 4), 2, dtype=torch.uint8)
    out = fs.push(f, reset_mask=torch.tensor([True, False]))
    assert out.data_ptr() == fs.buffer.data_ptr() != f.data_ptr()
    assert (out == 2).all() and out.shape == (2, 1, 4, 4)


def test_push_and_downsample_allocate_nothing() -> None:
    fs = FrameStack(4, 4, (72, 80), torch.device("cpu"))
    fb = torch.randint(0, 4, (4, 144, 160), dtype=torch.uint8)
    small = torch.empty((4, 72, 80), dtype=torch.uint8)
    mask = torch.tensor([True, False, True, False])

    def step() -> None:
        downsample_max2x2(fb, small)
        fs.push(small, reset_mask=mask)

    step()  # warm-up
    # The probe can see an allocation: an out-of-place op is counted.
    assert allocated_bytes(lambda: fb + 1) > 0
    assert allocated_bytes(step) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_push_allocates_nothing_on_cuda() -> None:
    fs = FrameStack(64, 4, (72, 80), torch.device("cuda"))
    fb = torch.randint(0, 4, (64, 144, 160), dtype=torch.uint8, device="cuda")
    small = torch.empty((64, 72, 80), dtype=torch.uint8, device="cuda")
    mask = torch.rand(64, device="cuda") < 0.5
    downsample_max2x2(fb, small)
    fs.push(small, reset_mask=mask)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(10):
        downsample_max2x2(fb, small)
        fs.push(small, reset_mask=mask)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("top", [4, 32])
def test_obs_kernel_makes_the_torch_maxima(device: str, top: int) -> None:
    # Shade indices (0-3), and every byte below 32 (the kernel's bound).
    gen = torch.Generator().manual_seed(top)
    for n in (1, 3, 37):
        fb = torch.randint(0, top, (n, 144, 160), dtype=torch.uint8, generator=gen).to(device)
        out = torch.full((n, 72, 80), 99, dtype=torch.uint8, device=device)
        got = ObsExtractor(fb, "72x80", out, kernel=True)()
        assert got.data_ptr() == out.data_ptr()
        assert torch.equal(got, extract_obs(fb, "72x80", torch.empty_like(out)))


@pytest.mark.parametrize("device", devices())
def test_obs_kernel_with_a_mask_makes_only_the_flagged_frames(device: str) -> None:
    gen = torch.Generator().manual_seed(5)
    n = 40
    fb = torch.randint(0, 4, (n, 144, 160), dtype=torch.uint8, generator=gen).to(device)
    out = torch.empty((n, 72, 80), dtype=torch.uint8, device=device)
    extract = ObsExtractor(fb, "72x80", out, kernel=True)
    old = extract().clone()
    fb.copy_(torch.randint(0, 4, (n, 144, 160), dtype=torch.uint8, generator=gen))
    mask = (torch.arange(n) % 3 == 1).to(device)
    extract(mask)
    new = extract_obs(fb, "72x80", torch.empty_like(out))
    assert torch.equal(out[mask], new[mask]) and torch.equal(out[~mask], old[~mask])
    assert not torch.equal(out, new)  # the unflagged frames were left as they were
    extract(torch.zeros(n, dtype=torch.bool, device=device))
    assert torch.equal(out[~mask], old[~mask])


def test_obs_extractor_without_the_kernel_makes_every_frame() -> None:
    fb = torch.randint(0, 4, (4, 144, 160), dtype=torch.uint8)
    out = torch.zeros((4, 72, 80), dtype=torch.uint8)
    extract = ObsExtractor(fb, "72x80", out)  # the CPU device: the torch maxima
    extract(torch.tensor([True, False, False, False]))
    assert torch.equal(out, extract_obs(fb, "72x80", torch.empty_like(out)))
    # A mask that flags no env: no screen changed, so nothing is made.
    fb.fill_(3)
    before = out.clone()
    extract(torch.zeros(4, dtype=torch.bool))
    assert torch.equal(out, before)
    extract()
    assert bool((out == 3).all())
    none, one = torch.zeros(4, dtype=torch.bool), torch.tensor([False, True, False, False])
    assert allocated_bytes(lambda: (extract(none), extract(one), extract())) == 0
    full = torch.zeros((4, 144, 160), dtype=torch.uint8)
    assert torch.equal(ObsExtractor(fb, "144x160", full)(), fb)


def test_obs_extractor_refuses_what_it_cannot_make() -> None:
    fb = torch.zeros((2, 144, 160), dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"out must have shape \(2, 72, 80\)"):
        ObsExtractor(fb, "72x80", torch.zeros((2, 80, 72), dtype=torch.uint8))
    with pytest.raises(ValueError, match="kernel makes 72x80"):
        ObsExtractor(fb, "144x160", torch.zeros((2, 144, 160), dtype=torch.uint8), kernel=True)
