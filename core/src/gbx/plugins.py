"""Finding, loading and querying gbx plugins.

Plugins come from two places:

* the core's built-in modules (:data:`BUILTIN_MODULES`), always loaded;
* the ``gbx`` entry-point group of the installed distributions.

Environment variables:

* ``GBX_PLUGINS=a,b`` loads only the entry points named ``a`` and ``b``;
  ``GBX_PLUGINS=`` (set but empty) loads none. Built-ins always load.
* ``GBX_STRICT_PLUGINS=1`` makes a plugin that fails to import or to register,
  and a name two plugins register, an error instead of a one-line warning.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

import attrs
import pluggy

from gbx import __version__, hookspecs
from gbx.errors import DuplicateRegistrationError, PluginError
from gbx.registry import (
    AlgorithmRegistrar,
    BenchmarkRegistrar,
    CommandSpec,
    EnvRegistrar,
    FuzzTargetRegistrar,
    ModelRegistrar,
    ObserverRegistrar,
    Provider,
    Registry,
    WriterRegistrar,
)

ENTRY_POINT_GROUP = "gbx"
CORE_DISTRIBUTION = "gbx-core"

# Built-in plugin modules of the core; a missing optional one is skipped silently
# so the core keeps working while that module is absent from a checkout.
BUILTIN_MODULES: tuple[str, ...] = (
    "gbx.toy",
    "gbx.builtin_observers",
    "gbx.artifacts",
    "gbx.fuzz",
)

_REGISTRARS: dict[str, Callable[[Registry, Provider], Any]] = {
    "register_envs": EnvRegistrar,
    "register_algorithms": AlgorithmRegistrar,
    "register_models": ModelRegistrar,
    "register_observers": ObserverRegistrar,
    "register_artifact_writers": WriterRegistrar,
    "register_benchmarks": BenchmarkRegistrar,
    "register_fuzz_targets": FuzzTargetRegistrar,
}


@attrs.frozen
class LoadedPlugin:
    """One plugin that imported and registered without error."""

    name: str
    distribution: str
    version: str
    module: str
    builtin: bool

    @property
    def provider(self) -> Provider:
        return Provider(self.name, self.distribution, self.version)


@attrs.frozen
class PluginFailure:
    """A plugin that could not be loaded, with the reason."""

    name: str
    distribution: str
    error: str


@attrs.define
class PluginHost:
    """The loaded plugins, the pluggy manager and the resulting registry."""

    pm: pluggy.PluginManager
    plugins: list[LoadedPlugin]
    failures: list[PluginFailure]
    registry: Registry

    def plugin(self, name: str) -> LoadedPlugin:
        for p in self.plugins:
            if p.name == name:
                return p
        raise KeyError(name)

    def add_commands(self, cli: Any) -> None:
        """Let every plugin add top-level subcommands; record who added what.

        A plugin whose hook raises adds nothing and is reported in :attr:`failures`;
        a command name taken twice is a clash: the core's command stays, a name two
        plugins add answers with the clash error.
        """
        owners = {name: CORE_DISTRIBUTION for name in cli.commands}
        for impl in self.pm.hook.register_commands.get_hookimpls():
            before = dict(cli.commands)
            provider = self.plugin(impl.plugin_name).provider
            try:
                _call_impl(impl, {"cli": cli})
            except Exception as exc:
                cli.commands.clear()
                cli.commands.update(before)
                self.failures.append(PluginFailure(
                    provider.plugin, provider.distribution,
                    f"failed in register_commands: {_format_exc(exc)}"))
                continue
            for name, command in list(cli.commands.items()):
                if name in before and before[name] is command:
                    continue
                if name in before:
                    message = (f"command {name!r} is defined by {owners[name]} and again by "
                               f"{provider}; uninstall one of them")
                    self.registry.clashes[("command", name)] = message
                    core = owners[name] == CORE_DISTRIBUTION
                    cli.commands[name] = before[name] if core else _clash_command(name, message)
                    continue
                owners[name] = str(provider)
                self.registry.commands[name] = CommandSpec(name, provider)


def _clash_command(name: str, message: str) -> Any:
    """A command that only reports that two plugins define ``name``."""
    import click

    def refuse(**_: Any) -> None:
        raise DuplicateRegistrationError(message)

    return click.Command(name, callback=refuse, help=f"(unavailable: {message})",
                         context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True})


def _call_impl(impl: Any, args: Mapping[str, Any]) -> None:
    impl.function(**{name: args[name] for name in impl.argnames})


def _selected_names(environ: Mapping[str, str]) -> set[str] | None:
    """Entry-point names selected by ``GBX_PLUGINS`` (None = all)."""
    if "GBX_PLUGINS" not in environ:
        return None
    return {n.strip() for n in environ["GBX_PLUGINS"].split(",") if n.strip()}


def _strict(environ: Mapping[str, str]) -> bool:
    return environ.get("GBX_STRICT_PLUGINS", "").strip().lower() in {"1", "true", "yes", "on"}


def _dist_of(ep: md.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown", "0"
    return str(dist.metadata["Name"]), str(dist.version)


def _format_exc(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def load_plugins(
    *,
    entry_points: Iterable[md.EntryPoint] | None = None,
    environ: Mapping[str, str] | None = None,
    builtin_modules: Iterable[str] = BUILTIN_MODULES,
    warn: Callable[[str], None] | None = None,
) -> PluginHost:
    """Import the plugins, run their registration hooks and return the host.

    ``entry_points`` defaults to the installed ``gbx`` group (tests pass fakes).
    A plugin that fails to import or whose registration hook raises is named in one
    warning and skipped; a name two plugins register is withdrawn and recorded in
    ``registry.clashes`` (what needs it fails with the clash, the rest works). With
    ``GBX_STRICT_PLUGINS=1`` each of these is a :class:`PluginError` instead.
    """
    environ = os.environ if environ is None else environ
    warn = warn or (lambda line: print(line, file=sys.stderr))
    if entry_points is None:
        entry_points = md.entry_points(group=ENTRY_POINT_GROUP)
    pm = pluggy.PluginManager("gbx")
    pm.add_hookspecs(hookspecs)
    plugins: list[LoadedPlugin] = []
    failures: list[PluginFailure] = []

    for modname in builtin_modules:
        try:
            module = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name == modname:  # optional built-in not present in this checkout
                continue
            raise
        pm.register(module, name=modname)
        plugins.append(LoadedPlugin(modname, CORE_DISTRIBUTION, __version__, modname, True))

    selected = _selected_names(environ)
    entry_points = sorted(entry_points, key=lambda e: e.name)
    unknown = sorted((selected or set()) - {ep.name for ep in entry_points})
    if unknown:
        warn(f"gbx: warning: GBX_PLUGINS names {', '.join(unknown)}, which no installed "
             "distribution provides")
    left_out: dict[str, str] = {}
    for ep in entry_points:
        dist, version = _dist_of(ep)
        if selected is not None and ep.name not in selected:
            left_out[ep.name] = f"{dist}, left out by GBX_PLUGINS"
            continue
        try:
            obj = ep.load()
            if pm.has_plugin(ep.name):
                raise PluginError(f"another plugin is already named {ep.name!r}")
            pm.register(obj, name=ep.name)
        except Exception as exc:
            failure = PluginFailure(ep.name, dist, _format_exc(exc))
            if _strict(environ):
                raise PluginError(
                    f"plugin {ep.name!r} from {dist} failed to load: {failure.error} "
                    "(unset GBX_STRICT_PLUGINS to skip it)"
                ) from exc
            warn(f"gbx: warning: plugin {ep.name!r} from {dist} failed to load: {failure.error}")
            failures.append(failure)
            continue
        where = obj.__name__ if isinstance(obj, ModuleType) else type(obj).__qualname__
        plugins.append(LoadedPlugin(ep.name, dist, version, where, False))

    registry = Registry()
    for plugin in list(plugins):
        # Each plugin registers into a registry of its own first, so one whose hook
        # raises is skipped whole, and a name two plugins share is a clash, not a crash.
        own = Registry()
        try:
            for hook_name, registrar_cls in _REGISTRARS.items():
                for impl in getattr(pm.hook, hook_name).get_hookimpls():
                    if impl.plugin_name == plugin.name:
                        _call_impl(impl, {"register": registrar_cls(own, plugin.provider)})
        except Exception as exc:
            message = (f"plugin {plugin.name!r} from {plugin.distribution} failed in "
                       f"{hook_name}: {_format_exc(exc)}")
            if _strict(environ) or plugin.builtin:
                raise PluginError(message) from exc
            warn(f"gbx: warning: {message}; it is skipped")
            failures.append(PluginFailure(plugin.name, plugin.distribution,
                                          f"failed in {hook_name}: {_format_exc(exc)}"))
            plugins.remove(plugin)
            pm.unregister(name=plugin.name)
            continue
        for message in registry.merge(own):
            if _strict(environ):
                raise DuplicateRegistrationError(message)
            warn(f"gbx: warning: {message}; commands that need it refuse to run")
    registry.unloaded.update(left_out)
    for failure in failures:
        registry.unloaded[failure.name] = f"{failure.distribution}, failed to load"
    return PluginHost(pm=pm, plugins=plugins, failures=failures, registry=registry)


_HOST: PluginHost | None = None


def get_host() -> PluginHost:
    """The process-wide plugin host, loaded on first use (warnings print once)."""
    global _HOST
    if _HOST is None:
        _HOST = load_plugins()
    return _HOST


def set_host(host: PluginHost | None) -> None:
    """Replace the process-wide host (tests; ``None`` reloads on next use)."""
    global _HOST
    _HOST = host
