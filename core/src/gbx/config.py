"""Run configuration: attrs classes, a strict cattrs converter, files and overrides.

A resolved :class:`Config` has four sections:

* ``run``  -- :class:`RunConfig` (algorithm, env, observers, device, seed, ...);
* ``env``  -- the config class the selected env registered;
* ``algo`` -- the config class the selected algorithm registered;
* ``observer`` -- one sub-section ``observer.<name>`` per observer that registered a
  config class, for the selected observers and any other one the sources name.
* ``explore`` -- :class:`ExploreConfig`: ``explore.name`` picks an explorer (``none``,
  the default, is off) and the section's other keys are that explorer's fields.

Sources are merged in this order, later ones winning: class defaults,
``--config FILE`` (TOML or JSON with the same sections), the dedicated CLI
flags (``--algo``, ``--seed`` ...) and ``--set section.key=value`` overrides.
Every problem is reported as one :class:`gbx.errors.ConfigError` naming the
dotted path, the bad value and what is allowed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import tomllib
import typing
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import attrs
import cattrs
import tomli_w

from gbx.config_errors import ConfigTypeError, describe, type_name
from gbx.errors import ConfigError

if TYPE_CHECKING:
    from gbx.registry import Registry

SECTIONS = ("run", "env", "algo", "observer", "explore")
EXPLORE_OFF = "none"
_NAME_RE = r"^[a-z0-9][a-z0-9_.\-]*$"
_DEVICE_RE = r"^(auto|cpu|cuda(:[0-9]+)?)$"
_TAG_RE = r"^[A-Za-z0-9_.\-]*$"
TMP_SUFFIX = ".tmp"  # temporary files of atomic writes: .<name>.<random>.tmp


def option(default: Any, help: str, validator: Any = None) -> Any:
    """An attrs field with a default and its ``help`` text (shown by ``gbx config``)."""
    return attrs.field(default=default, validator=validator, metadata={"help": help})


def module_class(cls: type, module: str) -> type:
    """Make a generated config class (``attrs.make_class``) picklable as ``module.<name>``.

    Pickle finds a class by ``__module__`` and ``__qualname__``; a class built at run
    time is no module attribute, so several ranks could not share a config holding it.
    Binds ``cls`` to its ``__name__`` in ``module`` and points both attributes there.
    """
    import sys

    cls.__module__ = module
    cls.__qualname__ = cls.__name__
    setattr(sys.modules[module], cls.__name__, cls)
    return cls


_matches = attrs.validators.matches_re


@attrs.frozen
class Range:
    """attrs validator: a number within bounds (the one range check of config fields).

    ``lo``/``hi`` of None mean unbounded; ``lo_open``/``hi_open`` exclude the bound;
    ``optional`` also accepts None. NaN and infinities are always refused (files and
    ``--set`` cannot give them: :func:`make_converter` refuses them first). The bounds
    are plain attributes, so tests can check every field against what it declares.
    """

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    optional: bool = False

    def describe(self) -> str:
        def num(x: float) -> str:
            return str(int(x)) if float(x).is_integer() else f"{x:g}"

        if self.lo is None and self.hi is None:
            return "must be a finite number"
        if self.hi is None:
            return f"must be {'>' if self.lo_open else '>='} {num(self.lo)}"  # type: ignore[arg-type]
        if self.lo is None:
            return f"must be {'<' if self.hi_open else '<='} {num(self.hi)}"
        return (f"must be in {'(' if self.lo_open else '['}{num(self.lo)}, "
                f"{num(self.hi)}{')' if self.hi_open else ']'}")

    def admits(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return not (self.hi is not None
                    and (value >= self.hi if self.hi_open else value > self.hi))

    def __call__(self, _inst: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is None and self.optional:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not self.admits(value):
            rule = self.describe() + (" (or none)" if self.optional else "")
            raise ValueError(f"'{attribute.name}' {rule}: {value!r}")


def in_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
             hi_open: bool = False, optional: bool = False) -> Range:
    """A :class:`Range` validator: ``in_range(0, lo_open=True)`` is ``> 0``, finite."""
    return Range(lo, hi, lo_open, hi_open, optional)


def _names_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(value)


@attrs.frozen
class RunConfig:
    """The ``run`` section: what to run, where, and for how long."""

    algo: str = option("ppo", "algorithm name (see `gbx plugins`)", _matches(_NAME_RE))
    env: str = option("toy", "environment name (see `gbx plugins`)", _matches(_NAME_RE))
    observers: tuple[str, ...] = option(
        (), "observer names; empty means the observers registered as defaults, else `print`"
    )
    device: str = option(
        "auto", "auto | cpu | cuda | cuda:INDEX (auto picks CUDA when available)",
        _matches(_DEVICE_RE),
    )
    seed: int = option(0, "random seed of envs, models and sampling", attrs.validators.ge(0))
    steps: int = option(100_000, "total environment steps to train for", attrs.validators.ge(1))
    run_dir: str | None = option(
        None, "run directory; default runs/<timestamp>__<algo>__<env>__<tag>/"
    )
    tag: str = option("", "free label appended to the run directory name", _matches(_TAG_RE))
    resume: str | None = option(None, "run directory this run was resumed from")
    init_from: str | None = option(
        None, "start from the policy weights of this run directory or checkpoint (a "
        "curriculum's next stage); optimiser and counters start fresh"
    )
    keep_checkpoints: int = option(
        3, "checkpoint files kept in the run directory (the newest ones)", attrs.validators.ge(1)
    )
    debug: bool = option(False, "check every env step output at the boundary (slow)")
    eval_every: int = option(
        0, "evaluate every this many env steps during training, at the first record past "
        "each multiple; 0 = only the evaluation at the end (run.final_eval_episodes)",
        attrs.validators.ge(0),
    )
    eval_episodes: int = option(
        32, "episodes per evaluation during training (run.eval_every)", attrs.validators.ge(1)
    )
    eval_greedy: bool = option(
        True, "evaluations during training act greedily (else they sample the policy)"
    )
    eval_baseline: bool = option(
        False, "evaluations during training also play the random-policy baseline (the "
        "evaluation at the end always does)"
    )
    stop_at_success: float = option(
        0.0, "end the run once an evaluation during training (run.eval_every) reaches this "
        "success rate; the run is checkpointed at that step, so its latest checkpoint holds "
        "the evaluated policy (what a curriculum's next stage starts from, run.init_from); "
        "0 = off", in_range(0.0, 1.0),
    )
    max_seconds: float = option(
        0.0, "end the run at the first record after this many seconds of wall clock, "
        "counted from its start and, for a resumed run, on from the time its checkpoint "
        "recorded; it is checkpointed and evaluated at the end as when its steps are done; "
        "0 = no limit", attrs.validators.ge(0.0),
    )
    checkpoint_every: int = option(
        1_000_000, "checkpoint every this many env steps, at the first record past each "
        "multiple; 0 = only the checkpoint at the end", attrs.validators.ge(0),
    )
    final_eval_episodes: int = option(
        8, "greedy evaluation episodes when training ends, sent to every observer "
        "(the gif observer draws a rollout); 0 = none", attrs.validators.ge(0),
    )


@attrs.frozen
class ExploreConfig:
    """The ``explore`` section: which explorer wraps the training envs, and its fields.

    In files and ``--set`` the section is flat (``explore.name``, ``explore.bonus``...);
    here ``settings`` is the selected explorer's config class (None when off).
    """

    name: str = option(EXPLORE_OFF, "exploration method (see `gbx plugins`); none = off",
                       _matches(_NAME_RE))
    settings: Any = None

    @property
    def enabled(self) -> bool:
        return self.name != EXPLORE_OFF


@attrs.frozen
class Config:
    """A resolved configuration: the run section, the env and algorithm sections and the
    observers' sections (``observer[name]``, an instance of that observer's config class)
    and the exploration section."""

    run: RunConfig
    env: Any
    algo: Any
    observer: Mapping[str, Any] = attrs.field(factory=dict)
    explore: ExploreConfig = attrs.field(factory=ExploreConfig)


# ---------------------------------------------------------------------------
# Converter: strict scalars (no silent 3.7 -> 3 or "no" -> True)
# ---------------------------------------------------------------------------


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool):
        raise ConfigTypeError(value, "int")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ConfigTypeError(value, "int")


def _strict_float(value: Any, _: type) -> float:
    # NaN passes every comparison-based range check as False and inf passes '> 0':
    # no config field means either, so they are refused for every float field here.
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ConfigTypeError(value, "a finite float")
        return float(value)
    raise ConfigTypeError(value, "float")


def _strict_bool(value: Any, _: type) -> bool:
    if isinstance(value, bool):
        return value
    raise ConfigTypeError(value, "bool (true or false)")


def _strict_str(value: Any, _: type) -> str:
    if isinstance(value, str):
        return value
    raise ConfigTypeError(value, "str")


def _path(value: Any, _: type) -> Path:
    if isinstance(value, str | os.PathLike):
        return Path(value)
    raise ConfigTypeError(value, "path")


def _is_str_tuple(tp: Any) -> bool:
    return typing.get_origin(tp) is tuple and typing.get_args(tp) == (str, Ellipsis)


def make_converter() -> cattrs.Converter:
    """The converter used for every config section (plugins' included)."""
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(Path, _path)
    conv.register_unstructure_hook(Path, str)

    def names(value: Any, _: type) -> tuple[str, ...]:
        if isinstance(value, str):
            return _names_tuple(value)
        if isinstance(value, list | tuple):
            return tuple(_strict_str(v, str) for v in value)
        raise ConfigTypeError(value, "list of names or 'a,b'")

    conv.register_structure_hook_func(_is_str_tuple, names)
    return conv


converter = make_converter()


def structure_section(data: Any, cls: type, path: str) -> Any:
    """Build ``cls`` from a plain mapping, or raise one :class:`ConfigError`."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path} = {data!r}: expected a table of {cls.__name__} fields")
    try:
        return converter.structure(dict(data), cls)
    except Exception as exc:  # cattrs groups / attrs validator errors
        raise ConfigError(_one_line(describe(exc, path, data))) from exc


def _one_line(problems: list[str]) -> str:
    if not problems:
        return "invalid configuration"
    if len(problems) == 1:
        return f"invalid config: {problems[0]}"
    return f"invalid config ({len(problems)} problems): " + "; ".join(problems)


# ---------------------------------------------------------------------------
# Plain data <-> Config
# ---------------------------------------------------------------------------


def to_dict(config: Config) -> dict[str, Any]:
    """Plain, JSON-ready nested dict with the sections (``observer`` only when not empty)."""
    explore: dict[str, Any] = {"name": config.explore.name}
    if config.explore.settings is not None:
        explore.update(converter.unstructure(config.explore.settings))
    out: dict[str, Any] = {
        "run": converter.unstructure(config.run),
        "env": converter.unstructure(config.env),
        "algo": converter.unstructure(config.algo),
        "explore": explore,
    }
    if config.observer:
        out["observer"] = {name: converter.unstructure(section)
                           for name, section in config.observer.items()}
    return out


def observer_sections(data: Any, selected: Iterable[str], registry: Registry,
                      problems: list[str]) -> dict[str, Any]:
    """The ``observer`` section: one config instance per selected observer that declares a
    config class, and per observer ``data`` names. Problems are appended to ``problems``."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        problems.append(f"observer = {data!r}: expected a table of observer sections, "
                        "e.g. [observer.gif]")
        return {}
    with_options = sorted(n for n, s in registry.observers.items() if s.config_cls is not None)
    out: dict[str, Any] = {}
    for name in dict.fromkeys([*selected, *data]):
        spec = registry.observers.get(name)
        if name in data and (spec is None or spec.config_cls is None):
            what = "no installed observer" if spec is None else "an observer without options"
            problems.append(f"observer.{name}: {what} is named {name!r} (observers with "
                            f"options: {', '.join(with_options) or 'none'})")
            continue
        if spec is None or spec.config_cls is None:
            continue  # an unknown selected observer is reported when the run builds it
        try:
            out[name] = structure_section(data.get(name), spec.config_cls, f"observer.{name}")
        except ConfigError as exc:
            problems.append(str(exc).split(": ", 1)[1] if ": " in str(exc) else str(exc))
    return out


