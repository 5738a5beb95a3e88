"""``algo.compile``: the compiled posterior scan and imagination rollout give the eager
losses and gradients on a fixed batch (CPU: torch.compile; CUDA: captured CUDA graphs)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch

from gbx_algo_dreamer.behavior import Behavior
from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.graphs import CompiledLoops, _compile
from gbx_algo_dreamer.math_ops import ReturnNorm, make_bins
from gbx_algo_dreamer.world_model import Latent, WorldModel

# float32 programs that fuse or reorder reductions agree to about 1e-6 relative; the bound
# leaves room for the sums over 32x32 latents and 72x80 pixels
RTOL, ATOL = 1e-4, 1e-5
# Fused steps (inductor kernels of the whole step on CUDA) sum the step's gradients in their
# own order: on an H200 the losses kept the bound above and 0.5% of the world model's
# gradient elements differed by up to 7.9e-5 absolute.
FUSED_GRAD_ATOL = 2e-4
OBS, ACTIONS, B, T = (1, 16, 16), 5, 3, 6


def _setup(device: torch.device, conv_dtype: torch.dtype = torch.float32
           ) -> tuple[WorldModel, Behavior, dict[str, torch.Tensor]]:
    cfg = DreamerConfig(size="tiny", horizon=5, batch_size=B, batch_length=T,
                        train_ratio=8.0, replay_capacity=64, num_envs=2).for_device(device)
    torch.manual_seed(3)
    wm = WorldModel(OBS, ACTIONS, cfg.preset(), cfg.unimix, cfg.bins,
                    conv_dtype).to(device)
    behavior = Behavior(wm.rssm.feat_dim, ACTIONS, cfg).to(device)
    with torch.no_grad():  # the zero-initialised heads would hide differences
        for head in (wm.reward, behavior.critic):
            head.out.weight.normal_(0.0, 0.1)
    g = torch.Generator().manual_seed(11)
    batch = {
        "obs": torch.randint(0, 4, (B, T, *OBS), generator=g).to(torch.uint8),
        "actions": torch.randint(0, ACTIONS, (B, T), generator=g),
        "rewards": torch.randn(B, T, generator=g),
        "is_first": torch.rand(B, T, generator=g) < 0.2,
        "is_terminal": torch.rand(B, T, generator=g) < 0.1,
    }
    batch["is_first"][:, 0] = True
    return wm, behavior, {k: v.to(device) for k, v in batch.items()}


def _losses(wm: WorldModel, behavior: Behavior, batch: dict[str, torch.Tensor],
            loops: CompiledLoops | None, device: torch.device) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device).manual_seed(5)
    bins = make_bins(wm.reward.out.out_features).to(device)
    wm.zero_grad(set_to_none=True)
    behavior.zero_grad(set_to_none=True)
    out = wm.loss(batch["obs"], batch["actions"], batch["rewards"], batch["is_first"],
                  batch["is_terminal"], bins, kl_dyn=0.5, kl_rep=0.1, free_bits=1.0,
                  generator=gen, observe=loops.observe if loops else None,
                  embed=loops.embed if loops else None, terms=loops.terms if loops else None)
    out.loss.backward()
    start = out.post.detach()
    flat = Latent(start.deter.reshape(B * T, -1), start.stoch.reshape(B * T,
                                                                      *start.stoch.shape[2:]))
    beh = behavior.loss(wm, flat, (~batch["is_terminal"]).reshape(-1).float(), bins,
                        ReturnNorm(device, 0.99, 1.0), gen,
                        imagine=loops.imagine if loops else None,
                        targets=loops.targets if loops else None,
                        terms=loops.policy_terms if loops else None)
    (beh.actor_loss + beh.critic_loss).backward()
    result = {k: v.detach().clone() for k, v in {**out.scalars, **beh.scalars}.items()}
    result["loss_actor"] = beh.actor_loss.detach().clone()
    result["loss_critic"] = beh.critic_loss.detach().clone()
    result["grad_world_model"] = torch.cat([p.grad.reshape(-1) for p in wm.parameters()
                                            if p.grad is not None])
    result["grad_actor"] = torch.cat([p.grad.reshape(-1) for p in behavior.actor.parameters()])
    return result


def _check_same_losses(device: torch.device, fuse_steps: bool = False) -> None:
    wm, behavior, batch = _setup(device)
    eager = _losses(wm, behavior, batch, None, device)
    loops = CompiledLoops(wm, behavior, behavior.cfg.horizon, device, fuse_steps)
    for _ in range(2):  # the capture / compilation, then a replay of the same program
        compiled = _losses(wm, behavior, batch, loops, device)
        assert compiled.keys() == eager.keys()
        for key, value in eager.items():
            atol = FUSED_GRAD_ATOL if fuse_steps and key.startswith("grad_") else ATOL
            torch.testing.assert_close(compiled[key], value, rtol=RTOL, atol=atol,
                                       msg=lambda m, k=key: f"{k}: {m}")


# bfloat16 layers: eagerly each layer's result is rounded to bfloat16 before its neighbour
# (the normalisation, in float32) reads it; compiled, the fused neighbour may read it
# unrounded. The difference is bfloat16's rounding (2^-8 relative) carried through the
# model, so the losses are compared to 1% and each gradient by its norm.
BF16_RTOL, BF16_ATOL, BF16_GRAD_NORM = 1e-2, 1e-3, 2e-2


def _check_close_losses_in_bfloat16(device: torch.device) -> None:
    wm, behavior, batch = _setup(device, torch.bfloat16)
    eager = _losses(wm, behavior, batch, None, device)
    loops = CompiledLoops(wm, behavior, behavior.cfg.horizon, device, fuse_steps=True)
    for _ in range(2):  # the capture / compilation, then a replay of the same program
        compiled = _losses(wm, behavior, batch, loops, device)
        assert compiled.keys() == eager.keys()
        far = {}
        for key, value in eager.items():
            if key.startswith("grad_"):
                error = float((compiled[key] - value).norm() / value.norm())
                if error > BF16_GRAD_NORM:
                    far[key] = f"relative norm error {error:.2e}"
            elif not torch.allclose(compiled[key], value, rtol=BF16_RTOL, atol=BF16_ATOL):
                far[key] = f"{float(compiled[key]):.6g} against {float(value):.6g}"
        assert not far, far


@pytest.mark.slow  # torch.compile builds two C++ programs: about a minute on two cores
def test_compiled_loops_give_the_eager_losses_on_the_cpu():
    _check_same_losses(torch.device("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graphs_give_the_eager_losses():
    _check_same_losses(torch.device("cuda"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graphs_of_fused_steps_give_the_eager_losses():
    _check_same_losses(torch.device("cuda"), fuse_steps=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graphs_of_fused_steps_give_the_eager_losses_with_bfloat16_convolutions():
    """The CUDA defaults: ``algo.conv_dtype=bfloat16`` inside the compiled programs gives
    what the same bfloat16 layers give eagerly."""
    _check_close_losses_in_bfloat16(torch.device("cuda"))


def _scan_and_rollout(wm: WorldModel, behavior: Behavior, batch: dict[str, torch.Tensor],
                      post_step=None, imagine_step=None) -> list[torch.Tensor]:
    """The scan and the rollout with fixed noise, through ``observe``'s and ``imagine``'s
    own steps or the given replacements; every output and the scan's input gradients."""
    device = batch["obs"].device
    act = torch.nn.functional.one_hot(batch["actions"], ACTIONS).float()
    embed = wm.embed(batch["obs"]).detach().requires_grad_()
    noise = wm.rssm.scan_noise(B, T, device, torch.Generator().manual_seed(1))
    seq, posts, priors, last = wm.rssm.observe(embed, act, batch["is_first"], noise=noise,
                                               step=post_step)
    grads = torch.autograd.grad((seq.feat().square().sum() + posts.tanh().sum()
                                 + priors.tanh().sum()), (embed, wm.rssm.gru.proj.weight))
    # start states that carry gradients: the rollout itself lets none through
    start = Latent(seq.deter.reshape(B * T, -1), seq.stoch.reshape(B * T, *seq.stoch.shape[2:]))
    noise2 = behavior.imagination_noise(wm, B * T, 5, device, torch.Generator().manual_seed(2))
    feats, actions = behavior.imagine(wm, start, 5, noise=noise2, step=imagine_step)
    assert not feats.requires_grad
    return [seq.deter, seq.stoch, posts, priors, last.deter, *grads, feats, actions]


