"""``toy``: a tiny batched pixel env in pure torch, registered like any plugin.

A player moves on a ``grid x grid`` board drawn into a Game Boy sized frame
(shade indices 0..3). The player's cell is drawn in shade 3 and the rectangle
spanned by the top-left corner and the player in shade 1, so every step
towards the goal (the bottom-right cell) brings the frame closer to the goal
template, the frame with the player on the goal cell. The env scores the
mean L1 pixel distance to that template, as the Game Boy goal envs do:

* ``dist = mean(|frame - goal|) / 3`` in ``[0, 1]``;
* ``reward = progress_scale * (dist_before - dist_after) + goal_bonus * done``;
* ``done`` after ``consec`` consecutive steps with ``dist < tau``;
* ``trunc`` after ``max_steps`` steps; both reset the env in place;
* with ``failure_cell`` set, the frame with the player on that cell is a failure
  template: a step whose frame is within ``tau`` of it ends the episode as a failure
  (``done``, ``-failure_penalty`` reward, ``info["failure"]``; ``info["success"]`` is
  the goal alone), scored like a goal (:func:`gbx.goal_math.end_as_failure`).

Actions follow the Game Boy buttons: 0 A, 1 B, 2 START (no effect here),
3 UP, 4 DOWN, 5 LEFT, 6 RIGHT. Every env steps at once; nothing loops over
envs in Python and nothing leaves the device.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch

from gbx import hookimpl
from gbx.config import in_range, option
from gbx.goal_math import count_under, end_as_failure, goal_reward, reached
from gbx.memory import check_env_memory

ACTION_NAMES = ("A", "B", "START", "UP", "DOWN", "LEFT", "RIGHT")
# (row, col) move of each action; A, B and START do nothing on this board.
_MOVES = ((0, 0), (0, 0), (0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))

_between = attrs.validators.and_


@attrs.frozen
class ToyConfig:
    """The ``env`` section of the toy env."""

    grid: int = option(4, "board size (grid x grid cells)", _between(
        attrs.validators.ge(2), attrs.validators.le(12)))
    height: int = option(72, "frame height in pixels", attrs.validators.ge(8))
    width: int = option(80, "frame width in pixels", attrs.validators.ge(8))
    stack_k: int = option(1, "frames stacked per observation (K)", _between(
        attrs.validators.ge(1), attrs.validators.le(8)))
    max_steps: int = option(48, "steps before an episode is truncated", attrs.validators.ge(1))
    tau: float = option(0.01, "distance under which the goal counts as reached", _between(
        attrs.validators.gt(0.0), attrs.validators.le(1.0)))
    consec: int = option(1, "consecutive steps under tau that end the episode",
                         attrs.validators.ge(1))
    goal_bonus: float = option(1.0, "reward added when an episode reaches the goal", in_range(0))
    progress_scale: float = option(
        4.0, "reward per unit of distance gained towards the goal template", in_range(0))
    random_start: bool = option(True, "random start cell per episode (else the top-left cell)")
    failure_cell: int = option(
        -1, "board cell (row * grid + col) whose frame is a failure screen: reaching it ends "
        "the episode as a failure; -1 = none", attrs.validators.ge(-1))
    failure_penalty: float = option(
        1.0, "reward taken away on the step that ends in the failure screen", in_range(0))

    def __attrs_post_init__(self) -> None:
        last = self.grid * self.grid - 1
        if self.failure_cell >= last:
            raise ValueError(f"failure_cell must be a board cell other than the goal's "
                             f"(0..{last - 1}) or -1, got {self.failure_cell}")


class ToyEnv:
    """Batched toy env; see the module docstring for the dynamics."""

    def __init__(
        self, config: ToyConfig, num_envs: int, device: torch.device | str, seed: int
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.config = config
        self.num_envs = num_envs
        self.num_actions = len(ACTION_NAMES)
        self.device = torch.device(device)
        self.obs_shape = (config.stack_k, config.height, config.width)
        check_env_memory("toy", num_envs, self.bytes_per_env(config), self.device)
        g = config.grid
        dev = self.device
        self._gen = torch.Generator(device=dev)
        self._gen.manual_seed(int(seed))
        # Flat index of the board cell each pixel shows (the frame is the board upscaled).
        row_cell = (torch.arange(config.height, device=dev) * g) // config.height
        col_cell = (torch.arange(config.width, device=dev) * g) // config.width
        self._pixel_cell = (row_cell.view(-1, 1) * g + col_cell.view(1, -1)).flatten()
        # Pixels per cell, so distances computed on cells equal the per-pixel mean.
        counts = torch.bincount(self._pixel_cell, minlength=g * g).to(torch.float32)
        self._cell_weight = counts / (3.0 * config.height * config.width)
        cell = torch.arange(g * g, device=dev)
        self._cell_rc = torch.stack((cell // g, cell % g), dim=1)  # [G*G, 2]
        self._moves = torch.tensor(_MOVES, dtype=torch.int64, device=dev)
        self._goal_cell = torch.tensor([[g - 1, g - 1]], dtype=torch.int64, device=dev)
        self._goal_cells = self._cells(self._goal_cell)  # [1, G*G]
        # Start cells: every cell but the goal's and the failure cell.
        starts = [c for c in range(g * g - 1) if c != config.failure_cell]
        self._start_choices = torch.tensor(starts, dtype=torch.int64, device=dev)
        self._failure_cells: torch.Tensor | None = None
        if config.failure_cell >= 0:
            fail = torch.tensor([[config.failure_cell // g, config.failure_cell % g]],
                                dtype=torch.int64, device=dev)
            self._failure_cells = self._cells(fail)
        n = num_envs
        self._pos = torch.zeros(n, 2, dtype=torch.int64, device=dev)
        self._t = torch.zeros(n, dtype=torch.int64, device=dev)
        self._consec = torch.zeros(n, dtype=torch.int64, device=dev)
        self._dist = torch.zeros(n, dtype=torch.float32, device=dev)
        self._frames = torch.zeros(n, *self.obs_shape, dtype=torch.uint8, device=dev)

    @staticmethod
    def bytes_per_env(config: ToyConfig) -> int:
        """Device bytes one env takes: its frame stack and a step's temporaries (the new
        stack, final observations, fresh frames: about 8 stacks) and its board cells."""
        frames = config.stack_k * config.height * config.width
        return 8 * frames + 16 * config.grid * config.grid + 64

    # -- pure helpers --------------------------------------------------------

    def _cells(self, pos: torch.Tensor) -> torch.Tensor:
        """Board shades ``uint8 [N, G*G]`` for player cells ``pos [N, 2]``."""
        row = self._cell_rc[:, 0].view(1, -1)
        col = self._cell_rc[:, 1].view(1, -1)
        r, c = pos[:, 0:1], pos[:, 1:2]
        inside = (row <= r) & (col <= c)
        player = (row == r) & (col == c)
        return inside.to(torch.uint8) + 2 * player.to(torch.uint8)

    def _frame(self, cells: torch.Tensor) -> torch.Tensor:
        """Upscale boards ``[N, G*G]`` to frames ``uint8 [N, H, W]``."""
        cfg = self.config
        return cells.index_select(1, self._pixel_cell).view(-1, cfg.height, cfg.width)

    def _distance(self, cells: torch.Tensor, template: torch.Tensor | None = None) -> torch.Tensor:
        """Mean L1 distance (shades / 3) of each frame to the goal template (or another)."""
        target = self._goal_cells if template is None else template
        diff = (cells.to(torch.int16) - target.to(torch.int16)).abs()
        return diff.to(torch.float32) @ self._cell_weight

    def _start_cells(self) -> torch.Tensor:
        g = self.config.grid
        if not self.config.random_start:
            return torch.zeros(self.num_envs, 2, dtype=torch.int64, device=self.device)
        # Uniform over every cell except the goal (the last cell) and the failure cell.
        pick = torch.randint(0, len(self._start_choices), (self.num_envs,), generator=self._gen,
                             device=self.device)
        idx = self._start_choices[pick]
        return torch.stack((idx // g, idx % g), dim=1)

    # -- Env API -------------------------------------------------------------

    def reset(self) -> torch.Tensor:
        self._pos = self._start_cells()
        self._t.zero_()
        self._consec.zero_()
        cells = self._cells(self._pos)
        self._dist = self._distance(cells)
        frame = self._frame(cells)
        self._frames.copy_(frame.unsqueeze(1).expand_as(self._frames))
        return self._frames.clone()

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        cfg = self.config
        move = self._moves[actions.to(device=self.device, dtype=torch.int64)]
        self._pos = (self._pos + move).clamp(0, cfg.grid - 1)
        self._t += 1
        cells = self._cells(self._pos)
        # Same goal semantics as the Game Boy goal envs (gbx.goal_math); the distance is
        # computed per board cell, which equals the per-pixel mean on these frames.
        dist = self._distance(cells)
        count_under(dist, cfg.tau, self._consec)
        done = reached(self._consec, cfg.consec)
        trunc = (self._t >= cfg.max_steps) & ~done
        reward = goal_reward(
            self._dist, dist, done, bonus=cfg.goal_bonus, shaping=cfg.progress_scale
        )
        success = done
        failure = torch.zeros_like(done)
        if self._failure_cells is not None:
            failure = self._distance(cells, self._failure_cells) < cfg.tau
            done = torch.empty_like(success)
            end_as_failure(failure, success, reward, penalty=cfg.failure_penalty, done=done)
            trunc = trunc & ~done

        # Shift the frame stack, then start finished envs afresh (no host sync).
        frame = self._frame(cells)
        self._frames = torch.cat((self._frames[:, 1:], frame.unsqueeze(1)), dim=1)
        final_obs = self._frames.clone()
        reset = done | trunc
        new_pos = self._start_cells()
        self._pos = torch.where(reset.view(-1, 1), new_pos, self._pos)
        self._t = torch.where(reset, torch.zeros_like(self._t), self._t)
        self._consec = torch.where(reset, torch.zeros_like(self._consec), self._consec)
        new_cells = self._cells(self._pos)
        fresh = self._frame(new_cells).unsqueeze(1).expand_as(self._frames)
        self._frames = torch.where(reset.view(-1, 1, 1, 1), fresh, self._frames)
        self._dist = torch.where(reset, self._distance(new_cells), dist)
        info = {"reset_mask": reset, "final_obs": final_obs, "dist": dist, "success": success,
                "failure": failure}
        return self._frames.clone(), reward, done, trunc, info

    def close(self) -> None:
        self._frames = self._frames[:0]

    # The env's whole state (gbx.api.StatefulEnv), so a resumed run continues its
    # episodes exactly (positions, step and goal counters, the frame stack and the
    # random stream of future starts).
    _STATE_FIELDS = ("_pos", "_t", "_consec", "_dist", "_frames")

    def env_state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {k: getattr(self, k).clone() for k in self._STATE_FIELDS}
        state["generator"] = self._gen.get_state()
        return state

    def load_env_state_dict(self, state: Mapping[str, Any]) -> None:
        for key in self._STATE_FIELDS:
            current = getattr(self, key)
            value = state[key]
            if tuple(value.shape) != tuple(current.shape):
                raise ValueError(
                    f"toy env state {key!r} has shape {tuple(value.shape)}, "
                    f"this env needs {tuple(current.shape)}: resume with the same num_envs"
                )
            setattr(self, key, value.to(device=current.device, dtype=current.dtype).clone())
        self._gen.set_state(state["generator"])

    # -- gbx.api.SnapshotEnv and GoalDistanceEnv ------------------------------------

    def snapshot_slots(self, capacity: int) -> ToySnapshots:
        """``capacity`` slots of env states (position and frame stack) on the device."""
        return ToySnapshots(self, capacity)

    def goal_distance(self) -> torch.Tensor:
        """Each env's pixel distance to the goal template (of its new start after a reset)."""
        return self._dist

    def meta(self) -> dict[str, Any]:
        """Facts about the env for the run metadata."""
        return {
            "env": "toy",
            "action_names": list(ACTION_NAMES),
            "frames_per_step": 1,
            "goal_cell": [self.config.grid - 1, self.config.grid - 1],
        }