def explore_name(data: Any) -> Any:
    """The ``name`` of an ``explore`` section of plain data (``none`` when absent)."""
    if isinstance(data, Mapping):
        return data.get("name", EXPLORE_OFF)
    return EXPLORE_OFF


def structure_explore(data: Any, registry: Registry) -> ExploreConfig:
    """The ``explore`` section from plain data: ``name`` and the explorer's own fields."""
    from gbx.resolve import require_explorer

    if data is None:
        return ExploreConfig()
    if not isinstance(data, Mapping):
        raise ConfigError(f"explore = {data!r}: expected a table with 'name' and the "
                          "explorer's fields")
    rest = {k: v for k, v in data.items() if k != "name"}
    head = structure_section({"name": explore_name(data)}, ExploreConfig, "explore")
    if not head.enabled:
        if rest:
            raise ConfigError(
                f"invalid config: explore.{sorted(rest)[0]} is set but no explorer is "
                f"selected; set explore.name (installed: "
                f"{', '.join(sorted(registry.explorers)) or 'none'})")
        return head
    spec = require_explorer(registry, head.name)
    return ExploreConfig(name=head.name,
                         settings=structure_section(rest, spec.config_cls, "explore"))


def from_dict(data: Mapping[str, Any], registry: Registry, *, observers: bool = True) -> Config:
    """Resolve a plain dict (e.g. a run's config.json) against the installed plugins.

    ``observers=False`` leaves the ``observer`` section out unread: a trainer rebuilt from
    a checkpoint (``gbx eval``, ``gbx gif``) runs no observers, so the observers of the run
    that wrote it need not be installed.
    """
    from gbx.resolve import require_algorithm, require_env

    if not isinstance(data, Mapping):
        raise ConfigError(f"config = {data!r}: expected a table with sections {SECTIONS}")
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ConfigError(
            f"invalid config: unknown section {unknown[0]!r} (sections: {', '.join(SECTIONS)})"
        )
    run = structure_section(data.get("run"), RunConfig, "run")
    env_spec = require_env(registry, run.env)
    algo_spec = require_algorithm(registry, run.algo)
    _refuse_moved_keys(data.get("algo"), algo_spec.config_cls)
    problems: list[str] = []
    sections: dict[str, Any] = {}
    for name, cls in (("env", env_spec.config_cls), ("algo", algo_spec.config_cls)):
        try:
            sections[name] = structure_section(data.get(name), cls, name)
        except ConfigError as exc:
            problems.append(str(exc).split(": ", 1)[1] if ": " in str(exc) else str(exc))
    try:
        sections["explore"] = structure_explore(data.get("explore"), registry)
    except ConfigError as exc:
        if not str(exc).startswith("invalid config"):
            raise  # an explorer that is not installed: its own one-line error
        problems.append(str(exc).split(": ", 1)[1] if ": " in str(exc) else str(exc))
    observer = observer_sections(data.get("observer"), run.observers, registry, problems) \
        if observers else {}
    if problems:
        raise ConfigError(_one_line(problems))
    return Config(run=run, env=sections["env"], algo=sections["algo"], observer=observer,
                  explore=sections["explore"])


