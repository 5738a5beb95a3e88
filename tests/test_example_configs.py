"""Every config file under examples/ resolves against the installed plugins: a typo or a
renamed key there would only show when a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbx.config import build_config, read_config_file
from gbx.plugins import load_plugins

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.toml"))


def test_there_are_example_configs() -> None:
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_config_resolves(path: Path) -> None:
    config = build_config(load_plugins().registry, base=read_config_file(path))
    assert config.run.algo and config.run.env


@pytest.mark.parametrize("name", ["quest4_explore_gpu.toml"])
def test_an_examples_milestones_pay_on_the_scripted_way(name: str) -> None:
    """The stage-4 example names stage 3's goal as a milestone: on the scripted
    solution from the house it pays once, on the step that reaches it (the length of
    that stage's solution), and the goal pays on the last step."""
    pytest.importorskip("gbx_gameboy")
    import torch

    from gbx_gameboy.game.solutions import action_indices
    from gbx_gameboy.tasks import STAGES_BY_ENV, make_stage_env

    path = Path(__file__).resolve().parents[1] / "examples" / name
    config = build_config(load_plugins().registry, base=read_config_file(path))
    milestones = config.env.milestone_dirs
    assert milestones
    env = make_stage_env(config.run.env, 1, "cpu", 0, milestone_dirs=milestones)
    solution = STAGES_BY_ENV[config.run.env].solution
    env.reset()
    paid = []
    for t, a in enumerate(action_indices(solution)):
        _, reward, done, _, _ = env.step(torch.tensor([a]))
        if float(reward[0]):
            paid.append(t + 1)
        if bool(done[0]):
            break
    want = [len(STAGES_BY_ENV[m].solution) for m in milestones] + [len(solution)]
    assert paid == want


def test_the_stage_examples_form_one_chain() -> None:
    """`gbx chain examples/quest{2,3,4}_explore_gpu.toml`: each stage runs in its own
    directory and starts from the one before (its weights and its saved goal states)."""
    root = Path(__file__).resolve().parents[1] / "examples"
    registry = load_plugins().registry
    configs = [build_config(registry, base=read_config_file(root / f"quest{n}_explore_gpu.toml"))
               for n in (2, 3, 4)]
    runs, envs = [c.run for c in configs], [c.env for c in configs]
    assert [r.run_dir for r in runs] == ["runs/quest2", "runs/quest3", "runs/quest4"]
    for before, run, env in zip(runs[:-1], runs[1:], envs[1:], strict=True):
        assert run.init_from == before.run_dir
        assert list(env.start_states) == [f"{before.run_dir}/goal_states"]
    assert all(env.save_goal_states for env in envs[:-1])
