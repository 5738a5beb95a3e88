"""The ``algo.*`` config of ``dreamer_v3``, the model-size presets and the device presets.

Defaults follow the DreamerV3 paper's fixed hyperparameters (docs/dreamer.md
lists each figure and its source). Some settings default to ``auto`` (``0`` for numbers):
model size, batch size and length, train ratio, replay capacity and the learning rates take
the value of the device the run trains on (:data:`DEVICE_PRESETS`), so the same command
trains at the paper's scale on a GPU and fits a laptop on the CPU. An explicit value always
wins.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from gbx.config import in_range
from gbx_algo_dreamer.precision import CONV_DTYPES, PRECISIONS

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


AUTO = "auto"
UPDATE_ORDERS = ("sequential", "concurrent")


@attrs.frozen
class DevicePreset:
    """The values the ``auto`` settings take on one kind of device."""

    size: str
    batch_size: int
    batch_length: int
    train_ratio: float
    replay_capacity: int
    learning_starts: int
    model_lr: float
    actor_lr: float
    critic_lr: float
    gamma: float
    cpu_threads: int
    matmul_precision: str
    compile: bool
    fuse_steps: bool
    conv_dtype: str
    cudnn_benchmark: bool
    update_graph: bool


# cuda: the paper's settings. cpu: an update on a CPU costs about 1 ms per replayed 72x80
# frame at size tiny (its convolutions), so the run time follows B x L x train ratio per env
# step: the tiny model, 8 x 16 batches and train ratio 24 keep a toy-sized run within
# minutes on two cores, and a 64k-step replay (90 MiB of 72x80 frames) keeps it well under
# 1 GB resident. At the paper's learning rates the tiny model's actor barely leaves the
# uniform policy in the few hundred updates such a run makes; an actor at 1e-3 learns but
# may collapse onto a wrong action late in the run. The discount: with the paper's 0.997
# (a 333-step horizon) every path that reaches the goal some time is worth nearly the same
# on a task whose reward is progress towards the goal, so in a few hundred updates the actor
# gets no usable preference for the short path and its greedy policy loops; 0.95 (a
# 20-step horizon) makes a step of delay cost 5% of what lies ahead (docs/benchmarks.md).
# Threads: the tiny model's many small operations gain little from a second thread, and two
# threads wait on each other whenever another process holds a core (the README's toy run
# took 211 s with torch's two threads and 137 s with one on the shared 2-core machine).
# Matmul precision: TF32 on CUDA made an update of size S 1.24x faster on an H200, and a
# run with it passed the regression gate of the float32 baseline (docs/dreamer.md); a CPU
# has no TF32, so it keeps float32.
# Compiled updates: on CUDA the captured loops with fused steps and the compiled work around
# them made an update of size S 5.2x faster than eager on an H200, and a run with them passed
# the regression gates of the eager and graphed baselines (docs/dreamer.md); the first
# update pays for the compilation (seconds to a minute). On the CPU, compiling the loops
# takes about a minute on two cores, longer than the README's whole toy run.
# Convolutions: the encoder's and decoder's convolutions over a thousand frames are the
# largest kernels of an update of size S. In bfloat16 and with cuDNN choosing their
# algorithms by timing them, an update took 22.7 - 25.4 ms on H200s where the same
# machines took 27.4 - 28.9 before (1.12x - 1.21x; either one alone gained on some machines
# and nothing on others), with less memory, and a run with both passed the regression
# gates of every earlier GPU baseline (docs/dreamer.md). The CPU keeps float32 and cuDNN's
# own choice: its defaults were measured there, and cuDNN is CUDA's.
# The whole update as one CUDA graph: with the rest of the CUDA defaults an update of size
# S kept an H200 busy for about 19 - 21 ms but took 23 - 26 ms, paced by the host's Python;
# captured whole it took 20.3 ms in every process (1.16x, 49 updates/s), and a run with it
# passed the gates of every earlier GPU baseline (docs/dreamer.md). It needs the compiled
# loops and the sequential order; the CPU has no CUDA graphs.
DEVICE_PRESETS: dict[str, DevicePreset] = {
    "cuda": DevicePreset(size="S", batch_size=16, batch_length=64, train_ratio=32.0,
                         replay_capacity=1_000_000, learning_starts=1024, model_lr=1e-4,
                         actor_lr=3e-5, critic_lr=3e-5, gamma=0.997, cpu_threads=0,
                         matmul_precision="high", compile=True, fuse_steps=True,
                         conv_dtype="bfloat16", cudnn_benchmark=True, update_graph=True),
    "cpu": DevicePreset(size="tiny", batch_size=8, batch_length=16, train_ratio=24.0,
                        replay_capacity=65_536, learning_starts=512, model_lr=1e-3,
                        actor_lr=5e-4, critic_lr=1e-3, gamma=0.95, cpu_threads=1,
                        matmul_precision="highest", compile=False, fuse_steps=False,
                        conv_dtype="float32", cudnn_benchmark=False, update_graph=False),
}
AUTO_FIELDS = tuple(attrs.fields_dict(DevicePreset))


def device_kind(device: torch.device | str) -> str:
    """The :data:`DEVICE_PRESETS` key of a device: ``cuda`` for any CUDA device, else ``cpu``."""
    return "cuda" if torch.device(device).type == "cuda" else "cpu"


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _auto_help(field: str, text: str) -> dict[str, str]:
    per_device = ", ".join(f"{_shown(getattr(p, field))} on "
                           f"{'CUDA' if k == 'cuda' else 'the CPU'}"
                           for k, p in DEVICE_PRESETS.items())
    unset = {"size": "auto", "matmul_precision": "auto", "conv_dtype": "auto",
             "learning_starts": "unset", "cpu_threads": "unset", "compile": "unset",
             "fuse_steps": "unset", "cudnn_benchmark": "unset",
             "update_graph": "unset"}.get(field, "0")
    return {"help": f"{text}; {unset} = the device's default: {per_device}"}


# the value that leaves a setting to the device: 0 for numbers, except where 0 means itself
_AUTO_MARKERS: dict[str, tuple[Any, ...]] = {"size": (AUTO,), "matmul_precision": (AUTO,),
                                             "conv_dtype": (AUTO,),
                                             "learning_starts": (None,), "cpu_threads": (None,),
                                             "compile": (None,), "fuse_steps": (None,),
                                             "cudnn_benchmark": (None,),
                                             "update_graph": (None,)}


_POS = in_range(0, lo_open=True)  # > 0 and finite
_AUTO_OR_POS = in_range(0)  # 0 (the device's default) or > 0


def _help(text: str) -> dict[str, str]:
    return {"help": text}


def _in(*choices: str) -> Any:
    return attrs.validators.in_(choices)


@attrs.frozen
class DreamerConfig:
    """Configuration of the DreamerV3 trainer (``--set algo.NAME=VALUE``)."""

    size: str = attrs.field(default=AUTO, validator=_in(AUTO, *SIZES), metadata=_auto_help(
        "size", "model size preset: tiny, XS, S, M, L, XL"))
    mode: str = attrs.field(default="full", validator=_in(*MODES), metadata=_help(
        "full | standing_still (fixed actions, world model only) | recon_check"))
    num_envs: int = attrs.field(default=16, validator=in_range(1),
        metadata=_help("parallel env streams"))
    total_env_steps: int = attrs.field(default=0, validator=in_range(0), metadata=_help(
        "stop after this many env steps (0: run until the run's own budget/stop)"))
    batch_size: int = attrs.field(default=0, validator=in_range(0),
        metadata=_auto_help("batch_size", "sequences per update (B)"))
    batch_length: int = attrs.field(default=0, validator=in_range(0),
        metadata=_auto_help("batch_length", "steps per sequence (L), at least 2"))
    train_ratio: float = attrs.field(default=0.0, validator=_AUTO_OR_POS, metadata=_auto_help(
        "train_ratio",
        "replayed steps per env step; updates per env step = train_ratio / (B * L)"))
    replay_capacity: int = attrs.field(default=0, validator=in_range(0), metadata=_auto_help(
        "replay_capacity", "replay size in steps, over all env streams"))
    checkpoint_replay: bool = attrs.field(default=False, metadata=_help(
        "keep the replay in checkpoints (about 1.4 GB per million 72x80 steps), so a resumed "
        "run continues exactly; false: checkpoints hold the models, optimisers and counters "
        "only, and a resumed run refills the replay from fresh env steps "
        "(algo.learning_starts) before it trains again"))
    learning_starts: int | None = attrs.field(
        default=None, validator=in_range(0, optional=True), metadata=_auto_help(
            "learning_starts", "env steps collected before the first update"))
    cpu_threads: int | None = attrs.field(
        default=None, validator=in_range(0, optional=True), metadata=_auto_help(
            "cpu_threads", "torch threads of a run that trains on the CPU (0: torch's own "
            "default, one per core); a CUDA run leaves them alone"))
    fixed_action: int = attrs.field(default=0, validator=in_range(0), metadata=_help(
        "action repeated in standing_still mode"))
    heldout_fraction: float = attrs.field(default=0.125, validator=in_range(0, 1, hi_open=True),
        metadata=_help(
        "share of env streams kept out of training in recon_check mode"))
    engine: str = attrs.field(default="sync", validator=_in(*ENGINES), metadata=_help(
        "sync (collect one env step, then its updates) | overlapped (on CUDA: collect the "
        "next chunk on a side stream while the committed replay trains on the main stream; "
        "on the CPU the same schedule runs sequentially)"))
    update_order: str = attrs.field(default="sequential", validator=_in(*UPDATE_ORDERS),
        metadata=_help(
        "sequential (the world model takes its optimiser step, then the actor and critic "
        "imagine with the stepped model) | concurrent (the actor and critic imagine with "
        "the world model's weights before its step, as DreamerV3's published code does; on "
        "CUDA their forward and backward run on a second stream beside the world model's "
        "backward)"))
    compile: bool | None = attrs.field(default=None, metadata=_auto_help(
        "compile", "run the update's posterior scan and imagination rollout as compiled "
        "graphs (CUDA graphs on a GPU, torch.compile on the CPU): the same losses, fewer "
        "kernel launches; the first update captures or compiles them"))
    fuse_steps: bool | None = attrs.field(default=None, metadata=_auto_help(
        "fuse_steps", "with algo.compile on CUDA: each step of the captured scan and "
        "rollout, and the update's work around them (embedding, world-model loss, "
        "actor-critic targets and losses), are torch.compile (inductor) programs that fuse "
        "elementwise work into fewer kernels; the CPU's algo.compile already compiles the "
        "whole loops; unset follows algo.compile where it is off"))
    update_graph: bool | None = attrs.field(default=None, metadata=_auto_help(
        "update_graph", "with algo.compile on CUDA: capture the whole update (losses, "
        "backward passes, clipping, optimiser steps) as one CUDA graph, replayed after the "
        "replay sample, so the host's Python no longer paces the GPU; Adam then keeps its "
        "step counts on the device; with several ranks (torchrun) the update runs "
        "uncaptured; unset follows algo.compile where it is off and is off with "
        "algo.update_order=concurrent"))
    matmul_precision: str = attrs.field(default=AUTO, validator=_in(AUTO, *PRECISIONS),
        metadata=_auto_help(
        "matmul_precision", "float32 matmul precision of the updates: highest (float32) | "
        "high (TF32 tensor cores on CUDA: an update of size S took 49 ms instead of 61 on an "
        "H200) | medium (bfloat16 internally where the device has it); "
        "torch.set_float32_matmul_precision decides what each device does with it"))
    conv_dtype: str = attrs.field(default=AUTO, validator=_in(AUTO, *CONV_DTYPES),
        metadata=_auto_help(
        "conv_dtype", "dtype of the frame encoder's and decoder's layers (an autocast "
        "region): float32 | bfloat16; their outputs, the normalisation layers, the weights, "
        "the RSSM and the losses stay float32 (docs/dreamer.md)"))
    cudnn_benchmark: bool | None = attrs.field(default=None, metadata=_auto_help(
        "cudnn_benchmark", "let cuDNN time its algorithms for each convolution shape of "
        "the updates once and keep the fastest (torch.backends.cudnn.benchmark, set around "
        "the updates); with float32 layers the chosen algorithms took 2.3 GiB more device "
        "memory at size S (docs/dreamer.md)"))
    overlap_chunk: int = attrs.field(default=16, validator=in_range(1), metadata=_help(
        "env iterations collected per chunk with algo.engine=overlapped; the player acts "
        "with a copy of the weights taken at the start of each chunk"))
    # world model
    model_lr: float = attrs.field(default=0.0, validator=_AUTO_OR_POS,
        metadata=_auto_help("model_lr", "world model learning rate"))
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
    actor_lr: float = attrs.field(default=0.0, validator=_AUTO_OR_POS,
        metadata=_auto_help("actor_lr", "actor learning rate"))
    critic_lr: float = attrs.field(default=0.0, validator=_AUTO_OR_POS,
        metadata=_auto_help("critic_lr", "critic learning rate"))
    ac_eps: float = attrs.field(default=1e-5, validator=_POS,
        metadata=_help("actor/critic Adam epsilon"))
    ac_clip: float = attrs.field(default=100.0, validator=_POS,
        metadata=_help("actor/critic grad-norm clip"))
    horizon: int = attrs.field(default=15, validator=in_range(1),
        metadata=_help("imagination horizon"))
    gamma: float = attrs.field(default=0.0, validator=in_range(0, 1), metadata=_auto_help(
        "gamma", "discount of the imagined returns (0.997 = 1 - 1/333, the paper's)"))
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

    def for_device(self, device: torch.device | str) -> DreamerConfig:
        """This config with every ``auto`` setting replaced by the device's default
        (:data:`DEVICE_PRESETS`); explicit values stay (implements
        :class:`gbx.api.DeviceDefaults`)."""
        preset = DEVICE_PRESETS[device_kind(device)]
        unset = {name: getattr(preset, name) for name in AUTO_FIELDS if self._is_auto(name)}
        if "fuse_steps" in unset and not unset.get("compile", self.compile):
            unset["fuse_steps"] = False  # nothing to fuse without the compiled loops
        if "update_graph" in unset and (not unset.get("compile", self.compile)
                                        or self.update_order == "concurrent"):
            unset["update_graph"] = False  # it captures the sequential compiled update
        return attrs.evolve(self, **unset) if unset else self

    def _is_auto(self, name: str) -> bool:
        return getattr(self, name) in _AUTO_MARKERS.get(name, (0, 0.0))

    @property
    def resolved(self) -> bool:
        """Whether no setting is left to the device (:meth:`for_device` was applied)."""
        return not any(self._is_auto(name) for name in AUTO_FIELDS)

    def _require_resolved(self) -> None:
        if not self.resolved:
            raise ValueError("dreamer_v3 config has device-dependent settings left at auto; "
                             "resolve it with for_device(device) first")

    def preset(self) -> SizePreset:
        if self.size == AUTO:
            self._require_resolved()
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

    @property
    def start_steps(self) -> int:
        """``learning_starts`` of a resolved config (env steps before the first update)."""
        self._require_resolved()
        assert self.learning_starts is not None
        return self.learning_starts

    def updates_per_env_step(self) -> float:
        self._require_resolved()
        return self.train_ratio / float(self.batch_size * self.batch_length)

    def min_env_steps(self) -> int:
        """Env steps until the first update: the replay must hold ``learning_starts`` steps
        and ``batch_length`` records per stream, then the iterations after that must earn
        one update (``train_ratio``), as the engine counts them."""
        first_ready = max(-(-self.start_steps // self.num_envs), self.batch_length - 1, 1)
        earned, iterations = 0.0, first_ready
        per_iteration = self.updates_per_env_step() * self.num_envs
        earned += per_iteration
        while earned < 1.0 and per_iteration > 0:
            earned += per_iteration
            iterations += 1
        return iterations * self.num_envs

    def __attrs_post_init__(self) -> None:
        if not self.resolved:
            # checked as the config of every kind of device it may run on
            for kind in DEVICE_PRESETS:
                try:
                    self.for_device(kind)
                except ValueError as exc:
                    raise ValueError(f"{exc} (with the {kind} defaults of the auto "
                                     "settings)") from None
            return
        if self.num_envs <= 0 or self.batch_size <= 0 or self.batch_length < 2:
            raise ValueError("algo.num_envs and algo.batch_size must be > 0, "
                             "algo.batch_length >= 2")
        if self.overlap_chunk <= 0:
            raise ValueError("algo.overlap_chunk must be > 0")
        if self.fuse_steps and not self.compile:
            raise ValueError("algo.fuse_steps fuses the steps of the compiled loops: set "
                             "algo.compile=true too, or leave algo.fuse_steps out")
        if self.update_graph and not self.compile:
            raise ValueError("algo.update_graph captures the update around the compiled "
                             "loops: set algo.compile=true too, or leave algo.update_graph "
                             "out")
        if self.update_graph and self.update_order == "concurrent":
            raise ValueError("algo.update_graph captures the sequential update: set "
                             "algo.update_order=sequential, or leave algo.update_graph out")
        per_stream = self.replay_capacity // self.num_envs
        need = self.batch_length + self.replay_reserve()
        if per_stream < need:
            raise ValueError(
                f"algo.replay_capacity={self.replay_capacity} leaves {per_stream} steps per "
                f"env stream; raise it to at least {need * self.num_envs}")