# Settings the run owns now; an algorithm section naming one (that its class does not
# declare itself) gets the new key in its error.
MOVED_KEYS = {
    "eval_every": "run.eval_every (env steps)",
    "eval_episodes": "run.eval_episodes",
    "eval_greedy": "run.eval_greedy",
    "checkpoint_every": "run.checkpoint_every (env steps)",
}


def _refuse_moved_keys(section: Any, cls: type) -> None:
    if not isinstance(section, Mapping):
        return
    for key, new in MOVED_KEYS.items():
        if key in section and not has_field(cls, (key,)):
            raise ConfigError(f"invalid config: algo.{key} is not an algorithm setting; "
                              f"the run's schedule has {new}")


def upgrade_saved(data: Mapping[str, Any], registry: Registry) -> dict[str, Any]:
    """A saved config (a run's ``config.json``, a checkpoint's config) in today's layout.

    Runs saved before the run owned the schedule hold it in the ``algo`` section, in the
    algorithm's own units. ``algo.eval_episodes``/``algo.eval_greedy`` move to ``run``;
    the old cadences (``eval_every``, ``checkpoint_every``, in updates or optimiser steps)
    are dropped, so the run's own cadence in env steps applies. An algorithm that declares
    such a field itself keeps it. Resuming, evaluating or replaying an old run therefore
    works; only files written by users are refused with the new key.
    """
    out: dict[str, Any] = json.loads(json.dumps(dict(data)))
    algo = out.get("algo")
    run = out.get("run")
    if not isinstance(algo, dict) or not isinstance(run, dict):
        return out
    name = run.get("algo", attrs.fields(RunConfig).algo.default)
    spec = registry.algorithms.get(name) if isinstance(name, str) else None
    if spec is None:
        return out
    for key in MOVED_KEYS:
        if key in algo and not has_field(spec.config_cls, (key,)):
            value = algo.pop(key)
            if key in ("eval_episodes", "eval_greedy"):
                run.setdefault(key, value)
    return out