def test_a_replaced_step_runs_the_loops_as_their_own_step_does():
    """``observe(step=...)`` and ``imagine(step=...)`` with the loops' own step functions
    give the eager loops' results exactly, and a replaced step needs fed noise."""
    wm, behavior, batch = _setup(torch.device("cpu"))
    own = _scan_and_rollout(wm, behavior, batch)
    replaced = _scan_and_rollout(wm, behavior, batch, wm.rssm.post_step,
                                 functools.partial(behavior.imagine_step, wm))
    for a, b in zip(own, replaced, strict=True):
        assert torch.equal(a, b)
    act = torch.nn.functional.one_hot(batch["actions"], ACTIONS).float()
    with pytest.raises(ValueError, match="pass noise"):
        wm.rssm.observe(wm.embed(batch["obs"]), act, batch["is_first"],
                        step=wm.rssm.post_step)


@pytest.mark.slow  # torch.compile builds two C++ programs
def test_the_step_functions_compile_whole_and_give_the_eager_results():
    """``algo.fuse_steps`` compiles ``post_step`` and ``imagine_step`` with
    ``fullgraph=True``: a graph break would be an error. Here on the CPU (inductor's C++);
    the CUDA test above runs them inside the captured graphs."""
    wm, behavior, batch = _setup(torch.device("cpu"))
    own = _scan_and_rollout(wm, behavior, batch)
    fused = _scan_and_rollout(
        wm, behavior, batch,
        torch.compile(wm.rssm.post_step, fullgraph=True, dynamic=False),
        torch.compile(functools.partial(behavior.imagine_step, wm), fullgraph=True,
                      dynamic=False))
    for a, b in zip(own, fused, strict=True):
        torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL)