class ToySnapshots:
    """Saved toy env states (:class:`gbx.api.EnvSnapshots`): the player's cell and the frame
    stack of each slot. A restored env starts a new episode there: step and goal counters
    at 0, distance recomputed from the restored cell."""

    def __init__(self, env: ToyEnv, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"snapshot capacity must be >= 1, got {capacity}")
        self.env = env
        self.capacity = capacity
        dev = env.device
        # One spare row past the end absorbs the envs that are not saved, so a save is one
        # index_copy_ over the batch, whatever the number of envs saved.
        self._pos = torch.zeros(capacity + 1, 2, dtype=torch.int64, device=dev)
        self._frames = torch.zeros(capacity + 1, *env.obs_shape, dtype=torch.uint8, device=dev)
        self.pos, self.frames = self._pos[:capacity], self._frames[:capacity]

    def save(self, slots: torch.Tensor) -> None:
        env = self.env
        rows = torch.where(slots >= 0, slots, self.capacity)
        self._pos.index_copy_(0, rows, env._pos)
        self._frames.index_copy_(0, rows, env._frames)

    def restore(self, slots: torch.Tensor) -> torch.Tensor:
        env = self.env
        take = slots >= 0
        idx = slots.clamp_min(0)
        env._pos = torch.where(take.view(-1, 1), self.pos[idx], env._pos)
        env._frames = torch.where(take.view(-1, 1, 1, 1), self.frames[idx], env._frames)
        env._t = env._t.masked_fill(take, 0)
        env._consec = env._consec.masked_fill(take, 0)
        env._dist = torch.where(take, env._distance(env._cells(env._pos)), env._dist)
        return env._frames.clone()

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"pos": self.pos, "frames": self.frames}

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self._pos, self._frames))


def make_toy_env(
    config: ToyConfig, num_envs: int, device: torch.device | str, seed: int
) -> ToyEnv:
    return ToyEnv(config, num_envs, device, seed)


@hookimpl
def register_envs(register: Any) -> None:
    register(
        "toy",
        make_toy_env,
        ToyConfig,
        description="pure-torch grid world drawn in Game Boy shades; learnable in seconds",
    )
