"""``DreamerTrainer``: collect with the player, replay on the device, train world model and
actor-critic at the configured train ratio (``algo.engine``: synchronous, or collection
overlapped with training; see :mod:`gbx_algo_dreamer.engine`)."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any

import attrs
import torch

from gbx import distributed as gdist
from gbx.api import WindowMetrics
from gbx.seeds import Stream, derive
from gbx_algo_dreamer.behavior import Behavior, BehaviorOutput, Imagine
from gbx_algo_dreamer.config import DreamerConfig
from gbx_algo_dreamer.engine import (
    Engine,
    OverlappedEngine,
    PlayerWeights,
    StreamPair,
    SyncEngine,
)
from gbx_algo_dreamer.graphs import CompiledLoops
from gbx_algo_dreamer.math_ops import ReturnNorm, make_bins
from gbx_algo_dreamer.memory import check_memory
from gbx_algo_dreamer.player import Player
from gbx_algo_dreamer.precision import CONV_DTYPES, update_numerics
from gbx_algo_dreamer.replay import Batch, Replay
from gbx_algo_dreamer.update_graph import UpdateGraph
from gbx_algo_dreamer.world_model import ModelOutput, Observe, WorldModel
from gbx_toolkit.evaluation import (
    eval_batch_size,
    eval_generator,
    eval_seed,
    evaluate_policy,
    make_eval_env,
)
from gbx_toolkit.guard import NonFiniteError, new_trace_id, tensor_stats
from gbx_toolkit.metrics import MetricsAccumulator
from gbx_toolkit.rl_common import (
    add_env_step,
    capture_rng_state,
    check_step_budget,
    env_batch_state,
    restore_env_batch,
    restore_rng_state,
    seed_everything,
)
from gbx_toolkit.shades import unpack_shades

STATE_VERSION = 1


def _adam(params: Any, lr: float, eps: float, capturable: bool) -> torch.optim.Adam:
    return torch.optim.Adam(params, lr=lr, eps=eps, capturable=capturable)


def _match_capturable(opt: torch.optim.Optimizer, capturable: bool,
                      device: torch.device) -> None:
    """Give a loaded optimiser this trainer's ``capturable`` (a checkpoint carries the
    setting of the run that wrote it) and its step counts where that setting keeps them:
    on the device for a captured update, on the host otherwise."""
    for group in opt.param_groups:
        group["capturable"] = capturable
    for state in opt.state.values():
        step = state.get("step")
        if torch.is_tensor(step):
            state["step"] = step.to(device if capturable else torch.device("cpu"),
                                    torch.float32)


class DreamerTrainer:
    """DreamerV3 bound to one run (implements :class:`gbx.api.Trainer`)."""

    def __init__(self, config: DreamerConfig, ctx: Any) -> None:
        self.ctx = ctx
        self.device = torch.device(ctx.device)
        # the run loop resolves the auto settings already; a bare context may not have
        self.cfg = cfg = config.for_device(self.device)
        if self.device.type == "cpu" and cfg.cpu_threads:
            torch.set_num_threads(cfg.cpu_threads)  # the process's threads (algo.cpu_threads)
        self.env = ctx.make_env(cfg.num_envs, training=True)
        self.obs_shape = tuple(self.env.obs_shape)
        if len(self.obs_shape) != 3:
            raise ValueError(f"dreamer_v3 needs pixel observations [K, H, W]; the env gives "
                             f"{self.obs_shape}")
        self.num_actions = int(self.env.num_actions)
        if cfg.mode == "standing_still" and not 0 <= cfg.fixed_action < self.num_actions:
            raise ValueError(f"algo.fixed_action={cfg.fixed_action} is not an action of this "
                             f"env (0..{self.num_actions - 1})")
        self.per_stream = cfg.replay_capacity // cfg.num_envs
        self.memory = check_memory(cfg, self.obs_shape, self.num_actions, self.device)
        self.gen = seed_everything(derive(ctx.seed, Stream.TRAIN_RNG), self.device)
        size = cfg.preset()
        self.wm = WorldModel(self.obs_shape, self.num_actions, size, cfg.unimix, cfg.bins,
                             CONV_DTYPES[cfg.conv_dtype]).to(self.device)
        self.behavior = Behavior(self.wm.rssm.feat_dim, self.num_actions, cfg).to(self.device)
        # Several ranks (torchrun) start from rank 0's weights; update() averages gradients.
        gdist.sync_parameters(self.wm)
        gdist.sync_parameters(self.behavior)
        self.bins = make_bins(cfg.bins).to(self.device)
        if cfg.update_graph and (self.device.type != "cuda" or not cfg.compile):
            raise ValueError("algo.update_graph captures the update as a CUDA graph around "
                             "the compiled loops: it needs a CUDA device and "
                             "algo.compile=true; leave algo.update_graph out")
        # algo.update_graph: Adam's step counts on the device, as a captured step needs.
        # With several ranks (torchrun) the update stays uncaptured: the graph would have
        # to hold the ranks' gradient all-reduce, which is not captured here.
        self.graphed = graphed = bool(cfg.update_graph) and gdist.world_size() == 1
        self.model_opt = _adam(self.wm.parameters(), cfg.model_lr, cfg.model_eps, graphed)
        self.actor_opt = _adam(self.behavior.actor.parameters(), cfg.actor_lr, cfg.ac_eps,
                               graphed)
        self.critic_opt = _adam(self.behavior.critic.parameters(), cfg.critic_lr, cfg.ac_eps,
                                graphed)
        self.retnorm = ReturnNorm(self.device, cfg.retnorm_decay, cfg.retnorm_limit)
        self.replay = Replay(cfg.num_envs, self.per_stream, self.obs_shape, self.device,
                             reserved=cfg.replay_reserve())
        # algo.update_order=concurrent: a side stream for the actor-critic (none on the CPU)
        self.behavior_streams = StreamPair(self.device) \
            if cfg.update_order == "concurrent" else None
        # algo.compile: the update's scan and rollout as compiled graphs (same math)
        self.loops = CompiledLoops(self.wm, self.behavior, cfg.horizon, self.device,
                                   bool(cfg.fuse_steps)) if cfg.compile else None
        # algo.update_graph: the whole update as one CUDA graph, captured at the first update
        self.update_graph: UpdateGraph | None = None
        self.engine: Engine
        if cfg.engine == "overlapped":
            # the collecting player reads a copy refreshed per chunk, never the live weights
            weights = PlayerWeights(self.wm, self.behavior)
            self.player = Player(weights, weights, cfg.num_envs, self.device)
            self.engine = OverlappedEngine(self, weights, cfg.overlap_chunk)
        else:
            self.player = Player(self.wm, self.behavior, cfg.num_envs, self.device)
            self.engine = SyncEngine(self)
        n_held = max(1, int(cfg.num_envs * cfg.heldout_fraction)) if cfg.mode == "recon_check" \
            else 0
        if n_held >= cfg.num_envs:
            raise ValueError("algo.heldout_fraction leaves no env stream to train on")
        all_streams = torch.arange(cfg.num_envs, device=self.device)
        self.train_streams = all_streams[: cfg.num_envs - n_held] if n_held else None
        self.heldout_streams = all_streams[cfg.num_envs - n_held:] if n_held else None
        self.metrics = MetricsAccumulator(cfg.num_envs, self.num_actions, self.device,
                                          max_extras=64)
        if isinstance(self.env, WindowMetrics):  # e.g. an explorer's archive statistics
            self.metrics.add_source(self.env.window_metrics)
        # counters (host)
        self.env_steps = 0
        self.iterations = 0
        self.opt_steps = 0
        self.train_budget = 0.0
        self.trained_env_steps = 0  # env steps since updates began (for the replay ratio)
        # env steps and iterations the replay's contents come from: a run resumed from a
        # checkpoint without the replay refills it before it trains again
        self.replay_env_steps = 0
        self.replay_iterations = 0
        self.pending_env_steps = 0  # collected, ready, not yet counted (overlapped engine)
        # live env state (set on first train() call or by load_state_dict)
        self._obs: torch.Tensor | None = None
        self._is_first: torch.Tensor | None = None
        # device-side non-finite bookkeeping: first bad update's batch indices
        self._bad = torch.zeros((), dtype=torch.bool, device=self.device)
        self._bad_stream = torch.zeros(cfg.batch_size, dtype=torch.int64, device=self.device)
        self._bad_index = torch.zeros(cfg.batch_size, cfg.batch_length, dtype=torch.int64,
                                      device=self.device)
        self._act_player: Player | None = None
        self._act_gen: torch.Generator | None = None
        self.last_record: dict[str, Any] = {}

    # -- world model + behavior update ---------------------------------------------

    def _sample(self) -> Batch:
        return self.replay.sample(self.cfg.batch_size, self.cfg.batch_length, self.gen,
                                  self.train_streams)

    def update(self) -> dict[str, torch.Tensor]:
        """One gradient step of the world model and (in full mode) the actor and critic,
        its matmuls at ``algo.matmul_precision``, its convolutions' algorithms searched
        with ``algo.cudnn_benchmark``."""
        with update_numerics(self.cfg.matmul_precision, bool(self.cfg.cudnn_benchmark)):
            return self._update()

    def _update(self) -> dict[str, torch.Tensor]:
        batch = self._sample()
        if self.graphed:
            if self.update_graph is None:
                self.update_graph = UpdateGraph(self)
            scalars = self.update_graph(batch)
        else:
            scalars = self.train_step(batch)
        self.opt_steps += 1
        return scalars

    def draw_update_noise(self) -> tuple[torch.Tensor, ...]:
        """The uniforms an update's compiled loops draw from the trainer's generator, in
        their order: the posterior scan's, then (in full mode) the imagination's actions
        and latents."""
        cfg = self.cfg
        noise = [self.wm.rssm.scan_noise(cfg.batch_size, cfg.batch_length, self.device,
                                         self.gen)]
        if cfg.mode == "full":
            noise += self.behavior.imagination_noise(
                self.wm, cfg.batch_size * cfg.batch_length, cfg.horizon, self.device,
                self.gen)
        return tuple(noise)

    def optimisers(self) -> tuple[torch.optim.Optimizer, ...]:
        return self.model_opt, self.actor_opt, self.critic_opt

    def bad_state(self) -> tuple[torch.Tensor, ...]:
        """The non-finite bookkeeping an update changes in place."""
        return self._bad, self._bad_stream, self._bad_index

    def train_step(self, batch: Batch, noise: tuple[torch.Tensor, ...] | None = None
                   ) -> dict[str, torch.Tensor]:
        """The update on one replayed batch: losses, backward passes, clipping, optimiser
        steps. ``noise`` (:meth:`draw_update_noise`) gives the compiled loops their
        uniforms, drawn beforehand; that form runs inside a captured graph
        (``algo.update_graph``) and changes state only in place."""
        cfg = self.cfg
        loops = self.loops
        observe: Observe | None = loops.observe if loops else None
        imagine: Imagine | None = loops.imagine if loops else None
        if noise is not None:
            assert loops is not None, "drawn noise feeds the compiled loops"
            observe = functools.partial(loops.observe_drawn, noise=noise[0])
            if len(noise) == 3:
                imagine = functools.partial(loops.imagine_drawn, act_noise=noise[1],
                                            lat_noise=noise[2])
        out = self.wm.loss(batch.obs, batch.actions, batch.rewards, batch.is_first,
                           batch.is_terminal, self.bins, kl_dyn=cfg.kl_dyn, kl_rep=cfg.kl_rep,
                           free_bits=cfg.free_bits, generator=self.gen,
                           observe=observe,
                           embed=loops.embed if loops else None,
                           terms=loops.terms if loops else None)
        self.model_opt.zero_grad(set_to_none=True)
        beh: BehaviorOutput | None = None
        if cfg.mode == "full" and self.behavior_streams is not None:
            # algo.update_order=concurrent: the actor-critic imagines with the world model's
            # weights before its step; on CUDA its work runs on the side stream while the
            # world model's backward runs on the main stream (neither writes what the other
            # reads: the imagination and the targets take no gradients)
            self.behavior_streams.fork()  # the side stream sees the posterior states
            out.loss.backward()
            with self.behavior_streams.on_side():
                beh = self._behavior_backward(out, batch, imagine)
            self.behavior_streams.join()
        else:
            out.loss.backward()
        gdist.average_gradients(self.wm.parameters())
        model_norm = torch.nn.utils.clip_grad_norm_(self.wm.parameters(), cfg.model_clip)
        self.model_opt.step()
        scalars = dict(out.scalars)
        scalars["grad_norm_model"] = model_norm
        finite = [torch.isfinite(out.loss), torch.isfinite(model_norm)]
        if cfg.mode == "full":
            if beh is None:  # sequential: imagine with the stepped world model
                beh = self._behavior_backward(out, batch, imagine)
            gdist.average_gradients(self.behavior.parameters())
            actor_norm = torch.nn.utils.clip_grad_norm_(self.behavior.actor.parameters(),
                                                        cfg.ac_clip)
            critic_norm = torch.nn.utils.clip_grad_norm_(self.behavior.critic.parameters(),
                                                         cfg.ac_clip)
            self.actor_opt.step()
            self.critic_opt.step()
            self.behavior.update_slow_critic()
            scalars.update(beh.scalars)
            scalars["grad_norm_actor"] = actor_norm
            scalars["grad_norm_critic"] = critic_norm
            finite += [torch.isfinite(beh.actor_loss), torch.isfinite(beh.critic_loss),
                       torch.isfinite(actor_norm), torch.isfinite(critic_norm)]
        ok = torch.stack(finite).all()
        newly_bad = (~ok) & (~self._bad)
        # in place: a captured update reads and writes these tensors at every replay
        self._bad_stream.copy_(torch.where(newly_bad, batch.stream, self._bad_stream))
        self._bad_index.copy_(torch.where(newly_bad, batch.index, self._bad_index))
        self._bad.logical_or_(~ok)
        scalars["nonfinite"] = (~ok).float()
        return scalars

    def _behavior_backward(self, out: ModelOutput, batch: Batch,
                           imagine: Imagine | None) -> BehaviorOutput:
        """The actor-critic's losses from the posterior states of ``out`` and their
        backward pass (gradients of the actor and critic only)."""
        loops = self.loops
        start = out.post.detach()
        flat_start = type(start)(start.deter.reshape(-1, start.deter.shape[-1]),
                                 start.stoch.reshape(-1, *start.stoch.shape[-2:]))
        start_cont = (~batch.is_terminal).reshape(-1).float()
        beh = self.behavior.loss(self.wm, flat_start, start_cont, self.bins, self.retnorm,
                                 self.gen, imagine=imagine,
                                 targets=loops.targets if loops else None,
                                 terms=loops.policy_terms if loops else None)
        self.actor_opt.zero_grad(set_to_none=True)
        self.critic_opt.zero_grad(set_to_none=True)
        (beh.actor_loss + beh.critic_loss).backward()
        return beh

    # -- collection ----------------------------------------------------------------

    def _ensure_started(self) -> None:
        if self._obs is None:
            with self.engine.collecting():  # env tensors are born on the collection stream
                self._obs = self.env.reset()
                self._is_first = torch.ones(self.cfg.num_envs, dtype=torch.bool,
                                            device=self.device)
                self.replay.stage_first(self._obs)
            self.replay.commit()

    # -- what the engine drives (gbx_algo_dreamer.engine.Learner) --------------------

    @property
    def num_envs(self) -> int:
        return int(self.cfg.num_envs)

    def collect_step(self) -> None:
        """One env iteration: player, ``env.step``, staged replay records (the engine
        commits them), metrics. Runs on whatever stream is current."""
        cfg = self.cfg
        assert self._obs is not None and self._is_first is not None
        fixed = cfg.fixed_action if cfg.mode == "standing_still" else None
        if cfg.mode == "recon_check":
            action = torch.randint(0, self.num_actions, (cfg.num_envs,), device=self.device,
                                   generator=self.gen)
            self.player.step(self._obs, self._is_first, generator=self.gen)
            ent, value = None, None
        else:
            action, ent, value = self.player.step(self._obs, self._is_first,
                                                  generator=self.gen, fixed_action=fixed,
                                                  bins=self.bins)
        obs, reward, done, trunc, info = self.env.step(action)
        reset = info.get("reset_mask", done | trunc)
        arrived = info.get("final_obs", obs)
        self.replay.stage(arrived, action, reward, done, reset, obs)
        add_env_step(self.metrics, action, reward, done, trunc, info)
        if ent is not None:
            self.metrics.add_policy(entropy=ent, value=value)
        self._obs, self._is_first = obs, reset
        self.env_steps += cfg.num_envs
        self.iterations += 1
        self.replay_env_steps += cfg.num_envs
        self.replay_iterations += 1

    def earn(self, env_steps: int) -> int:
        """Count ``env_steps`` trained env steps (the replay ratio and the update budget);
        take the whole updates now owed out of the budget and return how many (host
        arithmetic, exact schedule)."""
        self.trained_env_steps += env_steps
        self.train_budget += self.cfg.updates_per_env_step() * env_steps
        n = 0
        while self.train_budget >= 1.0:
            self.train_budget -= 1.0
            n += 1
        return n

    def commit(self) -> None:
        """Make the staged replay records sampleable."""
        self.replay.commit()

    def add_update_scalars(self, scalars: Mapping[str, torch.Tensor]) -> None:
        self.metrics.add_scalars(**scalars)

    def crossing_tensors(self) -> list[torch.Tensor | None]:
        """Tensors the collection reads that may have been made on another stream: the
        live observations and the player's recurrent state."""
        return [self._obs, self._is_first, self.player.state.deter, self.player.state.stoch,
                self.player.prev_action]

    def ready(self) -> bool:
        # every stream holds at least replay_iterations + 1 records: a host-side lower bound
        return (self.replay_env_steps >= self.cfg.start_steps
                and self.replay_iterations + 1 >= self.cfg.batch_length)

    # -- records -------------------------------------------------------------------

    def _record(self, window_start: float, window_opt: int) -> dict[str, Any]:
        valid = self.replay.valid()
        if self.heldout_streams is not None and self.ready():
            self.metrics.add_scalars(**self.heldout_reconstruction())
        self.metrics.add_scalars(
            replay_size=valid.sum().to(torch.float32),
            ready_steps=torch.clamp(valid - self.cfg.batch_length + 1, min=0).sum().float(),
            nonfinite_seen=self._bad.float())
        rec: dict[str, Any] = dict(self.metrics.summary())  # the one host read
        elapsed = max(time.perf_counter() - window_start, 1e-9)
        rec["train_sps"] = (self.opt_steps - window_opt) / elapsed
        rec["env_steps"] = self.env_steps
        rec["step"] = self.env_steps
        rec["opt_steps"] = self.opt_steps
        rec["replay_ratio"] = (self.opt_steps * self.cfg.batch_size * self.cfg.batch_length
                               / max(self.trained_env_steps, 1))
        rec["replay_ratio_target"] = self.cfg.train_ratio
        rec["mode"] = self.cfg.mode
        if "imag_value_mean" in rec:
            rec.setdefault("value_mean", rec["imag_value_mean"])
            rec.setdefault("value_std", rec["imag_value_std"])
        if rec.get("nonfinite_seen", 0.0) > 0:
            self._raise_nonfinite(rec)
        self.last_record = rec
        return rec

    def _raise_nonfinite(self, rec: Mapping[str, Any]) -> None:
        # failure path: host reads are fine here
        stream, index = self._bad_stream[:2], self._bad_index[:2, :4]
        rows = stream[:, None].expand_as(index)
        payload = {
            "replay_stream": stream.tolist(),
            "replay_slots": index.tolist(),
            "actions": self.replay.actions[rows, index].tolist(),
            "rewards": self.replay.rewards[rows, index].tolist(),
            "obs_packed_first_frame": self.replay.obs[rows[0, 0], index[0, 0], 0].tolist(),
            "obs_stats": tensor_stats(self.replay.obs[rows, index]),
            "record": {k: v for k, v in rec.items() if isinstance(v, int | float | str)},
        }
        raise NonFiniteError(
            f"dreamer_v3 update produced a non-finite loss or gradient before opt step "
            f"{self.opt_steps}: lower algo.model_lr or check rewards/observations",
            trace_id=new_trace_id(), offending=[k for k in ("loss_model", "loss_actor",
                                                            "loss_critic") if k in rec],
            batch_stats=payload, step=self.env_steps)

    @torch.no_grad()
    def heldout_reconstruction(self) -> dict[str, torch.Tensor]:
        """Reconstruction NLL/accuracy on streams never trained on (recon_check mode)."""
        cfg = self.cfg
        batch = self.replay.sample(cfg.batch_size, cfg.batch_length, self.gen,
                                   self.heldout_streams)
        out = self.wm.loss(batch.obs, batch.actions, batch.rewards, batch.is_first,
                           batch.is_terminal, self.bins, kl_dyn=cfg.kl_dyn, kl_rep=cfg.kl_rep,
                           free_bits=cfg.free_bits, generator=self.gen)
        return {"heldout_obs_nll": out.scalars["obs_nll"],
                "heldout_recon_accuracy": out.shade_accuracy}

    # -- main loop -----------------------------------------------------------------

    def _done(self) -> bool:
        if self.cfg.total_env_steps and self.env_steps >= self.cfg.total_env_steps:
            return True
        return bool(self.ctx.should_stop())

    def _iterations_left(self) -> int:
        """Env iterations until ``algo.total_env_steps`` (a whole chunk when unbounded)."""
        if not self.cfg.total_env_steps:
            return self.cfg.overlap_chunk
        left = self.cfg.total_env_steps - self.env_steps
        return max(1, -(-left // self.cfg.num_envs))

    def _reached_total(self) -> bool:
        return bool(self.cfg.total_env_steps) and self.env_steps >= self.cfg.total_env_steps

    def _check_budget(self) -> None:
        """Refuse a budget that ends before the first update (it would train nothing)."""
        cfg = self.cfg
        run_cfg = getattr(self.ctx.config, "run", None)  # test contexts may have none
        total = cfg.total_env_steps or (int(run_cfg.steps) if run_cfg is not None else 0)
        if total:
            check_step_budget(total, cfg.min_env_steps(), algo="dreamer_v3",
                              unit="algo.learning_starts, algo.batch_length and "
                                   "algo.train_ratio at algo.num_envs",
                              from_algo_config=bool(cfg.total_env_steps))

    def train(self) -> None:
        cfg = self.cfg
        self._check_budget()
        self._ensure_started()
        window_start, window_opt = time.perf_counter(), self.opt_steps
        last_rec = self.iterations
        while not self._done():
            self.engine.advance(self._iterations_left())
            if self._reached_total():
                self.engine.drain()  # the last chunk's updates belong in the last record
            if self.iterations // cfg.record_every > last_rec // cfg.record_every:
                # Between engine steps (streams joined, replay committed): the run may
                # evaluate and checkpoint from inside record.
                self.ctx.record(self._record(window_start, window_opt))
                window_start, window_opt = time.perf_counter(), self.opt_steps
                last_rec = self.iterations
        # Stopped from outside (ctx.should_stop: --steps, signal): the updates the last chunk
        # earned stay pending in the run's final checkpoint and run first on resume, so the
        # records and the checkpoint agree (the replay ratio counts only steps whose updates
        # ran).
        if self.iterations != last_rec:  # iterations since the last record
            self.ctx.record(self._record(window_start, window_opt))

    # -- acting / evaluation -------------------------------------------------------

    @torch.no_grad()
    def act(self, obs: torch.Tensor, *, greedy: bool = True,
            is_first: torch.Tensor | None = None) -> torch.Tensor:
        """Actions for ``obs [N, K, H, W]``; the recurrent state persists between calls and
        restarts where ``is_first`` (or when the batch size changes)."""
        n = obs.shape[0]
        if self._act_player is None or self._act_player.num_envs != n:
            self._act_player = Player(self.wm, self.behavior, n, self.device)
            # the EVAL_RNG stream: acting for a tool or an observer (a rollout GIF) never
            # moves the training generator, so it cannot change the run
            self._act_gen = eval_generator(self.ctx, self.device)
            is_first = torch.ones(n, dtype=torch.bool, device=self.device)
        if is_first is None:
            is_first = torch.zeros(n, dtype=torch.bool, device=self.device)
        action, _, _ = self._act_player.step(obs.to(self.device), is_first.to(self.device),
                                             greedy=greedy, generator=self._act_gen)
        return action

    def evaluate(
        self, episodes: int, *, greedy: bool = True, baseline: bool = True
    ) -> dict[str, Any]:
        """Episodes on fresh envs from the task's real start state (evaluation envs), one
        env per episode, with the shared evaluator (plus its random baseline unless
        ``baseline=False``). The player draws from its own eval generator, so an evaluation
        leaves training's random streams as they were: a run trains the same whatever its
        evaluation cadence."""
        num = eval_batch_size(episodes)
        env = _ResetTracking(make_eval_env(self.ctx, num))
        player = Player(self.wm, self.behavior, num, self.device)
        # its own generator: evaluating never moves the training stream (self.gen)
        generator = eval_generator(self.ctx, self.device)

        def policy(obs: torch.Tensor) -> torch.Tensor:
            action, _, _ = player.step(obs, env.is_first, greedy=greedy, generator=generator)
            return action

        try:
            return evaluate_policy(
                env, policy, episodes, greedy=greedy, baseline=baseline,
                seed=eval_seed(self.ctx),
            )
        finally:
            env.close()

    # -- persistence ---------------------------------------------------------------

    def failure_context(self, stream: int = 0, steps: int = 16) -> dict[str, Any]:
        """The last ``steps`` replay entries of one env stream for failure bundles: frames
        ``[T, H, W]`` (newest stacked frame) and actions, oldest first, on the host."""
        replay = self.replay
        written = int(replay.cursor[stream])
        count = min(steps, written, replay.capacity)
        if count == 0:
            return {}
        slots = torch.arange(written - count, written, device=replay.device) % replay.capacity
        frames = unpack_shades(replay.obs[stream, slots, -1])
        return {"frames": frames.cpu(), "actions": replay.actions[stream, slots].cpu()}

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "config": attrs.asdict(self.cfg),
            "bins": self.bins.clone(),
            "world_model": self.wm.state_dict(),
            "behavior": self.behavior.state_dict(),
            "model_opt": self.model_opt.state_dict(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "retnorm": self.retnorm.state_dict(),
            # the replay only when asked: it is most of a checkpoint's size
            "replay": self.replay.state_dict() if self.cfg.checkpoint_replay else None,
            "player": self.player.state_dict(),
            "rng": capture_rng_state(self.gen),
            "counters": {"env_steps": self.env_steps, "iterations": self.iterations,
                         "opt_steps": self.opt_steps, "train_budget": self.train_budget,
                         "trained_env_steps": self.trained_env_steps,
                         "pending_env_steps": self.pending_env_steps,
                         "replay_env_steps": self.replay_env_steps,
                         "replay_iterations": self.replay_iterations},
            "live": self._live_state(),
        }

    def _live_state(self) -> dict[str, Any] | None:
        """The live env batch (observation, env state, per-env episode sums: the shared
        :func:`gbx_toolkit.rl_common.env_batch_state`) plus the streams starting an episode."""
        batch = env_batch_state(self.env, self._obs, self.metrics)
        if batch is None or self._is_first is None:
            return None
        return {**batch, "is_first": self._is_first.clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"dreamer_v3 checkpoint version {state.get('version')} is not "
                             f"{STATE_VERSION}; it was written by another gbx-algo-dreamer")
        bins = state["bins"].to(self.device)
        if bins.shape != self.bins.shape or not torch.equal(bins, self.bins):
            raise ValueError("checkpoint two-hot bins differ from algo.bins; resume with the "
                             "bin count it was trained with")
        self.wm.load_state_dict(state["world_model"])
        self.behavior.load_state_dict(state["behavior"])
        for opt, key in zip(self.optimisers(), ("model_opt", "actor_opt", "critic_opt"),
                            strict=True):
            opt.load_state_dict(state[key])
            _match_capturable(opt, self.graphed, self.device)
        self.update_graph = None  # it read the optimiser state the load replaced
        self.retnorm.load_state_dict(state["retnorm"])
        with_replay = state.get("replay") is not None
        if with_replay:
            self.replay.load_state_dict(state["replay"])
        self.player.load_state_dict(state["player"])
        rng = state["rng"]
        if "sampler" in rng:
            restore_rng_state(rng, self.gen)
        else:  # the layout of earlier version-1 checkpoints
            self.gen.set_state(rng["device"])
            torch.set_rng_state(rng["torch"])
        c = state["counters"]
        self.env_steps, self.iterations = int(c["env_steps"]), int(c["iterations"])
        self.opt_steps, self.train_budget = int(c["opt_steps"]), float(c["train_budget"])
        self.trained_env_steps = int(c["trained_env_steps"])
        self.pending_env_steps = int(c.get("pending_env_steps", 0))
        if with_replay:  # earlier checkpoints held the replay of the whole run
            self.replay_env_steps = int(c.get("replay_env_steps", self.env_steps))
            self.replay_iterations = int(c.get("replay_iterations", self.iterations))
        else:
            # an empty replay refills from here; updates earned on the lost one are dropped
            self.replay_env_steps = self.replay_iterations = self.pending_env_steps = 0
        with self.engine.collecting():  # env tensors are born on the collection stream
            restarted = self._restore_live(state["live"])
            if not with_replay and not restarted and self._obs is not None:
                self.replay.stage_first(self._obs)  # the live frame opens the new replay
        self.replay.commit()

    def _restore_live(self, live: Mapping[str, Any] | None) -> bool:
        """Put the live env batch back; True when its episodes had to restart (the
        restart's first frames are then staged in the replay)."""
        if live is None or live.get("obs") is None:
            return False  # saved before the first reset
        if live.get("env") is None:  # earlier checkpoints wrote None for a plain env
            live = {k: v for k, v in live.items() if k != "env"}
        obs = restore_env_batch(self.env, live, self.metrics, self.device, algo="dreamer_v3")
        if obs is not None:
            self._obs = obs.clone()
            self._is_first = live["is_first"].to(self.device).clone()
            return False
        # an env that is not a StatefulEnv cannot be restored: its episodes restart
        self._obs = self.env.reset()
        self._is_first = torch.ones(self.cfg.num_envs, dtype=torch.bool, device=self.device)
        self.replay.stage_first(self._obs)
        return True


class _ResetTracking:
    """Env wrapper remembering which streams start an episode, for the recurrent player."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.obs_shape, self.device = env.obs_shape, torch.device(env.device)
        self.is_first = torch.ones(env.num_envs, dtype=torch.bool, device=self.device)

    def reset(self) -> torch.Tensor:
        self.is_first = torch.ones_like(self.is_first)
        return self.env.reset()

    def step(self, actions: torch.Tensor) -> Any:
        obs, reward, done, trunc, info = self.env.step(actions)
        self.is_first = info.get("reset_mask", done | trunc)
        return obs, reward, done, trunc, info

    def close(self) -> None:
        self.env.close()
