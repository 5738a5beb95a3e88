"""Gymnasium adapter: any registered gbx env as a ``gymnasium.vector.VectorEnv``.

``GbxVectorEnv(env_name, num_envs, ...)`` looks the env up in the gbx plugin registry by
name, builds its ``env`` config section from a plain mapping (the same fields as
``--set env.*``) and steps the batched env directly: no per-env Python loop and, by
default, torch tensors that stay on the env's device. ``numpy=True`` gives NumPy arrays on
the host instead (one device-to-host copy per step). ``GbxEnv`` is the single-env view
(``gymnasium.Env``, ``num_envs=1``, NumPy) that ``gymnasium.make`` and Gymnasium's env
checker use.

Autoreset: gbx envs reset a finished env inside the same ``step`` call, so the adapter
declares ``AutoresetMode.SAME_STEP``: the observation returned for a finished env is
already the first one of its next episode; the last observation of the finished episode
is ``infos["final_obs"]`` (a dense batch, equal to the observation for the others) with
the mask ``infos["_final_obs"]``, and that step's per-env info is ``infos["final_info"]``
(mask ``infos["_final_info"]``).

Importing this module registers ``gbx/toy`` and ``gbx/quest-1`` .. ``gbx/quest-4`` with
Gymnasium; ``gymnasium.make_vec("gbx_gameboy.gymnasium_env:gbx/quest-1", num_envs=8)``
imports it on the fly (Gymnasium 1.x loads no plugins by itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gbx.config import structure_section
from gbx.plugins import get_host
from gbx.resolve import require_env, resolve_device

ID_NAMESPACE = "gbx"
# Pixel envs (obs_shape (K, H, W)) carry the Game Boy's shade indices 0..3 (gbx.api.Env).
MAX_SHADE = 3


def build_env(env_name: str, num_envs: int, device: str | torch.device, seed: int,
              config: Mapping[str, Any] | None = None) -> Any:
    """The registered gbx env ``env_name`` with its ``env`` section built from ``config``.

    Unknown env names and invalid fields raise gbx's one-line errors (``PluginNotInstalled
    Error``, ``ConfigError``), as ``gbx run --env ... --set env.*`` does.
    """
    spec = require_env(get_host().registry, env_name)
    cfg = structure_section(dict(config or {}), spec.config_cls, "env")
    return spec.factory(cfg, int(num_envs), resolve_device(str(device)), int(seed))


def observation_space(obs_shape: tuple[int, ...]) -> spaces.Box:
    """The single-env observation space: uint8, shades 0..3 for pixel envs."""
    high = MAX_SHADE if len(obs_shape) == 3 else 255
    return spaces.Box(0, high, shape=obs_shape, dtype=np.uint8)


class GbxVectorEnv(VectorEnv):
    """A batched gbx env behind Gymnasium's vector API (see the module docstring).

    ``env_name``: any name of ``gbx plugins`` (``toy``, ``gbx-quest-1``, ``gameboy-goal``...);
    ``config``: fields of its ``env`` section; ``device``: ``auto``, ``cpu`` or ``cuda[:i]``;
    ``numpy``: return NumPy arrays on the host instead of tensors on the device; ``copy``:
    in torch mode, return tensors the env will not overwrite on its next step (gbx envs hand
    out their own buffers; ``copy=False`` saves one device copy per tensor and step).
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env_name: str = "toy", num_envs: int = 1, *, device: str = "auto",
                 seed: int = 0, numpy: bool = False, copy: bool = True,
                 config: Mapping[str, Any] | None = None, render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"render_mode={render_mode!r}: the gbx adapter does not render; "
                             "use `gbx gif` or the observations")
        self.env_name = env_name
        self.config = dict(config or {})
        self.numpy = bool(numpy)
        self.copy = bool(copy)
        self._device_spec = str(device)
        self.env = build_env(env_name, num_envs, device, seed, self.config)
        self.num_envs = int(self.env.num_envs)
        self.device = torch.device(self.env.device)
        self.metadata = {**type(self).metadata, "torch": not self.numpy}
        self.single_observation_space = observation_space(tuple(self.env.obs_shape))
        self.single_action_space = spaces.Discrete(int(self.env.num_actions))
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        # Masks for info keys every env reports (Gymnasium pairs each key with `_key`).
        self._every = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)

    # -- Gymnasium API -------------------------------------------------------------------

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset every env. A ``seed`` rebuilds the env with it (gbx envs are seeded once)."""
        if options:
            raise ValueError(f"reset(options={options!r}): the gbx adapter takes no options "
                             "(every env resets; finished envs reset themselves in step)")
        if seed is not None:
            if not isinstance(seed, int | np.integer):
                raise ValueError(f"reset(seed={seed!r}): pass one int; a gbx env derives the "
                                 "seeds of its num_envs copies from it")
            self.env.close()
            self.env = build_env(self.env_name, self.num_envs, self._device_spec, int(seed),
                                 self.config)
        super().reset(seed=None if seed is None else int(seed))
        return self._out(self.env.reset()), {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, reward, done, trunc, info = self.env.step(self._actions(actions))
        mask = info.get("reset_mask", done | trunc)
        final_obs = info.get("final_obs")
        per_env: dict[str, Any] = {}
        infos: dict[str, Any] = {}
        for key, value in info.items():
            if key in ("reset_mask", "final_obs"):
                continue
            if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == self.num_envs:
                per_env[key] = value
                infos[key], infos[f"_{key}"] = value, self._every
            else:
                infos[key] = value
        if final_obs is not None:
            infos["final_obs"], infos["_final_obs"] = final_obs, mask
        final_info: dict[str, Any] = {}
        for key, value in per_env.items():
            final_info[key], final_info[f"_{key}"] = value, mask
        infos["final_info"], infos["_final_info"] = final_info, mask
        return (self._out(obs), self._out(reward), self._out(done), self._out(trunc),
                self._out(infos))

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()

    # -- conversions ---------------------------------------------------------------------

    def _actions(self, actions: Any) -> torch.Tensor:
        n, k = self.num_envs, int(self.env.num_actions)
        if isinstance(actions, torch.Tensor):
            # Range is not checked here: reading the values would synchronise with the device.
            out = actions.to(device=self.device, dtype=torch.int64)
        else:
            arr = np.asarray(actions)
            if arr.dtype.kind not in "iu":
                raise ValueError(f"actions: expected integers 0..{k - 1}, got dtype {arr.dtype}")
            if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= k):
                raise ValueError(f"actions: expected integers 0..{k - 1}, got "
                                 f"{int(arr.min())}..{int(arr.max())}")
            out = torch.as_tensor(arr.astype(np.int64), device=self.device)
        if tuple(out.shape) != (n,):
            raise ValueError(f"actions: expected shape ({n},) (one action per env), "
                             f"got {tuple(out.shape)}")
        return out

    def _out(self, value: Any) -> Any:
        """``value`` with every tensor a NumPy array (``numpy``) or a copy (``copy``).

        gbx envs may hand out their own buffers (the frame stack, the done flags), which
        the next step overwrites; Gymnasium's users keep what a step returns. On a CPU
        device ``.numpy()`` alone would still share the buffer, hence the forced copy.
        """
        if isinstance(value, torch.Tensor):
            if self.numpy:
                return value.detach().to("cpu", copy=True).numpy()
            return value.clone() if self.copy else value
        if isinstance(value, dict):
            return {k: self._out(v) for k, v in value.items()}
        return value


class GbxEnv(gymnasium.Env):
    """One gbx env (``num_envs=1``) as a ``gymnasium.Env`` with NumPy observations.

    Unlike the vector adapter it does not autoreset for the caller: the step that ends an
    episode returns that episode's last observation, and the next ``reset()`` starts a
    new one.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env_name: str = "toy", *, device: str = "cpu", seed: int = 0,
                 config: Mapping[str, Any] | None = None, render_mode: str | None = None) -> None:
        self.vec = GbxVectorEnv(env_name, 1, device=device, seed=seed, numpy=True,
                                config=config, render_mode=render_mode)
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        obs, _ = self.vec.reset(seed=seed, options=options)
        return obs[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, term, trunc, infos = self.vec.step(np.asarray([action], dtype=np.int64))
        ended = bool(term[0]) or bool(trunc[0])
        if ended and "final_obs" in infos:
            obs = infos["final_obs"]
        info = {k: v[0] for k, v in infos.get("final_info", {}).items() if not k.startswith("_")}
        return obs[0], float(reward[0]), bool(term[0]), bool(trunc[0]), info

    def close(self) -> None:
        if not self.vec.closed:
            self.vec.close()


def gymnasium_ids() -> dict[str, str]:
    """Gymnasium id -> gbx env name: the toy env and every bundled quest stage."""
    from gbx_gameboy.tasks import STAGE_TASKS

    ids = {f"{ID_NAMESPACE}/toy": "toy"}
    ids.update({f"{ID_NAMESPACE}/quest-{t.number}": t.env_name for t in STAGE_TASKS})
    return ids


def register_gymnasium_envs() -> list[str]:
    """Register the ids of :func:`gymnasium_ids` with Gymnasium (once); return them."""
    for env_id, name in gymnasium_ids().items():
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point=f"{__name__}:GbxEnv",
                vector_entry_point=f"{__name__}:GbxVectorEnv",
                kwargs={"env_name": name},
            )
    return list(gymnasium_ids())


register_gymnasium_envs()
