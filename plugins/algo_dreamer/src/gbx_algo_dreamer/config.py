"""The ``algo.*`` config of ``dreamer_v3`` and the model-size presets.

Defaults follow the DreamerV3 paper's fixed hyperparameters (docs/dreamer.md
lists each figure and its source).
"""

from __future__ import annotations

from typing import Any

import attrs

from gbx.config import in_range

MODES = ("full", "standing_still", "recon_check")
ENGINES = ("sync", "overlapped")


@attrs.frozen
class SizePreset:
    """Widths of one model size: GRU state, MLP units, CNN base depth, MLP layers."""

    deter: int
    units: int
    depth: int
    layers: int
    stoch: int = 32
    classes: int = 32


# XS..XL from the paper's model-size table; "tiny" exists for CPU tests and gates.
SIZES: dict[str, SizePreset] = {
    "tiny": SizePreset(deter=32, units=32, depth=4, layers=1, stoch=8, classes=8),
    "XS": SizePreset(deter=256, units=256, depth=24, layers=1),
    "S": SizePreset(deter=512, units=512, depth=32, layers=2),
    "M": SizePreset(deter=1024, units=640, depth=48, layers=3),
    "L": SizePreset(deter=2048, units=768, depth=64, layers=4),
    "XL": SizePreset(deter=4096, units=1024, depth=96, layers=5),
}


_POS = in_range(0, lo_open=True)  # > 0 and finite


def _help(text: str) -> dict[str, str]:
    return {"help": text}


def _in(*choices: str) -> Any:
    return attrs.validators.in_(choices)