def dumps_json(config: Config) -> str:
    return json.dumps(to_dict(config), indent=2, sort_keys=False) + "\n"


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_drop_none(v) for v in value]
    return value


def dumps_toml(config: Config) -> str:
    """TOML text; unset optional fields (None) are omitted since TOML has no null."""
    return tomli_w.dumps(_drop_none(to_dict(config)))


MAX_CONFIG_DEPTH = 16  # sections, nested attrs classes, lists and dicts stay far below


def _depth(value: Any, level: int = 0) -> int:
    """Nesting depth of plain data, stopping just past :data:`MAX_CONFIG_DEPTH`."""
    if level > MAX_CONFIG_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load a ``.toml`` or ``.json`` config file into a plain dict."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {p} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from exc
    kind = p.suffix.lstrip(".") or "toml"
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {p} is not valid {kind}: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"config file {p} is nested too deeply to be a config") from exc
    if _depth(data) > MAX_CONFIG_DEPTH:
        raise ConfigError(f"config file {p} is nested deeper than {MAX_CONFIG_DEPTH} levels; "
                          "a config has sections of fields")
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p}: expected a table with sections {SECTIONS}")
    return data


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file that appears as ``path`` only once the ``with`` block ends cleanly.

    The data goes to a temporary ``.<name>.<random>.tmp`` file in the same directory,
    then ``os.replace`` puts it in place, so a killed process never leaves a
    half-written file under the final name. The file gets the permissions the
    user's umask gives a new file (``mkstemp`` alone would make it 0600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())  # on disk before the rename makes it the file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` through :func:`atomic_file`."""
    with atomic_file(Path(path)) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def write_json_atomic(path: Path, text: str) -> Path:
    """Write JSON (or any) text to ``path`` atomically; see :func:`write_atomic`."""
    return write_atomic(path, text)


