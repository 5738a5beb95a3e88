from __future__ import annotations

import attrs
import pytest
from gbx_testplugins import (
    FakeEntryPoint,
    counter_plugin,
    make_counter_plugin,
    make_host,
    single_hook_plugin,
)

from gbx.errors import DuplicateRegistrationError, PluginError
from gbx.registry import EnvRegistrar, ObserverRegistrar, Provider, Registry, WriterRegistrar
from gbx.resolve import require_algorithm, require_env
from gbx.toy import ToyConfig, make_toy_env


def test_registrar_records_the_providing_distribution() -> None:
    registry = Registry()
    provider = Provider("mine", "gbx-mine", "1.2.3")
    EnvRegistrar(registry, provider)("grid", make_toy_env, ToyConfig, description="d")
    spec = registry.envs["grid"]
    assert spec.provider == provider
    assert spec.config_cls is ToyConfig
    assert registry.provided_by("mine")["envs"] == ["grid"]
    assert registry.provided_by("other")["envs"] == []


def test_same_env_name_from_two_plugins_names_both_distributions() -> None:
    def toy_again(register):
        register("toy", make_toy_env, ToyConfig)

    warnings: list[str] = []
    host = make_host(FakeEntryPoint("clash", single_hook_plugin("register_envs", toy_again),
                                    "gbx-clashing-env"), warnings=warnings)
    assert len(warnings) == 1
    for message in (warnings[0], host.registry.clashes[("env", "toy")]):
        assert "'toy'" in message and "gbx-core" in message and "gbx-clashing-env" in message
    assert "toy" not in host.registry.envs  # withdrawn: neither plugin's is used
    with pytest.raises(DuplicateRegistrationError, match="gbx-core.*gbx-clashing-env"):
        require_env(host.registry, "toy")
    with pytest.raises(DuplicateRegistrationError, match="registered twice"):
        make_host(FakeEntryPoint("clash", single_hook_plugin("register_envs", toy_again),
                                 "gbx-clashing-env"), environ={"GBX_STRICT_PLUGINS": "1"})


def test_same_algorithm_name_from_two_plugins_is_a_clash_only_for_that_name() -> None:
    host = make_host(FakeEntryPoint("a", counter_plugin, "gbx-a"),
                     FakeEntryPoint("b", make_counter_plugin(), "gbx-b"))
    with pytest.raises(DuplicateRegistrationError, match="gbx-a.*gbx-b"):
        require_algorithm(host.registry, "counter")
    # the other names of both plugins (their observer clashes too) and the core's stay
    assert "toy" in host.registry.envs and "ppo" not in host.registry.clashes
    assert {p.name for p in host.plugins} >= {"a", "b"}


@pytest.mark.parametrize("name", ["", "Bad Name", "UPPER", 3])
def test_invalid_names_are_refused(name: object) -> None:
    registry = Registry()
    with pytest.raises(PluginError, match="names must be"):
        EnvRegistrar(registry, Provider("p", "d", "1"))(name, make_toy_env, ToyConfig)  # type: ignore[arg-type]


def test_config_class_must_be_attrs() -> None:
    class Plain:
        pass

    with pytest.raises(PluginError, match="attrs class"):
        EnvRegistrar(Registry(), Provider("p", "d", "1"))("x", make_toy_env, Plain)


def test_an_observer_may_declare_a_config_section() -> None:
    @attrs.frozen
    class Options:
        every: int = 3

    registry = Registry()
    register = ObserverRegistrar(registry, Provider("p", "d", "1"))
    register("plain", dict)
    register("tuned", dict, Options, description="with options")
    assert registry.observers["plain"].config_cls is None
    assert registry.observers["tuned"].config_cls is Options
    with pytest.raises(PluginError, match="observer 'bad' with config class .*attrs class"):
        register("bad", dict, int)


def test_observer_sections_resolve_like_the_others(host) -> None:
    from gbx.config import build_config
    from gbx.errors import ConfigError

    @attrs.frozen
    class Options:
        every: int = attrs.field(default=3, validator=attrs.validators.ge(1))

    ObserverRegistrar(host.registry, Provider("p", "d", "1"))("tuned", dict, Options)
    config = build_config(host.registry, flags={"algo": "counter", "observers": ("tuned",)},
                          overrides=["observer.tuned.every=5"])
    assert config.observer == {"tuned": Options(every=5)}
    # not selected: no section unless a source names it
    assert build_config(host.registry, flags={"algo": "counter"}).observer == {}
    with pytest.raises(ConfigError, match=r"^invalid config: observer.tuned.every = 0: "):
        build_config(host.registry, flags={"algo": "counter"}, base={"observer": {"tuned": {
            "every": 0}}})
    with pytest.raises(ConfigError, match="observer.recorder: an observer without options"):
        build_config(host.registry, flags={"algo": "counter"},
                     overrides=["observer.recorder.x=1"])
    # a checkpoint's config names observers that need not be installed where it is loaded
    from gbx.config import from_dict, to_dict

    saved = to_dict(config) | {"observer": {"elsewhere": {"every": 1}}}
    with pytest.raises(ConfigError, match="observer.elsewhere: no installed observer"):
        from_dict(saved, host.registry)
    assert from_dict(saved, host.registry, observers=False).observer == {}


def test_writer_kind_is_checked_and_several_writers_share_a_kind() -> None:
    registry = Registry()
    register = WriterRegistrar(registry, Provider("p", "d", "1"))
    register("media", lambda run_dir, payload: run_dir)
    register("media", lambda run_dir, payload: run_dir)
    assert len(registry.writers_for("media")) == 2
    with pytest.raises(PluginError, match="kinds are"):
        register("videos", lambda run_dir, payload: run_dir)


def test_builtin_plugins_provide_toy_print_and_writers() -> None:
    host = make_host()
    reg = host.registry
    assert reg.envs["toy"].provider.distribution == "gbx-core"
    assert "print" in reg.observers
    assert {w.kind for w in reg.writers} >= {"meta", "checkpoint", "failure"}
    assert attrs.has(reg.envs["toy"].config_cls)


def test_default_observers_are_the_ones_registered_as_default() -> None:
    from gbx.registry import ObserverRegistrar, Provider, Registry
    from gbx.resolve import default_observers

    reg = Registry()
    register = ObserverRegistrar(reg, Provider("obs", "gbx-test-obs", "1"))
    register("print", object)
    assert default_observers(reg) == ("print",)
    register("log", object, default=True, outputs={"log": "log.txt"})
    register("chart", object, default=True)
    register("video", object)
    assert default_observers(reg) == ("chart", "log")
    assert reg.observers["log"].outputs == {"log": "log.txt"}