@attrs.frozen
class DreamerConfig:
    """Configuration of the DreamerV3 trainer (``--set algo.NAME=VALUE``)."""

    size: str = attrs.field(default="S", validator=_in(*SIZES), metadata=_help(
        "model size preset: tiny, XS, S, M, L, XL"))
    mode: str = attrs.field(default="full", validator=_in(*MODES), metadata=_help(
        "full | standing_still (fixed actions, world model only) | recon_check"))
    num_envs: int = attrs.field(default=16, validator=in_range(1),
        metadata=_help("parallel env streams"))
    total_env_steps: int = attrs.field(default=0, validator=in_range(0), metadata=_help(
        "stop after this many env steps (0: run until the run's own budget/stop)"))
    batch_size: int = attrs.field(default=16, validator=in_range(1),
        metadata=_help("sequences per update (B)"))
    batch_length: int = attrs.field(default=64, validator=in_range(2),
        metadata=_help("steps per sequence (L)"))
    train_ratio: float = attrs.field(default=32.0, validator=_POS, metadata=_help(
        "replayed steps per env step; updates per env step = train_ratio / (B * L)"))
    replay_capacity: int = attrs.field(default=1_000_000, validator=in_range(1), metadata=_help(
        "replay size in steps, over all env streams"))
    learning_starts: int = attrs.field(default=1024, validator=in_range(0), metadata=_help(
        "env steps collected before the first update"))
    fixed_action: int = attrs.field(default=0, validator=in_range(0), metadata=_help(
        "action repeated in standing_still mode"))
    heldout_fraction: float = attrs.field(default=0.125, validator=in_range(0, 1, hi_open=True),
        metadata=_help(
        "share of env streams kept out of training in recon_check mode"))
    engine: str = attrs.field(default="sync", validator=_in(*ENGINES), metadata=_help(
        "sync (collect one env step, then its updates) | overlapped (on CUDA: collect the "
        "next chunk on a side stream while the committed replay trains on the main stream; "
        "on the CPU the same schedule runs sequentially)"))
    overlap_chunk: int = attrs.field(default=16, validator=in_range(1), metadata=_help(
        "env iterations collected per chunk with algo.engine=overlapped; the player acts "
        "with a copy of the weights taken at the start of each chunk"))
    # world model
    model_lr: float = attrs.field(default=1e-4, validator=_POS,
        metadata=_help("world model learning rate"))
    model_eps: float = attrs.field(default=1e-8, validator=_POS,
        metadata=_help("world model Adam epsilon"))
    model_clip: float = attrs.field(default=1000.0, validator=_POS,
        metadata=_help("world model grad-norm clip"))
    kl_dyn: float = attrs.field(default=0.5, validator=in_range(0),
        metadata=_help("dynamics KL scale"))
    kl_rep: float = attrs.field(default=0.1, validator=in_range(0),
        metadata=_help("representation KL scale"))
    free_bits: float = attrs.field(default=1.0, validator=in_range(0),
        metadata=_help("free nats per step (KL floor)"))
    unimix: float = attrs.field(default=0.01, validator=in_range(0, 1, hi_open=True),
        metadata=_help("uniform mix of categoricals"))
    bins: int = attrs.field(default=255, validator=in_range(2),
        metadata=_help("two-hot bins of reward/critic"))
    # actor-critic
    actor_lr: float = attrs.field(default=3e-5, validator=_POS,
        metadata=_help("actor learning rate"))
    critic_lr: float = attrs.field(default=3e-5, validator=_POS,
        metadata=_help("critic learning rate"))
    ac_eps: float = attrs.field(default=1e-5, validator=_POS,
        metadata=_help("actor/critic Adam epsilon"))
    ac_clip: float = attrs.field(default=100.0, validator=_POS,
        metadata=_help("actor/critic grad-norm clip"))
    horizon: int = attrs.field(default=15, validator=in_range(1),
        metadata=_help("imagination horizon"))
    gamma: float = attrs.field(default=0.997, validator=in_range(0, 1, lo_open=True),
        metadata=_help("discount (1 - 1/333)"))
    lam: float = attrs.field(default=0.95, validator=in_range(0, 1),
        metadata=_help("lambda of lambda-returns"))
    entropy_scale: float = attrs.field(default=3e-4, validator=in_range(0),
        metadata=_help("actor entropy scale"))
    slow_critic_decay: float = attrs.field(default=0.98, validator=in_range(0, 1), metadata=_help(
        "EMA decay of the slow critic target"))
    slow_critic_reg: float = attrs.field(default=1.0, validator=in_range(0), metadata=_help(
        "scale of the critic's regulariser towards the slow critic"))
    retnorm_decay: float = attrs.field(default=0.99, validator=in_range(0, 1),
        metadata=_help("return-scale EMA decay"))
    retnorm_limit: float = attrs.field(default=1.0, validator=_POS,
        metadata=_help("minimum return scale"))
    # size overrides (0 = use the preset)
    deter: int = attrs.field(default=0, validator=in_range(0), metadata=_help("GRU width override"))
    units: int = attrs.field(default=0, validator=in_range(0), metadata=_help("MLP width override"))
    depth: int = attrs.field(default=0, validator=in_range(0),
        metadata=_help("CNN base depth override"))
    # bookkeeping
    record_every: int = attrs.field(default=64, validator=in_range(1),
        metadata=_help("env iterations per record"))
    memory_fraction: float = attrs.field(default=0.9, validator=in_range(0, 1, lo_open=True),
        metadata=_help(
        "refuse to start if the estimate exceeds this share of free device memory"))

    def preset(self) -> SizePreset:
        base = SIZES[self.size]
        return attrs.evolve(
            base,
            deter=self.deter or base.deter,
            units=self.units or base.units,
            depth=self.depth or base.depth,
        )

    def replay_reserve(self) -> int:
        """Slots per stream past the committed end that staging may touch before a commit:
        2 per env step (record + reset record), times the steps staged per commit."""
        return 2 * (self.overlap_chunk if self.engine == "overlapped" else 1)

    def updates_per_env_step(self) -> float:
        return self.train_ratio / float(self.batch_size * self.batch_length)

    def min_env_steps(self) -> int:
        """Env steps until the first update: the replay must hold ``learning_starts`` steps
        and ``batch_length`` records per stream, then the iterations after that must earn
        one update (``train_ratio``), as the engine counts them."""
        first_ready = max(-(-self.learning_starts // self.num_envs), self.batch_length - 1, 1)
        earned, iterations = 0.0, first_ready
        per_iteration = self.updates_per_env_step() * self.num_envs
        earned += per_iteration
        while earned < 1.0 and per_iteration > 0:
            earned += per_iteration
            iterations += 1
        return iterations * self.num_envs

    def __attrs_post_init__(self) -> None:
        if self.num_envs <= 0 or self.batch_size <= 0 or self.batch_length < 2:
            raise ValueError("algo.num_envs and algo.batch_size must be > 0, "
                             "algo.batch_length >= 2")
        if self.overlap_chunk <= 0:
            raise ValueError("algo.overlap_chunk must be > 0")
        per_stream = self.replay_capacity // self.num_envs
        need = self.batch_length + self.replay_reserve()
        if per_stream < need:
            raise ValueError(
                f"algo.replay_capacity={self.replay_capacity} leaves {per_stream} steps per "
                f"env stream; raise it to at least {need * self.num_envs}")
