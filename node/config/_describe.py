"""DescribeConfigs entries for a broker and for a topic: value, source, synonyms, type and doc.

A broker's keys are all static (``server.properties``), so every broker entry is read-only;
a topic's entries follow :func:`~node.config._topic.resolve_topic_key` (override, then broker
key set in the file, then default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ._broker import BROKER_KEY_INDEX, BROKER_KEYS, NodeConfig
from ._keys import ConfigType
from ._listener_security import ListenerOverride
from ._topic import TOPIC_KEYS, ConfigSource, Synonym, resolve_topic_key, validate_topic_config

__all__ = ["BROKER_SYNONYMS", "ConfigEntry", "broker_synonyms", "describe_broker_config", "describe_topic_config"]

_ROLL = ("log.roll.ms", "log.roll.hours")
_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_FLUSH = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
# Kafka's broker-level synonyms, in precedence order (DescribeConfigs on a broker lists them).
BROKER_SYNONYMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: chain for chain in (_ROLL, _RETENTION) for name in chain} | {"log.flush.interval.ms": _FLUSH}
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys Kafka lists as synonyms of ``name``, in precedence order (``(name,)`` if none)."""
    return BROKER_SYNONYMS.get(name, (name,))


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry. ``synonyms`` are in precedence order, the winning one first."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    is_default: bool
    synonyms: list[Synonym]
    config_type: ConfigType = ConfigType.UNKNOWN  # DescribeConfigs v3+
    documentation: str | None = None  # DescribeConfigs v3+


def describe_topic_config(node: NodeConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every supported topic key with its effective value, source and synonyms, sorted by name.

    Source: a topic override -> DYNAMIC_TOPIC_CONFIG; a broker key set in server.properties ->
    STATIC_BROKER_CONFIG; otherwise DEFAULT_CONFIG. Raises ConfigError for invalid ``overrides``.
    """
    checked = validate_topic_config(overrides)
    entries = []
    for key in sorted(TOPIC_KEYS, key=lambda k: k.name):
        value, synonyms = resolve_topic_key(node, checked, key)
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=key.name,
                value=value,
                source=source,
                read_only=False,
                is_sensitive=False,
                is_default=source == ConfigSource.DEFAULT_CONFIG,
                synonyms=synonyms,
                config_type=key.type,
                documentation=key.doc,
            )
        )
    return entries


def describe_broker_config(node: NodeConfig) -> list[ConfigEntry]:
    """Every broker key with its value as set or defaulted, and every ``listener.name.*`` override
    under its full name, sorted by name, all read-only (static).

    Synonyms follow Kafka: the key's synonym chain (``log.retention.ms`` / ``.minutes`` /
    ``.hours``), set keys before defaults, starting at the described key. A password's value
    (``ssl.key.password``, a JAAS entry, and their overrides) is never shown.
    """
    entries = [_override_entry(node, override) for override in node.listener_overrides]
    for key in sorted(BROKER_KEYS, key=lambda k: k.name):
        chain = [BROKER_KEY_INDEX[n] for n in broker_synonyms(key.name)]
        synonyms: list[Synonym] = [
            (b.name, node.explicit_values[b.name], ConfigSource.STATIC_BROKER_CONFIG)
            for b in chain
            if b.name in node.explicit_values
        ]
        synonyms += [(b.name, b.default, ConfigSource.DEFAULT_CONFIG) for b in chain if b.default is not None]
        while synonyms and synonyms[0][0] != key.name:
            synonyms.pop(0)
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        sensitive = key.type == ConfigType.PASSWORD  # as Kafka: its value is never shown, set or not
        if sensitive:
            synonyms = [(name, None, where) for name, _, where in synonyms]
        entries.append(
            ConfigEntry(
                name=key.name,
                value=None if sensitive else node.value_of(key.name),
                source=source,
                read_only=True,
                is_sensitive=sensitive,
                is_default=key.name not in node.explicit_values,
                synonyms=synonyms,
                config_type=key.type,
                documentation=key.doc,
            )
        )
    return sorted(entries, key=lambda e: e.name)


def _override_entry(node: NodeConfig, override: ListenerOverride) -> ConfigEntry:
    """A ``listener.name.*`` key's entry. Its synonyms, in precedence order: itself, the listener's
    own key when a mechanism's override stands in front of it, then the node-wide key (set, then
    default), as Kafka lists a listener override's synonyms."""
    base = BROKER_KEY_INDEX[override.base]
    synonyms: list[Synonym] = [(override.key, override.text, ConfigSource.STATIC_BROKER_CONFIG)]
    if override.mechanism is not None:
        synonyms += [
            (o.key, o.text, ConfigSource.STATIC_BROKER_CONFIG)
            for o in node.listener_overrides
            if o.listener == override.listener and o.base == override.base and o.mechanism is None
        ]
    if base.name in node.explicit_values:
        synonyms.append((base.name, node.explicit_values[base.name], ConfigSource.STATIC_BROKER_CONFIG))
    if base.default is not None:
        synonyms.append((base.name, base.default, ConfigSource.DEFAULT_CONFIG))
    sensitive = base.type == ConfigType.PASSWORD
    if sensitive:
        synonyms = [(name, None, where) for name, _, where in synonyms]
    return ConfigEntry(
        name=override.key,
        value=None if sensitive else override.text,
        source=ConfigSource.STATIC_BROKER_CONFIG,
        read_only=True,
        is_sensitive=sensitive,
        is_default=False,
        synonyms=synonyms,
        config_type=base.type,
        documentation=f"{base.name} for listener {override.listener}"
        + (f" and SASL mechanism {override.mechanism}" if override.mechanism else "")
        + f": {base.doc}",
    )
