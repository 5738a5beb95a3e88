"""Every installed algorithm leaves an evaluation GIF behind with `--observer gif`.

The run owns the evaluation schedule and evaluates once more when training ends, so the gif
observer draws a rollout at the default `run.*` settings for every algorithm. Only sizes
are made tiny here (and DreamerV3's train ratio low, so a run takes seconds); every eval,
checkpoint and gif setting stays at its default. `make wheels-smoke` also checks
DreamerV3's GIF from an installed wheel.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("gbx_observers", reason="the observers plugin draws the GIFs")

from gbx.cli import build_cli  # noqa: E402
from gbx.plugins import load_plugins  # noqa: E402

HOST = load_plugins()
# Smaller models, batches and update counts so a run takes seconds; nothing about evaluation,
# checkpoints or GIFs.
SIZES = {
    "ppo": ["algo.num_envs=8", "algo.rollout_steps=16", "algo.minibatches=2",
            "algo.model_options={channels=[8,16,16], hidden=32}"],
    "a2c": ["algo.num_envs=8", "algo.model_options={channels=[8,16,16], hidden=32}"],
    "dreamer_v3": ["algo.size=tiny", "algo.num_envs=4", "algo.batch_size=4",
                   "algo.batch_length=8", "algo.replay_capacity=512",
                   "algo.learning_starts=32", "algo.train_ratio=4.0", "algo.record_every=8"],
}


@pytest.mark.parametrize("algo", sorted(HOST.registry.algorithms))
def test_gif_observer_writes_a_gif_at_default_settings(algo: str, tmp_path: Path) -> None:
    run_dir = tmp_path / algo
    args = ["run", "--algo", algo, "--env", "toy", "--device", "cpu", "--steps", "128",
            "--run-dir", str(run_dir), "--observer", "gif,jsonl"]
    for item in SIZES.get(algo, []):
        args += ["--set", item]
    res = CliRunner().invoke(build_cli(HOST), args)
    assert res.exit_code == 0, res.output
    gifs = sorted((run_dir / "media").glob("eval_*/rollout.gif"))
    assert gifs, f"{algo}: no GIF under {run_dir / 'media'}"
    assert gifs[-1].read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    # The final evaluation is in the log, at the last step, exactly once.
    lines = [json.loads(x) for x in (run_dir / "train_log.jsonl").read_text().splitlines()]
    evals = [x["eval"] for x in lines if "eval" in x]
    last = max(x["eval"]["env_steps"] for x in lines if "eval" in x)
    assert [e["env_steps"] for e in evals].count(last) == 1
    assert gifs[-1].parent.name == f"eval_{last}"
