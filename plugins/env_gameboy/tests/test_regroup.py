"""Envs sorted into warps by their last launch's work (regroup.py): the moves between env
order and slot order, and a regrouping batch against one that does not regroup."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gbx_gameboy import layout as L
from gbx_gameboy.bench import BUTTON_TABLE
from gbx_gameboy.cartridge import parse_cartridge
from gbx_gameboy.env import DEFAULT_ROM
from gbx_gameboy.machine import GameBoyBatch, batch_bytes, regroup_bytes, regroups
from gbx_gameboy.regroup import byte_rows_to_tiles, byte_tiles_to_rows, gather_tiled
from gbx_gameboy.warp_setup import import_warp

wp = import_warp()

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _env_rows(tiled: np.ndarray) -> np.ndarray:
    """``(tiles, rows, TILE)`` as ``(envs, rows)``."""
    return tiled.transpose(0, 2, 1).reshape(-1, tiled.shape[1])


def _tiled(rows: np.ndarray) -> np.ndarray:
    return rows.reshape(-1, L.TILE, rows.shape[1]).transpose(0, 2, 1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("dtype", "np_dtype", "rows"), [
    (wp.uint8, np.uint8, 1), (wp.uint8, np.uint8, 70), (wp.int32, np.int32, 48),
    (wp.int64, np.int64, 4)])
def test_tiled_arrays_gather_into_any_order(device: str, dtype: object, np_dtype: type,
                                            rows: int) -> None:
    rng = np.random.default_rng(rows)
    tiles = 3
    info = np.iinfo(np_dtype)
    x = rng.integers(info.min, info.max, (tiles, rows, L.TILE), dtype=np_dtype)
    order = rng.permutation(tiles * L.TILE).astype(np.int32)
    src = wp.array(x, dtype=dtype, device=device)
    out = wp.zeros_like(src)
    wp.launch(gather_tiled, dim=(rows, tiles * L.TILE),
              inputs=[src, wp.array(order, device=device), out], device=device)
    assert np.array_equal(out.numpy(), _tiled(_env_rows(x)[order]))


@pytest.mark.parametrize("device", DEVICES)
def test_byte_tiles_move_as_words(device: str) -> None:
    rng = np.random.default_rng(7)
    tiles, rows = 2, 36
    x = rng.integers(0, 256, (tiles, rows, L.TILE), dtype=np.uint8)
    order = rng.permutation(tiles * L.TILE).astype(np.int32)
    words = wp.array(x.view(np.uint32), dtype=wp.uint32, device=device)
    via = wp.zeros((tiles * L.TILE, rows // 4), dtype=wp.uint32, device=device)
    out = wp.zeros_like(words)
    dim = (tiles, rows // 4, L.TILE // 4)
    wp.launch(byte_tiles_to_rows, dim=dim, inputs=[words, via], device=device)
    assert np.array_equal(via.numpy().view(np.uint8), _env_rows(x))
    wp.launch(byte_rows_to_tiles, dim=dim, inputs=[via, wp.array(order, device=device), out],
              device=device)
    assert np.array_equal(out.numpy().view(np.uint8), _tiled(_env_rows(x)[order]))


def _play(batch: GameBoyBatch, steps: int, seed: int) -> list[np.ndarray]:
    """START, then random buttons step by step (every other step drawn), a run of frames
    without buttons and one of cycles; returns the slot orders the launches ran in."""
    n = batch.num_envs
    dev = "cuda" if batch.device.startswith("cuda") else "cpu"
    gen = torch.Generator().manual_seed(seed)
    table = torch.tensor(BUTTON_TABLE, dtype=torch.int32)
    orders = []
    batch.run_frames(30)
    batch.step_frames(torch.full((n,), 0x08, dtype=torch.int32, device=dev), 24,
                      release_after=5)
    for i in range(steps):
        buttons = table[torch.randint(0, len(table), (n,), generator=gen)].to(dev)
        batch.step_frames(buttons, 24, release_after=12, render_last=i % 2 == 0)
        if batch.regroup:
            orders.append(batch._regrouper.order.numpy().copy())
    batch.run_frames(3, render_last=True)
    batch.run_cycles(10_000)
    return orders


@pytest.mark.parametrize("device", DEVICES)
def test_a_regrouping_batch_leaves_every_env_as_it_would_be(device: str) -> None:
    n = 70  # a partial last tile
    plain = GameBoyBatch(DEFAULT_ROM, n, device, regroup=False)
    sorted_ = GameBoyBatch(DEFAULT_ROM, n, device, regroup=True)
    assert not plain.regroup and sorted_.regroup
    _play(plain, 8, seed=3)
    orders = _play(sorted_, 8, seed=3)
    # the launches after the first ran in an order of their own, sorted by the work of
    # the launch before
    assert all(sorted(o) == list(range(n)) for o in orders)
    assert any(not np.array_equal(o, np.arange(n)) for o in orders[1:])
    want, got = plain.state_tensors(), sorted_.state_tensors()
    for name in want:
        assert torch.equal(want[name], got[name]), name
    assert torch.equal(plain.instruction_count, sorted_.instruction_count)


def test_the_sort_follows_the_instructions_of_the_last_launch() -> None:
    n = 40
    batch = GameBoyBatch(DEFAULT_ROM, n, "cpu", regroup=True)
    _play(batch, 3, seed=5)
    before = batch.instruction_count.clone()
    batch.run_frames(24)
    ran = (batch.instruction_count - before).numpy()
    keys = batch._regrouper.keys.numpy()
    assert np.array_equal(keys, ran)
    batch.run_frames(1)
    order = batch._regrouper.order.numpy()
    # a stable sort: by the work of the launch before, then by env
    assert np.array_equal(order, np.lexsort((np.arange(n), ran)))


def test_only_a_gpu_batch_of_full_warps_regroups_by_default() -> None:
    assert GameBoyBatch(DEFAULT_ROM, 64, "cpu").regroup is False
    # an H200's 132 SMs hold 1,056 warps: 8 or more Game Boys to a warp from 4,225 envs
    assert not regroups(1, 132) and not regroups(4_224, 132) and regroups(4_225, 132)
    assert regroups(16_384, 132) and regroups(65_536, 132)
    assert not regroups(65_536, None)  # the CPU device


def test_a_regrouping_batch_counts_its_copy() -> None:
    cart = parse_cartridge(str(DEFAULT_ROM))
    plain = batch_bytes(cart, 1_024)
    assert batch_bytes(cart, 1_024, regroup=True) == (
        2 * plain - 2 * (len(cart.data) * 33 + 32) + len(cart.data) * 33 + 32
        + 1_024 * regroup_bytes(cart))


@pytest.mark.parametrize(("choice", "expected"), [("on", True), ("auto", False)])
def test_the_env_regroups_as_env_regroup_says(choice: str, expected: bool) -> None:
    from gbx_gameboy.env import GameBoyConfig, GameBoyEnv

    env = GameBoyEnv(GameBoyConfig(regroup=choice), 40, "cpu", seed=1)
    env.reset()
    env.step(torch.randint(0, env.num_actions, (40,)))
    assert env.batch.regroup is expected and env.meta()["regroup"] is expected
    with pytest.raises(ValueError, match="regroup"):
        GameBoyConfig(regroup="sometimes")


def test_the_emulator_benchmark_regroups_on_request() -> None:
    import json

    from click.testing import CliRunner

    from gbx_gameboy.bench import emulator_bench

    args = ["--rom", str(DEFAULT_ROM), "--envs", "40", "--frames", "24", "--warmup-steps", "2"]
    for choice, expected in (("on", True), ("off", False), ("auto", False)):
        res = CliRunner().invoke(emulator_bench, [*args, "--regroup", choice])
        assert res.exit_code == 0, res.output
        assert json.loads(res.output.splitlines()[-1])["regroup"] is expected
    res = CliRunner().invoke(emulator_bench, ["--emulator", "pyboy", "--regroup", "on"])
    assert res.exit_code != 0 and "--regroup" in res.output


def test_a_batch_of_one_warp_or_small_warps_keeps_env_order() -> None:
    from gbx_gameboy.machine import regroups_with

    assert regroups_with(16_384, 16) and regroups_with(33, 32)
    assert not regroups_with(32, 32) and not regroups_with(4_096, 4)
    assert not regroups_with(65_536, None)
