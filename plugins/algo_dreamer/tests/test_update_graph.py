"""``algo.update_graph``: the whole update as one CUDA graph gives the updates of the
compiled loops it replaces, resumes from a checkpoint, and is refused where it cannot run."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.trainer import DreamerTrainer
from gbx_algo_dreamer.validate import LocalContext, registry_env_factory

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# What may differ between the graph and the compiled update it replaces: rounding (the
# graph's Adam is ``capturable``, its bias corrections on the device in float32, and cuBLAS
# may pick other kernels inside a capture), which can flip a near-tie of a latent's sample
# and so move a loss by a fraction of a percent (on an H200: the continue head's loss by
# 0.3% at the first update), and Adam turns rounding-sized gradient differences into
# step-sized weight differences for elements whose gradient is near zero. What a wrong
# graph would change is larger: another batch or other noise moves every loss, and warm-up
# steps left in place would make the first update move the weights about four times as far.
RTOL, ATOL = 1e-2, 1e-3
MOVE_RTOL = 0.1  # norm of the difference of the two first steps, relative to the step
UPDATES = 2


def _trainer(tmp_path: Path, device: str, name: str, **settings: object) -> DreamerTrainer:
    dev = torch.device(device)
    ctx = LocalContext(registry_env_factory("toy", dev), dev, run_dir=tmp_path / name)
    # float32 layers with cuDNN's own choice: timed algorithm choices (and bfloat16's
    # rounding of what they sum differently) could differ between two trainers
    cfg = DreamerConfig(size="tiny", num_envs=8, batch_size=4, batch_length=16,
                        replay_capacity=4096, learning_starts=0, conv_dtype="float32",
                        cudnn_benchmark=False, **settings)
    tr = DreamerTrainer(cfg, ctx)
    tr._ensure_started()
    for _ in range(20):
        tr.collect_step()
    tr.commit()  # as the engine does at the end of a chunk: the records become sampleable
    return tr


def _weights(tr: DreamerTrainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in (*tr.wm.parameters(), *tr.behavior.parameters())]


def _assert_same(got: list[dict[str, torch.Tensor]], want: list[dict[str, torch.Tensor]]
                 ) -> None:
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.keys() == w.keys()
        for key in w:
            torch.testing.assert_close(g[key], w[key], rtol=RTOL, atol=ATOL,
                                       msg=lambda m, k=key, i=i: f"update {i}, {k}: {m}")


def _steps_taken(tr: DreamerTrainer) -> set[float]:
    return {float(s["step"]) for opt in tr.optimisers() for s in opt.state.values()}


@cuda
@pytest.mark.parametrize("fuse_steps", [False, True], ids=["loops", "fused-steps"])
def test_the_captured_update_gives_the_compiled_updates(tmp_path: Path, fuse_steps: bool):
    runs = {}
    for graphed in (False, True):
        tr = _trainer(tmp_path, "cuda", str(graphed), compile=True, fuse_steps=fuse_steps,
                      update_graph=graphed)
        assert (tr.cfg.update_graph is True) == graphed
        before = _weights(tr)
        # the first update of the graph is the capture after its warm-up updates, whose
        # effects it undoes: it must still be the first update
        scalars = [tr.update()]
        assert _steps_taken(tr) == {1.0}
        step = [after - start for after, start in zip(_weights(tr), before, strict=True)]
        scalars += [tr.update() for _ in range(UPDATES - 1)]
        assert _steps_taken(tr) == {float(UPDATES)}
        runs[graphed] = (scalars, torch.cat([s.reshape(-1) for s in step]))
    (plain, plain_step), (graph, graph_step) = runs[False], runs[True]
    _assert_same(graph, plain)
    assert float((graph_step - plain_step).norm()) <= MOVE_RTOL * float(plain_step.norm())


@cuda
def test_a_captured_update_resumes_from_a_checkpoint(tmp_path: Path):
    """A trainer loaded from another's checkpoint (Adam state present before its capture)
    continues with the updates the other makes."""
    first = _trainer(tmp_path, "cuda", "first", compile=True, fuse_steps=False,
                     checkpoint_replay=True)
    assert first.cfg.update_graph  # the CUDA default with compiled updates
    for _ in range(2):
        first.update()
    # through bytes, as a checkpoint file: an optimiser loads the tensors of a state dict in
    # memory without copying them, and the two trainers would share Adam's moments
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=False)
    resumed = _trainer(tmp_path, "cuda", "resumed", compile=True, fuse_steps=False,
                       checkpoint_replay=True)
    resumed.update()  # its own graph, captured before the load: the load must drop it
    resumed.load_state_dict(state)
    assert resumed.update_graph is None
    _assert_same([resumed.update() for _ in range(UPDATES)],
                 [first.update() for _ in range(UPDATES)])


def test_update_graph_needs_compiled_updates_and_the_sequential_order():
    with pytest.raises(ValueError, match="algo.update_graph captures the update around"):
        DreamerConfig(compile=False, update_graph=True)
    with pytest.raises(ValueError, match="algo.update_graph captures the sequential"):
        DreamerConfig(compile=True, update_graph=True, update_order="concurrent")


def test_update_graph_is_the_cuda_default_of_the_sequential_compiled_update():
    assert DreamerConfig().for_device("cuda").update_graph is True
    assert DreamerConfig().for_device("cpu").update_graph is False
    assert DreamerConfig(compile=False).for_device("cuda").update_graph is False
    assert DreamerConfig(update_order="concurrent").for_device("cuda").update_graph is False


def test_update_graph_on_the_cpu_is_refused_in_one_line(tmp_path: Path):
    with pytest.raises(ValueError, match="needs a CUDA device"):
        _trainer(tmp_path, "cpu", "cpu", compile=True, update_graph=True)


def test_a_checkpoint_of_a_captured_update_loads_on_the_cpu(tmp_path: Path):
    """A GPU run's checkpoint holds Adam with ``capturable`` and its step counts on the
    device; a CPU trainer takes its own setting and keeps the counts on the host."""
    tr = _trainer(tmp_path, "cpu", "cpu")
    tr.update()
    state = tr.state_dict()
    for key in ("model_opt", "actor_opt", "critic_opt"):  # as a captured update saves it
        for group in state[key]["param_groups"]:
            group["capturable"] = True
    resumed = _trainer(tmp_path, "cpu", "resumed")
    resumed.load_state_dict(state)
    for opt in resumed.optimisers():
        assert all(group["capturable"] is False for group in opt.param_groups)
        assert all(s["step"].device.type == "cpu" for s in opt.state.values())
    resumed.update()
    assert resumed.opt_steps == 2


@cuda
def test_several_ranks_run_the_update_uncaptured(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch):
    """The graph does not hold the ranks' gradient all-reduce: with several ranks the
    update runs as with the setting off, and Adam keeps its step counts on the host."""
    from gbx import distributed

    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    monkeypatch.setattr(distributed, "sync_parameters", lambda module, src=0: module)
    tr = DreamerTrainer(DreamerConfig(size="tiny", num_envs=8, batch_size=4, batch_length=16,
                                      replay_capacity=4096, learning_starts=0),
                        LocalContext(registry_env_factory("toy", torch.device("cuda")),
                                     torch.device("cuda"), run_dir=tmp_path))
    assert tr.cfg.update_graph and not tr.graphed
    assert all(group["capturable"] is False for opt in tr.optimisers()
               for group in opt.param_groups)


def test_the_snapshot_undoes_warm_up_updates(tmp_path: Path):
    """What a capture's warm-up changes (weights, optimiser state created or moved, return
    scale, non-finite bookkeeping) is put back exactly: the next update is the first."""
    from gbx_algo_dreamer.update_graph import _Snapshot

    warmed, fresh = (_trainer(tmp_path, "cpu", name) for name in ("warmed", "fresh"))
    batch = warmed._sample()
    rng = warmed.gen.get_state()
    snapshot = _Snapshot(warmed)
    for _ in range(3):
        warmed.train_step(batch)
    assert _steps_taken(warmed) == {3.0}
    snapshot.restore()
    assert _steps_taken(warmed) == {0.0}
    warmed.gen.set_state(rng)  # the graph draws its randomness outside, not restored here
    got = warmed.train_step(batch)
    want = fresh.train_step(fresh._sample())
    assert got.keys() == want.keys()
    for key in want:
        assert torch.equal(got[key], want[key]), key
    for a, b in zip(_weights(warmed), _weights(fresh), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(warmed.optimisers(), fresh.optimisers(), strict=True):
        for pa, pb in zip(a.state.values(), b.state.values(), strict=True):
            assert all(torch.equal(pa[k], pb[k]) for k in pb)
    assert torch.equal(warmed.retnorm.low, fresh.retnorm.low)
