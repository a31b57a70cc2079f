"""The key table is the typed config: one declaration per key, typed attributes, generated docs."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from node.config import (
    BROKER_KEY_INDEX,
    BROKER_KEYS,
    ConfigKey,
    ConfigType,
    NodeConfig,
    setting,
    update_docs,
)
from node.config.__main__ import main as regenerate_docs
from node.config._keys import index_keys, settings_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
# NodeConfig fields that record where the values came from, and the per-listener overrides (listener.name.*).
NOT_FROM_KEYS = {"explicit_values", "source", "listener_overrides", "listener_security"}


def _run_time(hint: Any) -> Any:
    """The type a ``NewType`` (``NodeId``) is at run time; any other hint as it is."""
    return hint.__supertype__ if isinstance(hint, typing.NewType) else hint


def _matches(value: object, hint: Any) -> bool:
    """Whether ``value`` is of the annotated type (the shapes NodeConfig uses, nothing more)."""
    hint = _run_time(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_matches(value, arg) for arg in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(item, args[0]) for item in value)
        return len(value) == len(args) and all(_matches(v, a) for v, a in zip(value, args, strict=True))
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    assert origin is None, hint
    return isinstance(value, hint)


def test_every_attribute_is_declared_from_keys_and_every_key_once() -> None:
    declared = dict(settings_of(NodeConfig))
    assert set(declared) == {f.name for f in dataclasses.fields(NodeConfig)} - NOT_FROM_KEYS
    names = [k.name for k in BROKER_KEYS]
    assert len(names) == len(set(names)) == len(BROKER_KEY_INDEX)
    for attribute, how in declared.items():
        assert how.declared and how.keys[0] is how.declared[0], attribute
        assert all(name in BROKER_KEY_INDEX for name in how.names), attribute
    keys_feeding_nothing = set(names) - {n for how in declared.values() for n in how.names}
    assert keys_feeding_nothing == {"num.network.threads", "num.io.threads", "num.recovery.threads.per.data.dir"}
    assert all(not BROKER_KEY_INDEX[n].effect for n in keys_feeding_nothing)


# What a key's parsed value is, when its attribute has no converter.
PARSED = {
    ConfigType.INT: int,
    ConfigType.LONG: int,
    ConfigType.SHORT: int,
    ConfigType.BOOLEAN: bool,
    ConfigType.STRING: str,
    ConfigType.LIST: tuple[str, ...],
    ConfigType.PASSWORD: str,
}


def test_attributes_without_a_converter_have_their_keys_type() -> None:
    hints = typing.get_type_hints(NodeConfig)
    for attribute, how in settings_of(NodeConfig):
        if how.convert is None:
            for key in (BROKER_KEY_INDEX[n] for n in how.names):
                expected = PARSED[key.type] if key.default is not None or key.required else PARSED[key.type] | None
                assert _run_time(hints[attribute]) in (expected, PARSED[key.type]), (attribute, key.name)


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"advertised.listeners": "PLAINTEXT://h:1", "broker.rack": "r1", "log.dirs": "/a,/b", "log.retention.ms": "-1"},
        {"listeners": "PLAINTEXT://[::]:0", "log.retention.minutes": "3", "strait.admin.listener": "0.0.0.0:1"},
    ],
)
def test_every_attribute_has_its_annotated_type(props: dict[str, str]) -> None:
    cfg = NodeConfig.from_properties(BASE | props)
    hints = typing.get_type_hints(NodeConfig)
    for attribute, _ in settings_of(NodeConfig):
        assert _matches(getattr(cfg, attribute), hints[attribute]), (attribute, getattr(cfg, attribute))


# -- the declaration machinery, on a config of its own -------------------------------------------------


def _key(name: str, default: str | None, **spec: Any) -> ConfigKey:
    return ConfigKey(name=name, type=ConfigType.INT, default=default, group="g", doc="d", **spec)


@dataclass(frozen=True, kw_only=True)
class ToyConfig:
    size: int = setting(_key("size", "1"))
    wait_ms: int = setting(_key("wait.ms", None), _key("wait.hours", "2", scale=3_600_000))
    grace_ms: int = setting(_key("grace.ms", None), "wait.ms", "wait.hours")
    label: str | None = setting(_key("label", None), convert=str)
    double: int = setting(_key("double", None), otherwise=lambda earlier: 2 * earlier["size"])


TOY_KEYS = [k for _, how in settings_of(ToyConfig) for k in how.declared]
TOY_INDEX = index_keys(TOY_KEYS, (n for _, how in settings_of(ToyConfig) for n in how.names))


def toy(**given: int) -> ToyConfig:
    """A ToyConfig as NodeConfig.from_properties builds one (``given``: keys set, _ for .)."""
    explicit = {k.replace("_", "."): v for k, v in given.items()}
    values = {k.name: int(k.default) for k in TOY_KEYS if k.default is not None} | explicit
    built: dict[str, Any] = {}
    for attribute, how in settings_of(ToyConfig):
        built[attribute] = how.resolve(values, explicit.keys(), TOY_INDEX, built)
    return ToyConfig(**built)


def test_a_setting_reads_the_first_key_set_then_the_first_with_a_default() -> None:
    assert toy() == ToyConfig(size=1, wait_ms=2 * 3_600_000, grace_ms=2 * 3_600_000, label=None, double=2)
    assert toy(wait_ms=5).wait_ms == 5
    assert toy(wait_hours=-1).wait_ms == -1  # -1 (forever) is not scaled
    assert toy(wait_ms=5, wait_hours=1).grace_ms == 5  # a referenced key set in the file wins over a default
    assert toy(grace_ms=7, wait_ms=5).grace_ms == 7
    assert toy(label=3).label == "3"
    assert (toy(size=4).double, toy(size=4, double=1).double) == (8, 1)


def test_a_key_is_declared_once_and_a_reference_needs_a_declaration() -> None:
    with pytest.raises(ValueError, match="'size' is declared twice"):
        index_keys([_key("size", "1"), _key("size", "2")])
    with pytest.raises(ValueError, match=r"\['nowhere'\] are referred to but never declared"):
        index_keys([_key("size", "1")], ["size", "nowhere"])
    with pytest.raises(TypeError, match="declares its first key"):
        setting("size")


# -- docs/configuration.md ---------------------------------------------------------------------------------


def test_committed_docs_equal_the_rendering_of_the_tables() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert update_docs(text) == text, f"docs/configuration.md is stale: run .venv/bin/python -m node.config {DOCS}"


def test_python_m_node_config_regenerates_the_docs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    committed = DOCS.read_text(encoding="utf-8")
    stale = committed.replace("| `num.partitions` |", "| `num.partition` |")
    assert stale != committed
    page = tmp_path / "configuration.md"
    page.write_text(stale, encoding="utf-8")
    assert regenerate_docs([str(page)]) == 0
    assert page.read_text(encoding="utf-8") == committed
    assert regenerate_docs([]) == 2
    assert "usage: python -m node.config docs/configuration.md" in capsys.readouterr().err
