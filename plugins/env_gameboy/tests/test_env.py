"""The ``gameboy`` env end to end on a tiny assembled ROM."""

from __future__ import annotations

import logging
from pathlib import Path

import attrs
import pytest
import torch
from env_test_rom import write_env_test_rom

from gbx.api import Env
from gbx_gameboy.cartridge import RomError
from gbx_gameboy.env import GameBoyConfig, GameBoyEnv, register_envs
from gbx_gameboy.savestate import save_state
from gbx_gameboy.tiles import env_rows


@pytest.fixture(scope="module")
def rom(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_env_test_rom(tmp_path_factory.mktemp("rom"))


@pytest.fixture(scope="module")
def ready(rom: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A savestate 3 frames in: the ROM has set up its picture (frame 1 is blank)."""
    from gbx_gameboy.machine import GameBoyBatch

    batch = GameBoyBatch(rom, 1, "cpu")
    batch.run_frames(3, render_last=True)
    return save_state(batch, 0, tmp_path_factory.mktemp("state") / "ready.gbxstate")


def black_x(obs_frame: torch.Tensor) -> int:
    """Leftmost column of the black tile in a 144x160 frame."""
    return int(torch.nonzero(obs_frame[0] == 3)[0])


def make(rom: Path, state: Path, n: int = 3, device: str = "cpu", obs_size: str = "144x160",
         **kw) -> GameBoyEnv:
    cfg = GameBoyConfig(rom=str(rom), state=str(state), obs_size=obs_size, frames_per_step=6,
                        release_after_frames=3, action_codec="buttons8_noop", **kw)
    return GameBoyEnv(cfg, n, device, seed=1)


def test_protocol_shapes_and_buttons(rom: Path, ready: Path) -> None:
    env = make(rom, ready, stack_k=2, max_steps=50)
    assert isinstance(env, Env)
    assert env.num_actions == 8 and env.obs_shape == (2, 144, 160)
    obs = env.reset()
    assert obs.shape == (3, 2, 144, 160) and obs.dtype == torch.uint8
    assert all(black_x(obs[e, -1]) == 0 for e in range(3))
    ptr = obs.data_ptr()
    # NOOP, RIGHT (held 3 of 6 frames), A
    obs, rew, done, trunc, info = env.step(torch.tensor([7, 6, 0]))
    assert obs.data_ptr() == ptr
    assert rew.dtype == torch.float32 and rew.shape == (3,) and not rew.any()
    assert done.dtype == torch.bool and not done.any() and not trunc.any()
    assert not info["reset_mask"].any()
    xs = [black_x(obs[e, -1]) for e in range(3)]
    assert xs[0] == 0 and xs[1] == xs[2] == 3
    assert [black_x(obs[e, 0]) for e in range(3)] == [0, 0, 0]  # older frame of the stack


def test_truncation_autoresets_to_start(rom: Path, ready: Path) -> None:
    env = make(rom, ready, max_steps=2)
    first = env.reset().clone()
    env.step(torch.tensor([6, 6, 7]))
    obs, _, _, trunc, info = env.step(torch.tensor([6, 6, 7]))
    assert trunc.all() and info["reset_mask"].all()
    assert torch.equal(obs, first)  # the first observation of the next episode
    assert black_x(info["final_obs"][0, -1]) == 6  # the last one of the finished episode
    # The whole machine state is back at the start snapshot, not just the picture.
    state = env.batch.state_tensors()
    start = env.bank.state(0)
    assert torch.equal(env_rows(state["mem"], 0), start["mem"])
    assert torch.equal(env_rows(state["st"], 1), start["st"])
    obs, *_ = env.step(torch.tensor([6, 7, 7]))
    assert black_x(obs[0, -1]) == 3 and black_x(obs[1, -1]) == 0


def test_random_noop_start_desynchronises_envs(rom: Path, ready: Path) -> None:
    env = make(rom, ready, n=32, random_noop_max=4)
    env.reset()
    frames = env.batch.frame_count
    # The start state is 3 frames in; starts add 0..4 no-op frames.
    assert int(frames.min()) >= 3 and int(frames.max()) <= 7
    assert len(set(frames.tolist())) >= 3
    assert env.bank.size == 5


def test_random_start_from_a_bank_of_states(rom: Path, ready: Path, tmp_path: Path) -> None:
    env = make(rom, ready, n=1)
    env.reset()
    for _ in range(2):
        env.step(torch.tensor([6]))
    moved = save_state(env.batch, 0, tmp_path / "moved.gbxstate")
    env2 = make(rom, ready, n=48, start_states=(str(moved),))
    assert env2.bank.size == 2 and len(env2.meta()["start_states_sha256"]) == 1
    obs = env2.reset()
    xs = {black_x(obs[e, -1]) for e in range(48)}
    assert xs == {0, 6}


def test_start_from_gbx_savestate(rom: Path, ready: Path, tmp_path: Path) -> None:
    env = make(rom, ready, n=1)
    env.reset()
    env.step(torch.tensor([6]))
    env.step(torch.tensor([6]))
    path = save_state(env.batch, 0, tmp_path / "moved.gbxstate")
    env2 = make(rom, path, n=2)
    obs = env2.reset()
    assert black_x(obs[0, -1]) == 6 and black_x(obs[1, -1]) == 6
    meta = env2.meta()
    assert meta["state_sha256"] and meta["rom_sha256"] == env2.batch.cart.sha256
    assert meta["frames_per_step"] == 6 and meta["action_codec"] == "buttons8_noop"


def test_config_validation_and_warning(
    rom: Path, ready: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ValueError, match="release_after_frames"):
        GameBoyConfig(frames_per_step=4, release_after_frames=5)
    with pytest.raises(ValueError):
        GameBoyConfig(action_codec="buttons10")
    with pytest.raises(ValueError):
        GameBoyConfig(obs_size="84x84")
    with pytest.raises(RomError, match="ROM not found"):
        GameBoyEnv(GameBoyConfig(rom=str(rom) + ".missing"), 1, "cpu")
    for f in attrs.fields(GameBoyConfig):
        assert f.metadata.get("help"), f.name
    with caplog.at_level(logging.WARNING, logger="gbx_gameboy.env"):
        make(rom, ready, n=1)
    assert "frames_per_step=6" in caplog.text


def test_register_envs_hook() -> None:
    got = []
    register_envs(lambda name, factory, cfg, description="": got.append((name, cfg)))
    assert got == [("gameboy", GameBoyConfig)]


def test_observation_kernel_gives_the_same_steps_through_part_resets(
    rom: Path, ready: Path
) -> None:
    # The kernel (a CUDA env's default at 72x80) makes after a masked reset only the
    # restored envs' frames; here it runs on the CPU device against the torch maxima.
    from gbx_gameboy.obs import ObsExtractor

    envs = [make(rom, ready, n=8, obs_size="72x80", stack_k=2, max_steps=3,
                 stagger_start=True) for _ in range(2)]
    envs[1]._extract = ObsExtractor(envs[1].batch.fb, "72x80", envs[1]._frame, kernel=True)
    assert torch.equal(envs[0].reset(), envs[1].reset())
    gen = torch.Generator().manual_seed(0)
    part_resets = 0
    for _ in range(6):
        a = torch.randint(0, 8, (8,), generator=gen)
        (obs0, *_, info0), (obs1, *_, info1) = (e.step(a) for e in envs)
        assert torch.equal(obs0, obs1) and torch.equal(info0["final_obs"], info1["final_obs"])
        mask = info1["reset_mask"]
        part_resets += int(0 < int(mask.sum()) < 8)
    assert part_resets >= 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("obs_size", ["144x160", "72x80"])
def test_cuda_env_matches_cpu_and_allocates_nothing_per_step(
    rom: Path, ready: Path, obs_size: str
) -> None:
    envs = {d: make(rom, ready, n=8, device=d, obs_size=obs_size, stack_k=2, max_steps=3)
            for d in ("cpu", "cuda")}
    gen = torch.Generator().manual_seed(0)
    outs = {d: e.reset() for d, e in envs.items()}
    assert torch.equal(outs["cpu"], outs["cuda"].cpu())
    for e in envs.values():  # episodes out of step, so that resets restore some envs only
        e._steps.copy_(torch.arange(8) % 3)
    for i in range(7):
        a = torch.randint(0, 8, (8,), generator=gen)
        if i == 3:
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
        res = {d: e.step(a.to(e.device)) for d, e in envs.items()}
        obs_c, _, _, trunc_c, info_c = res["cpu"]
        obs_g, _, _, trunc_g, info_g = res["cuda"]
        assert torch.equal(obs_c, obs_g.cpu()) and torch.equal(trunc_c, trunc_g.cpu())
        assert torch.equal(info_c["final_obs"], info_g["final_obs"].cpu())
        assert 0 < int(trunc_g.sum()) < 8
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


def test_bad_start_state_is_a_one_line_user_error(tmp_path: Path) -> None:
    """A broken savestate stops `gbx run` with one line and exit 2, no crash bundle."""
    import subprocess
    import sys

    from gbx.plugins import load_plugins

    algos = load_plugins().registry.algorithms
    if "ppo" not in algos:
        pytest.skip("needs an algorithm plugin to drive `gbx run`")
    bad = tmp_path / "broken.state"
    bad.write_bytes(b"this is not a savestate")
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "gbx", "run", "--algo", "ppo", "--env", "gameboy", "--device",
         "cpu", "--steps", "8", "--run-dir", str(run_dir), "--set", f"env.state={bad}",
         "--set", "algo.num_envs=1", "--set", "algo.rollout_steps=8"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("gbx: error:")]
    assert len(errors) == 1 and "broken.state" in errors[0]
    assert not any((run_dir / "failures").iterdir())
