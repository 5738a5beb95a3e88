"""Looking up plugins by name, with errors that say what to install.

A name that no installed plugin provides is a one-line error listing what is
installed and, for first-party names, which distribution provides it.
"""

from __future__ import annotations

import re

import torch

from gbx.errors import DeviceError, PluginNotInstalledError
from gbx.registry import AlgorithmSpec, EnvSpec, ExplorerSpec, ObserverSpec, Registry

# First-party names -> the distribution that provides them (and its source folder).
FIRST_PARTY: dict[str, dict[str, str]] = {
    "algorithm": {"ppo": "gbx-algo-ppo", "a2c": "gbx-algo-a2c", "dreamer_v3": "gbx-algo-dreamer"},
    "env": {
        "gameboy": "gbx-env-gameboy",
        "gameboy-goal": "gbx-env-gameboy",
        "pyboy": "gbx-env-pyboy",
        "pyboy-goal": "gbx-env-pyboy",
    },
    "explorer": {"archive": "gbx-explore"},
    "observer": {
        name: "gbx-observers" for name in ("jsonl", "console", "plot", "gif", "tensorboard")
    },
}
_FIRST_PARTY_PATTERNS: dict[str, list[tuple[re.Pattern[str], str]]] = {
    "env": [
        (re.compile(r"^gbx-quest-\d+$"), "gbx-env-gameboy"),
        (re.compile(r"^pyboy-quest-\d+$"), "gbx-env-pyboy"),
    ],
}
_SOURCE_DIRS = {
    "gbx-algo-ppo": "plugins/algo_ppo",
    "gbx-algo-a2c": "plugins/algo_a2c",
    "gbx-algo-dreamer": "plugins/algo_dreamer",
    "gbx-env-gameboy": "plugins/env_gameboy",
    "gbx-env-pyboy": "plugins/env_pyboy",
    "gbx-observers": "plugins/observers",
    "gbx-explore": "plugins/explore",
}


def distribution_for(kind: str, name: str) -> str | None:
    """The first-party distribution that provides ``name``, if any."""
    if name in FIRST_PARTY.get(kind, {}):
        return FIRST_PARTY[kind][name]
    for pattern, dist in _FIRST_PARTY_PATTERNS.get(kind, []):
        if pattern.match(name):
            return dist
    return None


def install_hint(dist: str) -> str:
    """How to install a first-party distribution: its wheel, or editable from a checkout."""
    source = _SOURCE_DIRS.get(dist)
    return f"pip install {dist}" + (f", or pip install -e {source} in a checkout" if source else "")


def missing_first_party(registry: Registry) -> dict[str, dict[str, str]]:
    """First-party algorithms, envs, explorers and observers not installed:
    ``{kind: {name: dist}}``."""
    installed: dict[str, set[str]] = {"algorithm": set(registry.algorithms),
                                      "env": set(registry.envs),
                                      "explorer": set(registry.explorers),
                                      "observer": set(registry.observers)}
    return {
        kind: {n: d for n, d in names.items() if n not in installed[kind]}
        for kind, names in FIRST_PARTY.items()
        if any(n not in installed[kind] for n in names)
    }


def not_installed(kind: str, name: str, installed: list[str]) -> PluginNotInstalledError:
    have = ", ".join(sorted(installed)) or "none"
    dist = distribution_for(kind, name)
    if dist is not None:
        hint = f"it is provided by {dist} ({install_hint(dist)})"
    else:
        hint = "no first-party distribution provides it; install the plugin that does"
    return PluginNotInstalledError(
        f"{kind} {name!r} is not installed (installed {kind}s: {have}); {hint}"
    )


def require_env(registry: Registry, name: str) -> EnvSpec:
    if name not in registry.envs:
        known = list(registry.envs)
        raise registry.clash("env", name) or not_installed("env", name, known)
    return registry.envs[name]


def require_algorithm(registry: Registry, name: str) -> AlgorithmSpec:
    if name not in registry.algorithms:
        known = list(registry.algorithms)
        raise registry.clash("algorithm", name) or not_installed("algorithm", name, known)
    return registry.algorithms[name]


def require_explorer(registry: Registry, name: str) -> ExplorerSpec:
    if name not in registry.explorers:
        known = list(registry.explorers)
        raise registry.clash("explorer", name) or not_installed("explorer", name, known)
    return registry.explorers[name]


def require_observer(registry: Registry, name: str) -> ObserverSpec:
    if name not in registry.observers:
        known = list(registry.observers)
        raise registry.clash("observer", name) or not_installed("observer", name, known)
    return registry.observers[name]


# Every run keeps its structured log and its plot when the observers plugin is there;
# the log is the source the plot and `gbx log` read.
DEFAULT_OBSERVERS = ("console", "jsonl", "plot")


def default_observers(registry: Registry) -> tuple[str, ...]:
    """``console,jsonl,plot`` (those installed), else the built-in ``print``."""
    chosen = tuple(n for n in DEFAULT_OBSERVERS if n in registry.observers)
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