def remove_temporary_files(folder: Path) -> list[Path]:
    """Delete the temporary files :func:`atomic_file` left in ``folder`` (a killed write)."""
    removed = []
    for tmp in sorted(Path(folder).glob(f".*{TMP_SUFFIX}")):
        if tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


# ---------------------------------------------------------------------------
# Overrides: --set section.key=value
# ---------------------------------------------------------------------------


@attrs.frozen
class Override:
    """One ``--set path=value``: the dotted path, the parsed value and the raw text."""

    path: tuple[str, ...]
    value: Any
    raw: str


def parse_value(text: str) -> Any:
    """A TOML literal (``3e-4``, ``true``, ``[1, 2]``, ``"s"``), else JSON, else the string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_override(text: str) -> Override:
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r}: expected section.key=value, e.g. algo.lr=3e-4")
    path = tuple(key.split("."))
    if len(path) < 2 or path[0] not in SECTIONS or not all(path):
        raise ConfigError(
            f"--set {text!r}: the key must start with a section ({', '.join(SECTIONS)}), "
            "e.g. algo.lr=3e-4 or run.seed=1"
        )
    if path[0] == "observer" and len(path) < 3:
        raise ConfigError(f"--set {text!r}: an observer key names the observer and the "
                          "option, e.g. observer.gif.steps=50")
    return Override(path, parse_value(raw.strip()), raw.strip())


_NO_FIELD = object()


def _lookup_field(cls: Any, path: Iterable[str]) -> Any:
    """The annotated type at a dotted path inside an attrs class, or ``_NO_FIELD``."""
    tp: Any = cls
    for key in path:
        if not (isinstance(tp, type) and attrs.has(tp)):
            return _NO_FIELD
        fields = attrs.fields_dict(attrs.resolve_types(tp))
        if key not in fields:
            return _NO_FIELD
        tp = fields[key].type
    return tp


def has_field(cls: Any, path: Iterable[str]) -> bool:
    """Whether the attrs class ``cls`` has the field path (into nested attrs classes)."""
    return _lookup_field(cls, path) is not _NO_FIELD


def _field_type(cls: type | None, path: Iterable[str]) -> Any:
    """The annotated type at a dotted path inside an attrs class (None if unknown)."""
    tp = _lookup_field(cls, path)
    return None if tp is _NO_FIELD else tp


def _wants_text(tp: Any) -> bool:
    if tp is str or _is_str_tuple(tp):
        return True
    args = typing.get_args(tp)
    return bool(args) and str in args and all(a in (str, type(None)) for a in args)


def apply_overrides(
    data: dict[str, Any], overrides: Iterable[Override], classes: Mapping[str, Any]
) -> dict[str, Any]:
    """Set each override into a copy of ``data``.

    ``classes`` maps a section to its config class; ``classes["observer"]``, when given,
    maps observer names to theirs. For a text field the raw text is kept
    (``run.tag=123`` stays ``"123"``), unless it was written as a quoted string.
    """
    out = json.loads(json.dumps(data))  # deep copy of plain data
    for ov in overrides:
        value = ov.value
        cls, rest = classes.get(ov.path[0]), ov.path[1:]
        if isinstance(cls, Mapping):  # a section of named sub-sections
            cls, rest = cls.get(rest[0]), rest[1:]
        tp = _field_type(cls, rest)
        if tp is not None and _wants_text(tp) and not isinstance(value, str | list):
            value = ov.raw
        node = out
        for key in ov.path[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {'.'.join(ov.path)}: {key} is not a table")
            node = child
        node[ov.path[-1]] = value
    return out


def build_config(
    registry: Registry,
    *,
    base: Mapping[str, Any] | None = None,
    flags: Mapping[str, Any] | None = None,
    overrides: Iterable[str] = (),
) -> Config:
    """Merge ``base`` (file contents), run ``flags`` and ``--set`` texts; resolve."""
    from gbx.resolve import default_observers

    data: dict[str, Any] = json.loads(json.dumps(dict(base or {})))
    run = data.setdefault("run", {})
    if not isinstance(run, dict):
        raise ConfigError(f"run = {run!r}: expected a table of RunConfig fields")
    for key, value in (flags or {}).items():
        if value is not None:
            run[key] = value
    parsed = [parse_override(o) for o in overrides]
    # Overrides of run.algo / run.env decide which classes the other sections use.
    data = apply_overrides(data, [o for o in parsed if o.path[0] == "run"], {"run": RunConfig})
    defaults = attrs.fields(RunConfig)
    algo_name = data["run"].get("algo", defaults.algo.default)
    env_name = data["run"].get("env", defaults.env.default)
    for key, value in (("algo", algo_name), ("env", env_name)):
        if not isinstance(value, str):
            raise ConfigError(f"run.{key} = {value!r}: expected the name of an installed "
                              f"{'algorithm' if key == 'algo' else 'env'} (see `gbx plugins`)")
    # explore.name decides which class the explore section's other keys belong to.
    picks_explorer = [o for o in parsed if o.path == ("explore", "name")]
    data = apply_overrides(data, picks_explorer, {"explore": ExploreConfig})
    explorer = explore_name(data.get("explore"))
    classes = {
        "env": getattr(registry.envs.get(env_name) if isinstance(env_name, str) else None,
                       "config_cls", None),
        "algo": getattr(registry.algorithms.get(algo_name) if isinstance(algo_name, str)
                        else None, "config_cls", None),
        "observer": {name: spec.config_cls for name, spec in registry.observers.items()},
        "explore": getattr(registry.explorers.get(explorer) if isinstance(explorer, str)
                           else None, "config_cls", None),
    }
    rest = [o for o in parsed if o.path[0] != "run" and o.path != ("explore", "name")]
    data = apply_overrides(data, rest, classes)
    if not data["run"].get("observers"):
        data["run"]["observers"] = list(default_observers(registry))
    return from_dict(data, registry)


def field_docs(cls: type) -> list[tuple[str, str, Any, str]]:
    """``(name, type, default, help)`` for every field of a config class."""
    out = []
    for f in attrs.fields(attrs.resolve_types(cls)):
        default = f.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        out.append((f.name, type_name(f.type), default, str(f.metadata.get("help", ""))))
    return out
