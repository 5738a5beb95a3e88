"""Looking up plugins by name, with errors that say what to do.

A name that no loaded plugin provides is a one-line error listing what is installed.
The core knows no plugin by name: the hint comes from what the installed distributions
declare, i.e. their ``gbx`` entry points that did not load (left out by
``GBX_PLUGINS`` or failed to import), else it points at ``gbx plugins``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from gbx.api import SnapshotEnv
from gbx.errors import DeviceError, GbxError, PluginNotInstalledError
from gbx.registry import AlgorithmSpec, EnvSpec, ExplorerSpec, ObserverSpec, Registry

if TYPE_CHECKING:
    from gbx.config import ExploreConfig


def not_installed(registry: Registry, kind: str, name: str) -> PluginNotInstalledError:
    table: Mapping[str, object] = getattr(registry, f"{kind}s")  # env -> registry.envs, ...
    have = ", ".join(sorted(table)) or "none"
    if registry.unloaded:
        unloaded = "; ".join(f"{p} ({why})" for p, why in sorted(registry.unloaded.items()))
        hint = (f"installed plugins that did not load may provide it: {unloaded}; "
                "see `gbx plugins`")
    else:
        hint = "install the distribution that provides it (`gbx plugins` lists what is installed)"
    return PluginNotInstalledError(
        f"{kind} {name!r} is not installed (installed {kind}s: {have}); {hint}"
    )


def require_env(registry: Registry, name: str) -> EnvSpec:
    if name not in registry.envs:
        raise registry.clash("env", name) or not_installed(registry, "env", name)
    return registry.envs[name]


def require_algorithm(registry: Registry, name: str) -> AlgorithmSpec:
    if name not in registry.algorithms:
        raise registry.clash("algorithm", name) or not_installed(registry, "algorithm", name)
    return registry.algorithms[name]


def require_explorer(registry: Registry, name: str) -> ExplorerSpec:
    if name not in registry.explorers:
        raise registry.clash("explorer", name) or not_installed(registry, "explorer", name)
    return registry.explorers[name]


def wrap_explorer(registry: Registry, explore: ExploreConfig, env: Any, *, seed: int,
                  env_name: str) -> Any:
    """``env`` (a training batch) wrapped in the explorer ``explore`` selects; a one-line
    error (the env closed) when the env lacks :class:`gbx.api.SnapshotEnv`."""
    spec = require_explorer(registry, explore.name)
    if not isinstance(env, SnapshotEnv):
        env.close()
        raise GbxError(
            f"explorer {explore.name!r} needs an env with the gbx.api.SnapshotEnv "
            f"capability (snapshot and restore selected envs on the device); env "
            f"{env_name!r} lacks it: choose another env or set explore.name=none")
    return spec.factory(explore.settings, env, seed=seed)


def require_observer(registry: Registry, name: str) -> ObserverSpec:
    if name not in registry.observers:
        raise registry.clash("observer", name) or not_installed(registry, "observer", name)
    return registry.observers[name]


def default_observers(registry: Registry) -> tuple[str, ...]:
    """The observers registered with ``default=True`` (by name), else the built-in ``print``."""
    chosen = tuple(sorted(n for n, spec in registry.observers.items() if spec.default))
    return chosen or ("print",)


def resolve_device(spec: str) -> torch.device:
    """``auto`` -> CUDA when available else CPU; ``cuda[:i]`` must exist."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {spec!r} requested but CUDA is not available on this machine "
                "(torch was built without CUDA or no GPU is visible); use --device cpu or auto"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise DeviceError(
                f"device {spec!r} requested but only {count} CUDA device(s) exist "
                f"(cuda:0..cuda:{count - 1})"
            )
    return device
