"""``algo.update_order``: sequential (the actor-critic imagines with the stepped world
model) and concurrent (with the world model's weights before its step; on CUDA on a second
stream beside the world model's backward)."""

from __future__ import annotations

import pytest
import torch
from fakes import dot_context, small_cfg

from gbx_algo_dreamer.trainer import DreamerTrainer


def _watch_one_update(tr: DreamerTrainer) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """Run one update; return the order of the model's step and the behaviour loss, the
    GRU weights the behaviour loss saw, and those before the update."""
    events: list[str] = []
    seen: list[torch.Tensor] = []
    weight = tr.wm.rssm.gru.proj.weight
    before = weight.detach().clone()
    step, loss = tr.model_opt.step, tr.behavior.loss

    def spy_step(*args, **kwargs):
        events.append("model step")
        return step(*args, **kwargs)

    def spy_loss(*args, **kwargs):
        events.append("behavior loss")
        seen.append(weight.detach().clone())
        return loss(*args, **kwargs)

    tr.model_opt.step = spy_step  # type: ignore[method-assign]
    tr.behavior.loss = spy_loss  # type: ignore[method-assign]
    tr.update()
    return events, seen[0], before


def _ready_trainer(tmp_path, order: str) -> DreamerTrainer:
    tr = DreamerTrainer(small_cfg(update_order=order), dot_context(tmp_path))
    tr._ensure_started()
    while not tr.ready():
        tr.collect_step()
        tr.replay.commit()
    return tr


def test_sequential_imagines_with_the_stepped_world_model(tmp_path):
    tr = _ready_trainer(tmp_path, "sequential")
    events, seen, before = _watch_one_update(tr)
    assert events == ["model step", "behavior loss"]
    assert not torch.equal(seen, before)
    assert torch.equal(seen, tr.wm.rssm.gru.proj.weight.detach())


def test_concurrent_imagines_with_the_world_model_before_its_step(tmp_path):
    tr = _ready_trainer(tmp_path, "concurrent")
    events, seen, before = _watch_one_update(tr)
    assert events == ["behavior loss", "model step"]
    assert torch.equal(seen, before)
    assert not torch.equal(tr.wm.rssm.gru.proj.weight.detach(), before)  # it did step


def test_a_concurrent_run_trains_everything_and_records_what_a_sequential_one_does(tmp_path):
    runs = {}
    for order in ("sequential", "concurrent"):
        ctx = dot_context(tmp_path / order)
        tr = DreamerTrainer(small_cfg(update_order=order), ctx)
        actor0 = torch.cat([p.detach().reshape(-1) for p in tr.behavior.actor.parameters()])
        ctx.run(tr)
        actor1 = torch.cat([p.detach().reshape(-1) for p in tr.behavior.actor.parameters()])
        assert tr.opt_steps >= 1 and not torch.equal(actor0, actor1)
        runs[order] = ctx.records[-1]
    assert runs["concurrent"].keys() == runs["sequential"].keys()
    assert runs["concurrent"]["opt_steps"] == runs["sequential"]["opt_steps"]
    assert runs["concurrent"]["nonfinite_seen"] == 0


def test_an_unknown_order_is_refused():
    with pytest.raises(ValueError, match="update_order"):
        small_cfg(update_order="parallel")


def test_the_bench_times_the_concurrent_update_when_told():
    import json

    from click.testing import CliRunner

    from gbx_algo_dreamer.cli import bench_cmd

    res = CliRunner().invoke(bench_cmd, ["--device", "cpu", "--size", "tiny", "--num-envs",
                                         "2", "--batch-size", "2", "--batch-length", "4",
                                         "--repeats", "1", "--engine", "none",
                                         "--update-order", "concurrent"])
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert records and {r["update_order"] for r in records} == {"concurrent"}
    assert any(r["metric"] == "train_steps_per_s" and r["value"] > 0 for r in records)
