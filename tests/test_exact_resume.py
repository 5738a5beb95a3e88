"""SIGKILL a real `gbx run` at a random moment, `--resume` it, and get the uninterrupted run.

For every first-party algorithm on the toy env and on the bundled Game Boy stage
`gbx-quest-1` (CPU, tiny sizes): the records of `train_log.jsonl` (wall-clock fields
aside) and the final checkpoint (weights, optimiser, RNG and env state) must equal those
of a run that was never killed, bit for bit. The kill lands after a random number of
output lines plus a random delay, so it may hit an update or a checkpoint write.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from gbx.testing import check_sigkill_resume

PPO = ["algo.num_envs=8", "algo.rollout_steps=8", "algo.minibatches=2", "algo.update_epochs=2",
       "algo.checkpoint_every=1", "algo.model_options={channels=[8,16,16], hidden=32}"]
A2C = ["algo.num_envs=8", "algo.update_every=4", "algo.log_every=1", "algo.checkpoint_every=1",
       "algo.model_options={channels=[8,16,16], hidden=32}"]
DREAMER = ["algo.size=tiny", "algo.num_envs=4", "algo.batch_size=4", "algo.batch_length=8",
           "algo.learning_starts=32", "algo.record_every=4", "algo.replay_capacity=512",
           "algo.checkpoint_every=16", "algo.train_ratio=16.0"]
# (settings, env steps, records of the uninterrupted run) per algorithm
ALGOS = {
    "ppo": (PPO, 6 * 8 * 8, 6),
    "a2c": (A2C, 6 * 8 * 4, 6),
    "dreamer_v3": (DREAMER, 6 * 4 * 4, 6),
}
ENVS = {
    "toy": (["env.max_steps=10"], ""),
    # short episodes so that resets (and their random start choice) happen in the window
    "gbx-quest-1": (["env.max_steps=5", "env.random_noop_max=2", "env.stack_k=2"],
                    "gameboy,gameboy_tasks"),
}
PLUGINS = {"ppo": "ppo", "a2c": "a2c", "dreamer_v3": "dreamer"}
CASES = [
    pytest.param(algo, env, marks=() if (algo, env) == ("ppo", "toy") else pytest.mark.slow)
    for env in ENVS for algo in ALGOS
]


@pytest.mark.parametrize(("algo", "env"), CASES)
def test_sigkill_at_a_random_moment_then_resume_is_exact(
    algo: str, env: str, tmp_path: Path
) -> None:
    from gbx.plugins import load_plugins

    registry = load_plugins().registry
    if algo not in registry.algorithms or env not in registry.envs:
        pytest.skip(f"{algo} or {env} is not installed")
    settings, total, records = ALGOS[algo]
    env_settings, env_plugins = ENVS[env]
    args = ["--algo", algo, "--env", env, "--device", "cpu", "--seed", "3",
            "--steps", str(total)]
    for item in (*settings, *env_settings):
        args += ["--set", item]
    plugins = ",".join(p for p in (PLUGINS[algo], env_plugins) if p)
    # A fresh kill moment per run; GBX_TEST_KILL_SEED replays a failing one.
    seed = int(os.environ.get("GBX_TEST_KILL_SEED", random.randrange(1 << 30)))
    print(f"kill seed {seed}")
    check_sigkill_resume(args, tmp_path, plugins=plugins, total_steps=total,
                         expected_records=records, seed=seed, timeout=600)
