from __future__ import annotations

import json

import pytest
from gbx_testplugins import FakeEntryPoint, counter_plugin, make_host

from gbx.config import (
    Config,
    RunConfig,
    build_config,
    dumps_json,
    dumps_toml,
    from_dict,
    parse_value,
    read_config_file,
    to_dict,
)
from gbx.errors import ConfigError, PluginNotInstalledError


def build(host, *overrides: str, **flags):
    return build_config(host.registry, flags={"algo": "counter", **flags}, overrides=overrides)


@pytest.mark.parametrize(
    ("text", "value"),
    [("3e-4", 3e-4), ("7", 7), ("true", True), ("[1, 2]", [1, 2]), ('"x"', "x"),
     ("cpu", "cpu"), ('{"a": 1}', {"a": 1}), ("a,b", "a,b")],
)
def test_override_values_parse_as_literals_then_strings(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_overrides_reach_every_section(host) -> None:
    cfg = build(host, "algo.lr=0.5", "algo.mode=slow", "env.grid=3", "run.seed=9",
                "run.observers=print,recorder")
    assert cfg.algo.lr == 0.5 and cfg.algo.mode == "slow"
    assert cfg.env.grid == 3 and cfg.run.seed == 9
    assert cfg.run.observers == ("print", "recorder")


def test_text_fields_keep_the_raw_text(host) -> None:
    cfg = build(host, "algo.name=123", "run.tag=007")
    assert cfg.algo.name == "123" and cfg.run.tag == "007"


def test_default_observer_is_print_without_the_console_plugin(host) -> None:
    assert build(host).run.observers == ("print",)


def test_unknown_key_names_the_path_and_the_allowed_keys(host) -> None:
    with pytest.raises(ConfigError) as info:
        build(host, "algo.lrr=1")
    msg = str(info.value)
    assert "algo.lrr" in msg and "lr" in msg and "num_envs" in msg and "\n" not in msg


def test_wrong_type_names_path_value_and_expected_type(host) -> None:
    with pytest.raises(ConfigError, match=r"algo\.num_envs = 'many': expected int"):
        build(host, "algo.num_envs=many")
    with pytest.raises(ConfigError, match=r"algo\.num_envs = 2\.5: expected int"):
        build(host, "algo.num_envs=2.5")
    with pytest.raises(ConfigError, match=r"run\.debug = 'yes': expected bool"):
        build(host, "run.debug=yes")


def test_out_of_range_names_path_value_and_rule(host) -> None:
    with pytest.raises(ConfigError, match=r"algo\.lr = -1: must be > 0"):
        build(host, "algo.lr=-1")
    with pytest.raises(ConfigError, match=r"algo\.mode = 'turbo': must be one of 'fast', 'slow'"):
        build(host, "algo.mode=turbo")
    with pytest.raises(ConfigError, match=r"run\.steps = 0: must be >= 1"):
        build(host, steps=0)
    with pytest.raises(ConfigError, match=r"run\.device = 'gpu'"):
        build(host, device="gpu")


def test_several_problems_make_one_error(host) -> None:
    with pytest.raises(ConfigError) as info:
        build(host, "algo.num_envs=x", "env.nope=1")
    msg = str(info.value)
    assert "2 problems" in msg and "algo.num_envs" in msg and "env.nope" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("bad", ["lr=1", "algo.lr", "model.x=1", "algo.=1"])
def test_malformed_set_is_explained(host, bad: str) -> None:
    with pytest.raises(ConfigError, match="--set"):
        build(host, bad)


def test_unknown_plugin_in_config_lists_installed_and_points_at_gbx_plugins(host) -> None:
    with pytest.raises(PluginNotInstalledError) as info:
        build_config(host.registry, flags={"algo": "ppo"})
    msg = str(info.value)
    assert "algorithm 'ppo' is not installed" in msg and "counter" in msg
    assert "install the distribution that provides it" in msg and "`gbx plugins`" in msg
    with pytest.raises(PluginNotInstalledError, match="installed envs: toy"):
        build(host, env="atari")


def test_not_installed_names_the_installed_plugins_that_did_not_load() -> None:
    eps = (FakeEntryPoint("counter", counter_plugin, "gbx-test-counter"),
           FakeEntryPoint("broken", None, "gbx-broken", error=ImportError("nope")))
    host = make_host(*eps, environ={"GBX_PLUGINS": "broken"})
    with pytest.raises(PluginNotInstalledError) as info:
        build_config(host.registry, flags={"algo": "counter"})
    msg = str(info.value)
    assert "counter (gbx-test-counter, left out by GBX_PLUGINS)" in msg
    assert "broken (gbx-broken, failed to load)" in msg and "\n" not in msg


def test_unknown_section_is_refused(host) -> None:
    with pytest.raises(ConfigError, match="unknown section 'model'"):
        from_dict({"run": {"algo": "counter"}, "model": {}}, host.registry)


def test_config_files_toml_and_json(host, tmp_path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text('[run]\nalgo = "counter"\nseed = 4\n[algo]\nlr = 0.25\n')
    cfg = build_config(host.registry, base=read_config_file(toml), overrides=["run.seed=5"])
    assert cfg.run.seed == 5 and cfg.algo.lr == 0.25
    js = tmp_path / "run.json"
    js.write_text(dumps_json(cfg))
    assert build_config(host.registry, base=read_config_file(js)) == cfg
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\n")
    with pytest.raises(ConfigError, match="not valid toml"):
        read_config_file(bad)


def _installed_sections() -> list[tuple[str, str]]:
    """(env, algo) pairs covering every installed env and algorithm at least once."""
    from gbx.plugins import load_plugins

    registry = load_plugins(warn=lambda _: None).registry
    envs = sorted(registry.envs)
    algos = sorted(registry.algorithms)
    if not algos:  # a bare core: the test plugin's algorithm stands in
        return [(env, "counter") for env in envs]
    return [(env, algos[0]) for env in envs] + [(envs[0], algo) for algo in algos[1:]]


@pytest.mark.parametrize(("env", "algo"), _installed_sections())
def test_every_installed_section_round_trips_through_json_and_toml(env: str, algo: str) -> None:
    from gbx.plugins import load_plugins

    registry = load_plugins(warn=lambda _: None).registry
    if algo == "counter" and "counter" not in registry.algorithms:
        registry = make_host(FakeEntryPoint("counter", counter_plugin, "gbx-test")).registry
    cfg = build_config(registry, flags={"algo": algo, "env": env})
    assert isinstance(cfg, Config) and isinstance(cfg.run, RunConfig)
    again = from_dict(json.loads(dumps_json(cfg)), registry)
    assert again == cfg
    import tomllib

    assert from_dict(tomllib.loads(dumps_toml(cfg)), registry) == cfg
    assert to_dict(again) == to_dict(cfg)
