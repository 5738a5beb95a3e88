"""Validation scenarios of ``gbx dreamer validate``: each runs a short, self-contained
training and returns a JSON-able summary with ``passed`` and the checks behind it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.fixtures import check_fixtures
from gbx_algo_dreamer.trainer import DreamerTrainer

EnvFactory = Callable[[int, int], Any]  # (num_envs, seed) -> Env


class LocalContext:
    """A RunContext for validation runs: records kept in memory, checkpoints discarded
    (their atomic writing and resume belong to the core run loop). ``request_stop`` (called
    by :func:`gbx.runner.stop_on_signals` on SIGINT/SIGTERM) stops the trainer at its next
    ``should_stop()`` check, after the current env iteration."""

    def __init__(self, env_factory: EnvFactory, device: torch.device, seed: int = 0,
                 run_dir: Path | None = None,
                 wrap_training: Callable[[Any], Any] | None = None) -> None:
        self.env_factory, self.device, self.seed = env_factory, device, seed
        self.wrap_training = wrap_training  # e.g. an explorer around the training envs
        self.run_id, self.run_dir, self.config = "validate", run_dir or Path("."), None
        self.records: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self.checkpoints = 0
        self.stop_reason: str | None = None

    def make_env(self, num_envs: int, *, seed_offset: int = 0, training: bool = False) -> Any:
        env = self.env_factory(num_envs, self.seed + seed_offset)
        return self.wrap_training(env) if training and self.wrap_training else env

    def record(self, metrics: Mapping[str, Any]) -> None:
        self.records.append(dict(metrics))

    def record_eval(self, metrics: Mapping[str, Any]) -> None:
        self.evals.append(dict(metrics))

    def checkpoint(self, state: Mapping[str, Any], *, step: int) -> Path:
        self.checkpoints += 1
        return self.run_dir / f"checkpoint_{step}.discarded"

    def request_stop(self, reason: str = "signal") -> None:
        self.stop_reason = self.stop_reason or reason

    def should_stop(self) -> bool:
        return self.stop_reason is not None


def registry_env_factory(name: str, device: torch.device, **env_options: Any) -> EnvFactory:
    """Factory of the env registered as ``name``; one-line error when it is missing."""
    from gbx.plugins import get_host

    envs = get_host().registry.envs
    if name not in envs:
        hint = " (install gbx-env-gameboy for the bundled Game Boy stages)" \
            if name.startswith("gbx-") else ""
        raise LookupError(f"env {name!r} is not installed{hint}; installed envs: "
                          f"{', '.join(sorted(envs)) or 'none'}")
    spec = envs[name]
    cfg = spec.config_cls(**env_options)
    return lambda num_envs, seed: spec.factory(cfg, num_envs, device, seed)


def _finite(records: list[dict[str, Any]], keys: tuple[str, ...]) -> bool:
    return all(math.isfinite(float(r[k])) for r in records for k in keys if k in r)


def _train(cfg: DreamerConfig, factory: EnvFactory, device: torch.device, seed: int,
           ctx: LocalContext | None = None) -> tuple[DreamerTrainer, LocalContext, float]:
    """Train ``cfg``; SIGINT/SIGTERM end the training early (``ctx.stop_reason``)."""
    from gbx.runner import stop_on_signals

    ctx = ctx or LocalContext(factory, device, seed)
    start = time.perf_counter()
    with stop_on_signals(ctx):
        trainer = DreamerTrainer(cfg, ctx)
        if not ctx.should_stop():
            trainer.train()
    return trainer, ctx, time.perf_counter() - start


def _stopped(summary: dict[str, Any], ctx: LocalContext) -> dict[str, Any]:
    """A scenario cut short by a signal fails and says so (``stopped_by``)."""
    if ctx.stop_reason is not None:
        summary["stopped_by"] = ctx.stop_reason
        summary["passed"] = False
        summary.setdefault("failures", []).append(
            f"stopped by a {ctx.stop_reason} before the end of training; "
            "rerun without a time limit, or with fewer --steps")
    return summary


def standing_still(device: torch.device, factory: EnvFactory, cfg: DreamerConfig,
                   seed: int = 0, ctx: LocalContext | None = None) -> dict[str, Any]:
    """World model on a fixed action stream: reconstruction NLL drops by >= 25%, all
    finite, and prior and posterior entropies agree after warm-up."""
    cfg = attrs.evolve(cfg, mode="standing_still")
    _, ctx, secs = _train(cfg, factory, device, seed, ctx)
    trained = [r for r in ctx.records if "obs_nll" in r]
    if len(trained) < 2:
        failures = [] if ctx.stop_reason else ["fewer than 2 records with updates; "
                                               "raise --steps"]
        return _stopped({"scenario": "standing-still", "passed": False, "seconds": secs,
                         "failures": failures}, ctx)
    first, last = trained[0]["obs_nll"], trained[-1]["obs_nll"]
    improvement = 1.0 - last / first if first > 0 else 0.0
    prior, post = trained[-1]["prior_entropy"], trained[-1]["posterior_entropy"]
    gap = abs(prior - post) / max(1.0, prior)
    checks = {
        "recon_improvement>=0.25": improvement >= 0.25,
        "finite": _finite(trained, ("loss_model", "obs_nll", "kl_total")),
        "entropy_gap<0.3": gap < 0.3,
        "no_nonfinite_updates": all(r.get("nonfinite", 0.0) == 0.0 for r in trained),
    }
    return _stopped({
        "scenario": "standing-still", "passed": all(checks.values()), "checks": checks,
        "obs_nll_first": first, "obs_nll_last": last, "recon_improvement": improvement,
        "prior_entropy": prior, "posterior_entropy": post, "entropy_gap": gap,
        "recon_accuracy_last": trained[-1].get("recon_accuracy"),
        "opt_steps": ctx.records[-1]["opt_steps"],
        "env_steps": ctx.records[-1]["env_steps"], "seconds": secs}, ctx)


def stage1(device: torch.device, factory: EnvFactory, cfg: DreamerConfig,
           seed: int = 0, ctx: LocalContext | None = None) -> dict[str, Any]:
    """Full DreamerV3 on a stage: reaches the goal at least once, finite losses,
    non-zero entropies, replay ratio within 10% of the target."""
    cfg = attrs.evolve(cfg, mode="full")
    trainer, ctx, secs = _train(cfg, factory, device, seed, ctx)
    trained = [r for r in ctx.records if "loss_actor" in r]
    best_success = max((r.get("success_rate", 0.0) for r in ctx.records), default=0.0)
    done_rate = max((r.get("done_rate", 0.0) for r in ctx.records), default=0.0)
    last = trained[-1] if trained else {}
    ratio = ctx.records[-1]["replay_ratio"] if ctx.records else 0.0
    checks = {
        "success_rate>0": best_success > 0,
        "done_rate>0": done_rate > 0,
        "finite": bool(trained) and _finite(trained, ("loss_model", "loss_actor",
                                                      "loss_critic", "kl_total")),
        "entropies_nonzero": bool(last) and last["action_entropy"] > 0
        and last["prior_entropy"] > 0 and last["posterior_entropy"] > 0,
        "replay_ratio_within_10pct": abs(ratio - cfg.train_ratio) <= 0.1 * cfg.train_ratio,
    }
    summary = {"scenario": "stage1", "passed": all(checks.values()), "checks": checks,
               "best_success_rate": best_success, "max_done_rate": done_rate,
               "replay_ratio": ratio, "replay_ratio_target": cfg.train_ratio,
               "env_steps": trainer.env_steps, "opt_steps": trainer.opt_steps,
               "seconds": secs, "env_sps": trainer.env_steps / max(secs, 1e-9)}
    summary.update({k: last.get(k) for k in ("loss_model", "loss_actor", "loss_critic",
                                             "action_entropy", "return_scale")})
    final = ctx.records[-1] if ctx.records else {}
    summary.update({k: v for k, v in final.items() if k.startswith("explore_")})
    return _stopped(summary, ctx)


def tiny_config(**overrides: Any) -> DreamerConfig:
    base: dict[str, Any] = dict(
        size="tiny", num_envs=4, batch_size=4, batch_length=8, train_ratio=32.0,
        replay_capacity=2048, learning_starts=32, record_every=8, total_env_steps=160,
        model_lr=1e-3)
    base.update(overrides)
    return DreamerConfig(**base)


def cpu_gate(factory: EnvFactory, small_factory: EnvFactory) -> dict[str, Any]:
    """Fixture math, a 2-update smoke run (full-size frames from ``factory``) and Standing
    Still on a tiny CPU config (small frames from ``small_factory``, for speed)."""
    device = torch.device("cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add hand-off cost
    try:
        problems = check_fixtures()
        # updates start at env step 32, 16/32 updates per env step x 4 envs: exactly 2
        smoke_cfg = tiny_config(total_env_steps=32, train_ratio=16.0, learning_starts=32,
                                record_every=1)
        trainer, ctx, smoke_secs = _train(smoke_cfg, factory, device, 0)
        smoke_ok = trainer.opt_steps == 2 and _finite(ctx.records, ("loss_model",
                                                                    "loss_actor"))
        # A signal during the smoke run also stops Standing Still before it trains.
        still_ctx = LocalContext(small_factory, device, 0)
        if ctx.stop_reason:
            still_ctx.request_stop(ctx.stop_reason)
        still = standing_still(device, small_factory, tiny_config(
            batch_size=8, batch_length=16, total_env_steps=320, train_ratio=128.0),
            ctx=still_ctx)
    finally:
        torch.set_num_threads(threads)
    checks = {"fixtures": not problems, "smoke_updates": smoke_ok,
              "standing_still": still["passed"]}
    return _stopped({"scenario": "cpu-gate", "passed": all(checks.values()), "checks": checks,
                     "fixture_mismatches": problems[:20], "smoke_opt_steps": trainer.opt_steps,
                     "smoke_seconds": smoke_secs, "standing_still": still}, still_ctx)