@pytest.mark.slow  # torch.compile builds four C++ programs and their backward passes
def test_the_work_around_the_loops_compiles_whole_and_gives_the_eager_losses():
    """``algo.fuse_steps`` also compiles the embedding, the world model's loss terms and
    the actor-critic's targets and losses, each with ``fullgraph=True`` (a graph break
    would be an error). Here on the CPU, with the eager loops, so that the four programs
    are what differs; the CUDA test above runs them around the captured graphs."""
    device = torch.device("cpu")
    wm, behavior, batch = _setup(device)
    eager = _losses(wm, behavior, batch, None, device)
    programs = SimpleNamespace(
        observe=None, imagine=None, embed=_compile(wm.embed), terms=_compile(wm.loss_terms),
        targets=_compile(functools.partial(behavior.targets, wm)),
        policy_terms=_compile(behavior.policy_terms))
    compiled = _losses(wm, behavior, batch, programs, device)  # type: ignore[arg-type]
    assert compiled.keys() == eager.keys()
    for key, value in eager.items():
        torch.testing.assert_close(compiled[key], value, rtol=RTOL, atol=ATOL,
                                   msg=lambda m, k=key: f"{k}: {m}")


def test_fuse_steps_needs_compile():
    with pytest.raises(ValueError, match="algo.fuse_steps .* algo.compile=true"):
        DreamerConfig(size="tiny", fuse_steps=True)
    assert DreamerConfig(size="tiny", compile=True, fuse_steps=True).fuse_steps


