"""Runs that cannot train are refused in one line before anything large is allocated.

* a step budget below one update names `--steps` (or `algo.total_env_steps`) and the
  minimum, for every first-party algorithm, and a budget of exactly the minimum trains;
* an env count whose buffers would need about a terabyte gets the memory check's
  refusal (exit 2), not the kernel's OOM killer, on the toy env and a Game Boy stage.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gbx.cli import build_cli
from gbx.plugins import load_plugins

TINY = {
    "ppo": ["algo.num_envs=4", "algo.rollout_steps=4", "algo.minibatches=1",
            "algo.model_options={channels=[8,16,16], hidden=32}"],
    "a2c": ["algo.num_envs=4", "algo.update_every=4", "algo.log_every=1",
            "algo.model_options={channels=[8,16,16], hidden=32}"],
    "dreamer_v3": ["algo.size=tiny", "algo.num_envs=4", "algo.batch_size=4",
                   "algo.batch_length=8", "algo.learning_starts=32", "algo.train_ratio=16.0",
                   "algo.replay_capacity=512", "algo.record_every=4"],
}
# env steps of one update with TINY (dreamer: 8 iterations of 4 envs until it is ready,
# each earning 16 / (4 x 8) x 4 = 2 updates)
MINIMUM = {"ppo": 16, "a2c": 16, "dreamer_v3": 32}
# about 46 KB (toy) and 70 KB (Game Boy) per env: 3e7 envs need over a terabyte
HUGE = "algo.num_envs=30000000"


@pytest.fixture(scope="module")
def host():
    return load_plugins()


def gbx_run(host, tmp_path: Path, algo: str, *extra: str, env: str = "toy") -> tuple[int, str]:
    args = ["run", "--algo", algo, "--env", env, "--device", "cpu", "--observer", "jsonl",
            "--run-dir", str(tmp_path / f"{algo}-{len(list(tmp_path.iterdir()))}")]
    for item in TINY[algo]:
        args += ["--set", item]
    result = CliRunner().invoke(build_cli(host), [*args, *extra], catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.parametrize("algo", sorted(TINY))
def test_budget_below_one_update_is_refused_with_the_minimum(host, tmp_path, algo) -> None:
    if algo not in host.registry.algorithms:
        pytest.skip(f"{algo} is not installed")
    code, out = gbx_run(host, tmp_path, algo, "--steps", str(MINIMUM[algo] - 1))
    assert code == 2, out
    error = next(line for line in out.splitlines() if line.startswith("gbx: error:"))
    assert f"--steps {MINIMUM[algo] - 1} is less than one {algo} update" in error
    assert f"pass --steps {MINIMUM[algo]} or more" in error


@pytest.mark.parametrize("algo", sorted(TINY))
def test_budget_of_exactly_the_minimum_trains(host, tmp_path, algo) -> None:
    """The minimum is not too high: one update runs and is logged."""
    import json

    if algo not in host.registry.algorithms:
        pytest.skip(f"{algo} is not installed")
    code, out = gbx_run(host, tmp_path, algo, "--steps", str(MINIMUM[algo]))
    assert code == 0, out
    (run_dir,) = (p for p in tmp_path.iterdir() if (p / "train_log.jsonl").is_file())
    records = [json.loads(line) for line in (run_dir / "train_log.jsonl").open()]
    assert max(r.get("opt_steps", 0) for r in records) >= 1


@pytest.mark.parametrize("algo", sorted(TINY))
@pytest.mark.parametrize("env", ["toy", "gbx-quest-1"])
def test_terabyte_env_count_gets_the_memory_refusal(host, tmp_path, algo, env) -> None:
    if algo not in host.registry.algorithms or env not in host.registry.envs:
        pytest.skip(f"{algo} or {env} is not installed")
    # dreamer_v3 needs a replay of at least 10 steps per env
    replay = ["--set", "algo.replay_capacity=300000000"] if algo == "dreamer_v3" else []
    code, out = gbx_run(host, tmp_path, algo, "--steps", str(10**12), "--set", HUGE, *replay,
                        env=env)
    assert code == 2, out
    error = next(line for line in out.splitlines() if line.startswith("gbx: error:"))
    assert "30000000 envs needs ~" in error and "lower algo.num_envs" in error
