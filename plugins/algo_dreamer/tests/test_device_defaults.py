"""Device-dependent defaults of dreamer_v3 (the auto settings) and checkpoints that do not
grow with the replay unless ``algo.checkpoint_replay`` asks for it."""

from __future__ import annotations

import io
import json

import attrs
import pytest
import torch
from click.testing import CliRunner
from fakes import dot_context, load_state, small_cfg

from gbx.api import DeviceDefaults
from gbx.cli import build_cli
from gbx.plugins import get_host
from gbx_algo_dreamer.config import AUTO_FIELDS, DEVICE_PRESETS, DreamerConfig
from gbx_algo_dreamer.trainer import DreamerTrainer


def test_auto_settings_take_the_values_of_the_device():
    cfg = DreamerConfig()
    assert isinstance(cfg, DeviceDefaults) and not cfg.resolved
    for kind, device in (("cpu", torch.device("cpu")), ("cuda", torch.device("cuda", 1))):
        resolved = cfg.for_device(device)
        assert resolved.resolved
        assert {f: getattr(resolved, f) for f in AUTO_FIELDS} == attrs.asdict(
            DEVICE_PRESETS[kind])
        assert resolved.for_device(device) == resolved  # idempotent
    cpu = cfg.for_device("cpu")
    assert (cpu.size, cpu.replay_capacity, cpu.batch_size) == ("tiny", 65_536, 8)
    cuda = cfg.for_device("cuda")  # the paper's settings
    assert (cuda.size, cuda.batch_size, cuda.batch_length, cuda.train_ratio) == ("S", 16, 64, 32)
    assert (cuda.replay_capacity, cuda.model_lr, cuda.actor_lr, cuda.gamma) == (
        1_000_000, 1e-4, 3e-5, 0.997)
    assert cpu.gamma == 0.95  # a short run's horizon (docs/benchmarks.md)
    assert (cuda.matmul_precision, cpu.matmul_precision) == ("high", "highest")  # TF32 on CUDA
    # compiled updates with fused steps on CUDA; the CPU's compilation outlasts a short run
    assert (cuda.compile, cuda.fuse_steps, cpu.compile, cpu.fuse_steps) == (True, True,
                                                                           False, False)
    # bfloat16 convolutions with cuDNN's timed algorithm choice on CUDA
    assert (cuda.conv_dtype, cuda.cudnn_benchmark) == ("bfloat16", True)
    assert (cpu.conv_dtype, cpu.cudnn_benchmark) == ("float32", False)


def test_fused_steps_follow_compile_where_it_is_turned_off():
    off = DreamerConfig(compile=False).for_device("cuda")
    assert (off.compile, off.fuse_steps) == (False, False)
    on = DreamerConfig(compile=True).for_device("cpu")  # fusing is a CUDA setting
    assert (on.compile, on.fuse_steps) == (True, False)
    with pytest.raises(ValueError, match="algo.fuse_steps .* algo.compile=true"):
        DreamerConfig(compile=False, fuse_steps=True).for_device("cuda")


def test_an_explicit_value_always_wins():
    cfg = DreamerConfig(size="XS", train_ratio=8.0, replay_capacity=4096,
                        matmul_precision="highest")
    for device in ("cpu", "cuda"):
        resolved = cfg.for_device(device)
        assert (resolved.size, resolved.train_ratio, resolved.replay_capacity,
                resolved.matmul_precision) == ("XS", 8.0, 4096, "highest")
        assert resolved.batch_length == DEVICE_PRESETS[device].batch_length


def test_a_config_that_fails_on_one_device_is_refused_when_built():
    # 65,536 replay steps over 8,192 envs leave 8 per stream, fewer than 16 + 2 on the CPU
    with pytest.raises(ValueError, match="with the cpu defaults"):
        DreamerConfig(num_envs=8192)