def test_fed_noise_samples_what_the_eager_loops_draw():
    """The uniforms drawn before a loop are those the eager loop draws, in its order: the
    scan and rollout fed with them give the eager results exactly (no compilation)."""
    device = torch.device("cpu")
    wm, behavior, batch = _setup(device)
    act = torch.nn.functional.one_hot(batch["actions"], ACTIONS).float()
    embed = wm.embed(batch["obs"]).detach()
    eager = wm.rssm.observe(embed, act, batch["is_first"],
                            generator=torch.Generator().manual_seed(1))
    noise = wm.rssm.scan_noise(B, T, device, torch.Generator().manual_seed(1))
    fed = wm.rssm.observe(embed, act, batch["is_first"], noise=noise)
    assert torch.equal(eager[0].stoch, fed[0].stoch) and torch.equal(eager[1], fed[1])
    start = Latent(eager[0].deter.reshape(B * T, -1).detach(),
                   eager[0].stoch.reshape(B * T, *eager[0].stoch.shape[2:]).detach())
    feats, actions = behavior.imagine(wm, start, 5, torch.Generator().manual_seed(2))
    noise2 = behavior.imagination_noise(wm, B * T, 5, device, torch.Generator().manual_seed(2))
    feats2, actions2 = behavior.imagine(wm, start, 5, noise=noise2)
    assert torch.equal(actions, actions2) and torch.equal(feats, feats2)


@pytest.mark.slow  # compiles the tiny model's loops with torch.compile
def test_bench_times_eager_and_compiled_updates_in_one_command():
    from gbx_algo_dreamer.bench import run_compile_variants

    cfg = DreamerConfig(size="tiny", num_envs=4, batch_size=2, batch_length=8,
                        train_ratio=4.0, replay_capacity=512, learning_starts=32)
    records = run_compile_variants(torch.device("cpu"), "toy", cfg, 1, [False, True])
    rate = {r["compile"]: r["value"] for r in records if r["metric"] == "train_steps_per_s"}
    assert set(rate) == {False, True} and min(rate.values()) > 0
    ratio = next(r["value"] for r in records
                 if r["metric"] == "compiled_over_eager_updates_per_s")
    assert ratio == pytest.approx(rate[True] / rate[False])


def test_bench_refuses_fused_steps_without_compiled_updates():
    from click.testing import CliRunner

    from gbx_algo_dreamer.cli import bench_cmd

    res = CliRunner().invoke(bench_cmd, ["--device", "cpu", "--fuse-steps"])
    assert res.exit_code == 2 and "--fuse-steps" in res.output and "--compile" in res.output


def test_bench_times_the_devices_default_updates_unless_told():
    """``--compile auto`` (the default) times what ``gbx run`` would train with on the
    device: on the CPU the eager updates, without fused steps."""
    import json

    from click.testing import CliRunner

    from gbx_algo_dreamer.cli import bench_cmd

    res = CliRunner().invoke(bench_cmd, ["--device", "cpu", "--size", "tiny", "--num-envs",
                                         "2", "--batch-size", "2", "--batch-length", "4",
                                         "--repeats", "1", "--engine", "none"])
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert records and {(r["compile"], r["fuse_steps"]) for r in records} == {(False, False)}
    assert {(r["conv_dtype"], r["cudnn_benchmark"]) for r in records} == {("float32", False)}
    assert {r["update_order"] for r in records} == {"sequential"}
    assert {r["torch"] for r in records} == {torch.__version__}  # the machine's build
    assert any(r["metric"] == "train_steps_per_s" and r["value"] > 0 for r in records)


def test_fused_steps_on_cuda_without_triton_are_refused_in_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else real(name, *a))
    wm, behavior, _ = _setup(torch.device("cpu"))
    with pytest.raises(ValueError, match="lacks: install .* algo.fuse_steps=false") as err:
        CompiledLoops(wm, behavior, 5, torch.device("cuda"), fuse_steps=True)
    assert "\n" not in str(err.value)
    CompiledLoops(wm, behavior, 5, torch.device("cuda"), fuse_steps=False)  # graphs alone
