"""What the installed plugins provide, and who provided it.

The plugin manager calls each plugin's ``register_*`` hook with a registrar
bound to that plugin (a :class:`Provider`). Registrars check their arguments,
refuse a name that another plugin already took (naming both distributions)
and store a small spec object in the :class:`Registry`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from gbx.errors import DuplicateRegistrationError, PluginError

if TYPE_CHECKING:
    import click

ARTIFACT_KINDS = ("meta", "checkpoint", "failure", "media")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")


@attrs.frozen
class Provider:
    """The plugin (and the distribution it ships in) that registered something."""

    plugin: str
    distribution: str
    version: str

    def __str__(self) -> str:
        return f"{self.distribution} (plugin {self.plugin!r})"


@attrs.frozen
class EnvSpec:
    name: str
    factory: Callable[..., Any]
    config_cls: type
    description: str
    provider: Provider


@attrs.frozen
class AlgorithmSpec:
    name: str
    trainer_cls: Callable[..., Any]
    config_cls: type
    description: str
    provider: Provider


@attrs.frozen
class ModelSpec:
    name: str
    builder: Callable[..., Any]
    description: str
    provider: Provider


@attrs.frozen
class ObserverSpec:
    name: str
    factory: Callable[..., Any]
    description: str
    provider: Provider
    # The attrs class of the observer's ``observer.<name>`` config section; None when the
    # observer takes no options. With a class, the factory is called ``factory(run, config)``.
    config_cls: type | None = None
    # Selected when a run names no observers (``run.observers`` empty).
    default: bool = False
    # label -> file it writes, relative to the run directory; `gbx run` names those present.
    outputs: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class WriterSpec:
    kind: str
    writer: Callable[..., Any]
    description: str
    provider: Provider


@attrs.frozen
class BenchmarkSpec:
    name: str
    command: click.Command
    provider: Provider


@attrs.frozen
class FuzzTargetSpec:
    name: str
    target: Callable[..., Any]
    description: str
    provider: Provider


@attrs.frozen
class CommandSpec:
    name: str
    provider: Provider


@attrs.define
class Registry:
    """Everything registered by the loaded plugins, keyed by name."""

    envs: dict[str, EnvSpec] = attrs.field(factory=dict)
    algorithms: dict[str, AlgorithmSpec] = attrs.field(factory=dict)
    models: dict[str, ModelSpec] = attrs.field(factory=dict)
    observers: dict[str, ObserverSpec] = attrs.field(factory=dict)
    writers: list[WriterSpec] = attrs.field(factory=list)
    benchmarks: dict[str, BenchmarkSpec] = attrs.field(factory=dict)
    commands: dict[str, CommandSpec] = attrs.field(factory=dict)
    fuzz_targets: dict[str, FuzzTargetSpec] = attrs.field(factory=dict)
    # (kind, name) -> one-line message, for names two plugins registered: such a name
    # is withdrawn, and only what asks for it fails (see gbx.resolve).
    clashes: dict[tuple[str, str], str] = attrs.field(factory=dict)
    # plugin (entry-point name) -> "<distribution>, <why>" for installed plugins that did
    # not load (left out by GBX_PLUGINS, failed to import or to register): the hint of a
    # "not installed" error, since the core knows no plugin by name.
    unloaded: dict[str, str] = attrs.field(factory=dict)

    def clash(self, kind: str, name: str) -> DuplicateRegistrationError | None:
        """The error to raise for a withdrawn ``name`` of ``kind``, or None."""
        message = self.clashes.get((kind, name))
        return None if message is None else DuplicateRegistrationError(message)

    def merge(self, other: Registry) -> list[str]:
        """Add what one plugin registered (``other``); return the clash messages.

        A name already taken by another plugin is withdrawn from both.
        """
        found: list[str] = []
        for kind, attr in _TABLES.items():
            mine, theirs = getattr(self, attr), getattr(other, attr)
            for name, spec in theirs.items():
                if (kind, name) in self.clashes:
                    continue
                if name in mine:
                    message = clash_message(kind, name, mine.pop(name).provider, spec.provider)
                    self.clashes[(kind, name)] = message
                    found.append(message)
                    continue
                mine[name] = spec
        self.writers.extend(other.writers)
        return found

    def writers_for(self, kind: str) -> list[WriterSpec]:
        """Writers serving one artifact kind, in registration order."""
        return [w for w in self.writers if w.kind == kind]

    def provided_by(self, plugin: str) -> dict[str, list[str]]:
        """Names each kind of object that ``plugin`` registered."""
        return {
            "algorithms": _names_of(self.algorithms, plugin),
            "envs": _names_of(self.envs, plugin),
            "observers": _names_of(self.observers, plugin),
            "writers": sorted({w.kind for w in self.writers if w.provider.plugin == plugin}),
            "models": _names_of(self.models, plugin),
            "commands": _names_of(self.commands, plugin),
            "benchmarks": _names_of(self.benchmarks, plugin),
            "fuzz_targets": _names_of(self.fuzz_targets, plugin),
        }


_TABLES = {"env": "envs", "algorithm": "algorithms", "model": "models",
           "observer": "observers", "benchmark": "benchmarks", "fuzz target": "fuzz_targets"}


def clash_message(kind: str, name: str, first: Provider, second: Provider) -> str:
    return (f"{kind} {name!r} is registered twice: by {first} and by {second}; "
            f"uninstall one of {first.distribution!r} and {second.distribution!r}")


def _names_of(table: dict[str, Any], plugin: str) -> list[str]:
    return sorted(name for name, spec in table.items() if spec.provider.plugin == plugin)


def _check_name(kind: str, name: object, provider: Provider) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise PluginError(
            f"{provider} registered {kind} name {name!r}: names must be lowercase "
            "letters, digits, '_', '-' or '.'"
        )
    return name


def _check_unique(kind: str, table: dict[str, Any], name: str, provider: Provider) -> None:
    if name in table:
        raise DuplicateRegistrationError(clash_message(kind, name, table[name].provider, provider))


def _check_config_cls(kind: str, name: str, config_cls: object, provider: Provider) -> type:
    if not (isinstance(config_cls, type) and attrs.has(config_cls)):
        raise PluginError(
            f"{provider} registered {kind} {name!r} with config class {config_cls!r}; "
            "it must be an attrs class (use @attrs.frozen)"
        )
    return config_cls


class _Registrar:
    """Base of the registrars: remembers the registry and the calling plugin."""

    def __init__(self, registry: Registry, provider: Provider) -> None:
        self.registry = registry
        self.provider = provider


class EnvRegistrar(_Registrar):
    """``register(name, factory, config_cls, description=...)`` for one plugin."""

    def __call__(
        self, name: str, factory: Callable[..., Any], config_cls: type, *, description: str = ""
    ) -> None:
        name = _check_name("env", name, self.provider)
        _check_unique("env", self.registry.envs, name, self.provider)
        config_cls = _check_config_cls("env", name, config_cls, self.provider)
        self.registry.envs[name] = EnvSpec(name, factory, config_cls, description, self.provider)


class AlgorithmRegistrar(_Registrar):
    """``register(name, trainer_cls, config_cls, description=...)`` for one plugin."""

    def __call__(
        self,
        name: str,
        trainer_cls: Callable[..., Any],
        config_cls: type,
        *,
        description: str = "",
    ) -> None:
        name = _check_name("algorithm", name, self.provider)
        _check_unique("algorithm", self.registry.algorithms, name, self.provider)
        config_cls = _check_config_cls("algorithm", name, config_cls, self.provider)
        self.registry.algorithms[name] = AlgorithmSpec(
            name, trainer_cls, config_cls, description, self.provider
        )


class ModelRegistrar(_Registrar):
    """``register(name, builder, description=...)`` for one plugin."""

    def __call__(self, name: str, builder: Callable[..., Any], *, description: str = "") -> None:
        name = _check_name("model", name, self.provider)
        _check_unique("model", self.registry.models, name, self.provider)
        self.registry.models[name] = ModelSpec(name, builder, description, self.provider)


class ObserverRegistrar(_Registrar):
    """``register(name, factory, config_cls=None, description=..., default=..., outputs=...)``
    for one plugin.

    ``config_cls`` (an attrs class) declares the observer's options: the config section
    ``observer.<name>`` (``[observer.gif]`` in a file, ``--set observer.gif.steps=50``),
    validated like the env and algorithm sections; the factory then gets the resolved
    instance as its second argument. ``default=True``: a run that names no observers uses
    it. ``outputs``: ``{label: path}`` of the files it writes, relative to the run directory
    (``{"log": "my_log.jsonl"}``), which ``gbx run`` names when it ends.
    """

    def __call__(self, name: str, factory: Callable[..., Any], config_cls: type | None = None,
                 *, description: str = "", default: bool = False,
                 outputs: Mapping[str, str] | None = None) -> None:
        name = _check_name("observer", name, self.provider)
        _check_unique("observer", self.registry.observers, name, self.provider)
        if config_cls is not None:
            config_cls = _check_config_cls("observer", name, config_cls, self.provider)
        self.registry.observers[name] = ObserverSpec(
            name, factory, description, self.provider, config_cls=config_cls,
            default=bool(default), outputs=dict(outputs or {}))


class WriterRegistrar(_Registrar):
    """``register(kind, writer, description=...)``; several writers may serve one kind."""

    def __call__(self, kind: str, writer: Callable[..., Any], *, description: str = "") -> None:
        if kind not in ARTIFACT_KINDS:
            raise PluginError(
                f"{self.provider} registered an artifact writer of kind {kind!r}; "
                f"kinds are {', '.join(ARTIFACT_KINDS)}"
            )
        self.registry.writers.append(WriterSpec(kind, writer, description, self.provider))


class BenchmarkRegistrar(_Registrar):
    """``register(name, command)`` with a ``click.Command`` for ``gbx bench NAME``."""

    def __call__(self, name: str, command: click.Command) -> None:
        name = _check_name("benchmark", name, self.provider)
        _check_unique("benchmark", self.registry.benchmarks, name, self.provider)
        self.registry.benchmarks[name] = BenchmarkSpec(name, command, self.provider)


class FuzzTargetRegistrar(_Registrar):
    """``register(name, target, description=...)`` for ``gbx fuzz`` (see
    :func:`gbx.hookspecs.register_fuzz_targets` for the target's contract)."""

    def __call__(self, name: str, target: Callable[..., Any], *, description: str = "") -> None:
        name = _check_name("fuzz target", name, self.provider)
        _check_unique("fuzz target", self.registry.fuzz_targets, name, self.provider)
        if not callable(target):
            raise PluginError(f"{self.provider} registered fuzz target {name!r} as "
                              f"{target!r}; it must be callable(rng, workdir)")
        self.registry.fuzz_targets[name] = FuzzTargetSpec(name, target, description,
                                                          self.provider)


def register_target_table(register: Callable[..., Any], targets: Any) -> None:
    """Register every entry of a module's ``TARGETS`` table: a mapping ``name -> target``
    or a sequence of ``(name, target)`` / ``(name, target, description)`` tuples."""
    items = targets.items() if isinstance(targets, dict) else targets
    for entry in items:
        name, target, *rest = entry
        register(name, target, description=str(rest[0]) if rest else "")