def test_explain_lists_the_value_of_each_device():
    res = CliRunner().invoke(build_cli(get_host()), ["config", "--algo", "dreamer_v3",
                                                     "--env", "toy", "--explain"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("algo.size "))
    assert "default 'auto'" in line and "S on CUDA, tiny on the CPU" in line
    line = next(x for x in res.output.splitlines() if x.startswith("algo.replay_capacity "))
    assert "1000000 on CUDA, 65536 on the CPU" in line
    line = next(x for x in res.output.splitlines() if x.startswith("algo.actor_lr "))
    assert "3e-05 on CUDA, 0.0005 on the CPU" in line
    line = next(x for x in res.output.splitlines() if x.startswith("algo.gamma "))
    assert "0.997 on CUDA, 0.95 on the CPU" in line
    assert any(x.startswith("algo.checkpoint_replay ") for x in res.output.splitlines())


def test_the_run_trains_with_and_saves_the_resolved_values(tmp_path):
    """`gbx run` resolves the auto settings for its device: config.json and the checkpoint
    hold the values it trained with; an explicit --set stays."""
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(build_cli(get_host()), [
        "run", "--algo", "dreamer_v3", "--env", "toy", "--device", "cpu", "--steps", "64",
        "--observer", "print", "--run-dir", str(run_dir), "--set", "algo.num_envs=4",
        "--set", "algo.batch_size=2", "--set", "algo.learning_starts=32",
        "--set", "algo.train_ratio=8", "--set", "run.final_eval_episodes=0",
        "--set", "env.height=24", "--set", "env.width=32"])
    assert res.exit_code == 0, res.output
    algo = json.loads((run_dir / "config.json").read_text())["algo"]
    cpu = DEVICE_PRESETS["cpu"]
    assert (algo["size"], algo["batch_length"], algo["replay_capacity"]) == (
        cpu.size, cpu.batch_length, cpu.replay_capacity)
    assert (algo["batch_size"], algo["train_ratio"]) == (2, 8.0)


def _bytes(state: dict) -> int:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.tell()


def _trained_state(tmp_path, **kw) -> dict:
    tr = DreamerTrainer(small_cfg(**kw), dot_context(tmp_path))
    tr.ctx.run(tr)
    return load_state(tr.ctx.checkpoints[-1])


def test_checkpoint_size_does_not_grow_with_the_replay_unless_asked(tmp_path):
    small = _bytes(_trained_state(tmp_path / "a", replay_capacity=512))
    large = _bytes(_trained_state(tmp_path / "b", replay_capacity=16_384))
    assert large == pytest.approx(small, abs=4096)  # the same models, counters and RNGs
    kept = _trained_state(tmp_path / "c", replay_capacity=16_384, checkpoint_replay=True)
    # 16,384 slots of 16x16 frames packed 4 pixels per byte, plus action/reward/flags
    assert _bytes(kept) - large > 16_384 * (16 * 16 // 4 + 8) * 0.95
    assert kept["replay"] is not None


def test_resume_without_the_replay_refills_it_then_trains_again(tmp_path):
    state = _trained_state(tmp_path / "a")
    assert state["replay"] is None
    b = DreamerTrainer(small_cfg(total_env_steps=48 + 48), dot_context(tmp_path / "b"))
    b.load_state_dict(state)
    assert b.env_steps == 48 and b.opt_steps == state["counters"]["opt_steps"] > 0
    # only the live frame of every stream is in the new replay: no update until it refills
    assert b.replay.committed.tolist() == [1] * 4 and not b.ready()
    opt0 = b.opt_steps
    for _ in range(7):  # 28 env steps: still short of learning_starts (32)
        b.engine.advance(1)
    assert b.opt_steps == opt0
    b.train()
    assert b.env_steps == 96 and b.opt_steps > opt0


def test_the_benchmark_times_a_config_with_auto_settings():
    """`gbx bench dreamer` leaves the learning rates to the device: it reads the trainer's
    resolved config."""
    from gbx_algo_dreamer.bench import run_compile_variants

    cfg = DreamerConfig(size="tiny", num_envs=4, batch_size=2, batch_length=8,
                        replay_capacity=512, learning_starts=32)
    assert not cfg.resolved
    records = run_compile_variants(torch.device("cpu"), "toy", cfg, 1, [False])
    by = {r["metric"]: r for r in records}
    assert by["train_steps_per_s"]["value"] > 0 and by["train_steps_per_s"]["compile"] is False
    assert by["env_sps_at_train_ratio"]["train_ratio"] == DEVICE_PRESETS["cpu"].train_ratio


def test_a_cpu_run_sets_the_threads_it_is_given(tmp_path):
    """algo.cpu_threads: one thread by default on the CPU (its preset), any explicit count
    wins, 0 leaves torch's own setting."""
    assert DreamerConfig().for_device("cpu").cpu_threads == 1
    assert DreamerConfig().for_device("cuda").cpu_threads == 0
    torch.set_num_threads(3)
    DreamerTrainer(small_cfg(cpu_threads=0), dot_context(tmp_path / "a"))
    assert torch.get_num_threads() == 3
    DreamerTrainer(small_cfg(cpu_threads=2), dot_context(tmp_path / "b"))
    assert torch.get_num_threads() == 2
    DreamerTrainer(small_cfg(), dot_context(tmp_path / "c"))
    assert torch.get_num_threads() == 1
