"""What a config key is: its value type, its checks, and how a typed attribute is declared from it.

:class:`ValueSpec` turns a key's text into a typed :data:`Value` (shared by broker and topic
keys); :class:`ConfigKey` adds what a ``server.properties`` key needs besides (name, default,
docs group, the topic key it defaults). :func:`setting` declares a typed attribute of a config
dataclass from one key, or from several keys in Kafka's precedence order (``log.retention.ms``,
``.minutes``, ``.hours``), so that the key table and the typed config are one declaration:
:func:`settings_of` reads the table back, :meth:`Setting.resolve` computes the attribute.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "COMPRESSION_TYPES",
    "HIDDEN",
    "INT_MAX",
    "LONG_MAX",
    "SHORT_MAX",
    "ConfigKey",
    "ConfigType",
    "Setting",
    "Value",
    "ValueSpec",
    "check_non_empty_list",
    "check_ratio",
    "index_keys",
    "looks_secret",
    "setting",
    "settings_of",
]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
SHORT_MAX = 2**15 - 1

Value = int | bool | str | tuple[str, ...]

#: What errors show instead of the value of a password key.
HIDDEN = "[hidden]"
_SECRET_WORDS = ("pass", "jaas", "secret")


def looks_secret(name: str) -> bool:
    """Whether a key's name says its value may be a secret (``ssl.key.password``, ``*.sasl.jaas.config``):
    errors about a key that is unknown or misplaced show :data:`HIDDEN` instead of such a value."""
    return any(word in name.lower() for word in _SECRET_WORDS)


class ConfigType(enum.IntEnum):
    """Value types, numbered as Kafka's DescribeConfigs ``ConfigType`` (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_INT_RANGES = {ConfigType.INT: INT_MAX, ConfigType.LONG: LONG_MAX, ConfigType.SHORT: SHORT_MAX}


@dataclass(frozen=True, kw_only=True)
class ValueSpec:
    """How one key's text becomes a typed value (shared by broker and topic keys).

    ``choices`` are the accepted values (of each item, for lists); ``unsupported`` names values
    Kafka accepts that strait refuses, with the reason; ``check`` raises ValueError(reason).
    """

    type: ConfigType
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    unsupported: tuple[tuple[str, str], ...] = ()
    check: Callable[[Value], None] | None = None
    valid: str = ""  # valid values in words, for the docs, when the fields above do not say it

    def parse(self, raw: str) -> Value:
        """The typed value of ``raw`` (surrounding blanks ignored, as Kafka trims); ValueError(reason)."""
        text = raw.strip()
        value: Value
        if self.type in _INT_RANGES:
            if not re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
                raise ValueError("not an integer")
            value = int(text)
            limit = _INT_RANGES[self.type]
            if not -limit - 1 <= value <= limit:
                raise ValueError(f"out of range for a {self.type.name.lower()} ({-limit - 1}..{limit})")
            if self.minimum is not None and value < self.minimum:
                raise ValueError(f"must be at least {self.minimum}")
            if self.maximum is not None and value > self.maximum:
                raise ValueError(f"must be at most {self.maximum}")
        elif self.type == ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError("must be true or false")
            value = text.lower() == "true"
        elif self.type == ConfigType.LIST:
            items = tuple(item.strip() for item in text.split(",")) if text else ()
            if "" in items:
                raise ValueError("has an empty list item")
            for item in items:
                self._check_choice(item)
            value = items
        else:
            self._check_choice(text)
            value = text
        if self.check is not None:
            self.check(value)
        return value

    def _check_choice(self, text: str) -> None:
        reason = dict(self.unsupported).get(text)
        if reason is not None:
            raise ValueError(reason)
        if self.choices and text not in self.choices:
            raise ValueError(f"must be one of {', '.join(self.choices)}")

    def render(self, value: Value) -> str:
        """Kafka's string form of a typed value: ``true``, ``5``, ``a,b``."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)

    def normalise(self, raw: str) -> str:
        """``render(parse(raw))``: the canonical text of a valid value; ValueError(reason)."""
        return self.render(self.parse(raw))

    def describe_valid(self) -> str:
        """Valid values in words, for the docs."""
        if self.valid:
            return self.valid
        if self.type == ConfigType.BOOLEAN:
            return "true, false"
        parts: list[str] = []
        if self.choices:
            parts.append(("each of " if self.type == ConfigType.LIST else "one of ") + ", ".join(self.choices))
        if self.minimum is not None and self.maximum is not None:
            parts.append(f"{self.minimum}..{self.maximum}")
        elif self.minimum is not None:
            parts.append(f">= {self.minimum}")
        return "; ".join(parts)


@dataclass(frozen=True, kw_only=True)
class ConfigKey(ValueSpec):
    """One ``server.properties`` key: its value spec plus what the docs and DescribeConfigs need.

    ``group`` is its section in docs/configuration.md; ``topic_key`` names the topic-level key
    this broker key is the default for; ``scale`` converts the value to that key's unit
    (``log.retention.hours`` -> ms; -1 stays -1); ``effect=False`` marks keys accepted for
    compatibility that change nothing in strait. A key is declared once, through :func:`setting`
    on the typed attribute it feeds (or in a table of keys that feed none).
    """

    name: str
    default: str | None
    group: str
    doc: str
    topic_key: str | None = None
    scale: int = 1
    required: bool = False
    effect: bool = True


#: compression.type's values: ``producer`` keeps each batch as produced, a codec recompresses to it.
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


# -- shared validators (a check raises ValueError(reason)) ----------------------------------------


def check_non_empty_list(value: Value) -> None:
    """A list key that needs at least one item (``cleanup.policy``)."""
    if value == ():
        raise ValueError("needs at least one item")


def check_ratio(value: Value) -> None:
    """A share from 0.0 to 1.0 (``min.cleanable.dirty.ratio``), NaN refused."""
    try:
        ratio = float(str(value))
    except ValueError:
        raise ValueError("not a number") from None
    if not 0.0 <= ratio <= 1.0:  # also refuses NaN
        raise ValueError("must be between 0.0 and 1.0")


# -- typed attributes declared from keys ------------------------------------------------------------

_SETTING = "node.config.setting"  # the key of a Setting in a dataclass field's metadata


@dataclass(frozen=True)
class Setting:
    """How one typed attribute is read from its keys.

    ``keys`` are in precedence order: the first one set in the file wins, else the first with a
    default. A :class:`ConfigKey` is declared here; a plain name refers to a key declared by
    another attribute (``zookeeper.session.timeout.ms`` also stands in for the connection
    timeout). An integer read through a key with a ``scale`` is multiplied by it (-1 stays -1).
    ``convert`` turns the key's value into the attribute (default: as parsed); ``otherwise``
    computes the attribute from those declared before it when no key has a value (default: None);
    ``complete`` then gets that result and the attributes declared before it, and returns the
    attribute (``advertised.listeners``: the listeners it does not name are advertised as bound).
    """

    keys: tuple[ConfigKey | str, ...]
    convert: Callable[[Any], object] | None = None
    otherwise: Callable[[Mapping[str, Any]], object] | None = None
    complete: Callable[[Any, Mapping[str, Any]], object] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k if isinstance(k, str) else k.name for k in self.keys)

    @property
    def declared(self) -> tuple[ConfigKey, ...]:
        """The keys declared by this attribute (not those it only refers to), in order."""
        return tuple(k for k in self.keys if isinstance(k, ConfigKey))

    def resolve(
        self,
        values: Mapping[str, Value],
        explicit: Collection[str],
        index: Mapping[str, ConfigKey],
        earlier: Mapping[str, Any],
    ) -> object:
        """The attribute's value from the parsed ``values`` (``explicit``: the keys set in the file).

        ``index`` finds a key by name; ``earlier`` holds the attributes declared before this one.
        """
        chosen = next((n for n in self.names if n in explicit), None)
        if chosen is None:
            chosen = next((n for n in self.names if n in values), None)
        result: object
        if chosen is None:
            result = self.otherwise(earlier) if self.otherwise is not None else None
        else:
            value = values[chosen]
            scale = index[chosen].scale
            if scale != 1 and isinstance(value, int) and value != -1:
                value *= scale
            result = self.convert(value) if self.convert is not None else value
        return self.complete(result, earlier) if self.complete is not None else result


def setting(
    *keys: ConfigKey | str,
    convert: Callable[[Any], object] | None = None,
    otherwise: Callable[[Mapping[str, Any]], object] | None = None,
    complete: Callable[[Any, Mapping[str, Any]], object] | None = None,
) -> Any:
    """A dataclass field read from ``keys`` (see :class:`Setting`): ``num_partitions: int = setting(ConfigKey(...))``.

    Returns :func:`dataclasses.field` with no default (the attribute is required), typed ``Any``
    so the annotation alone gives the attribute's type; an attribute read from a password key is
    left out of the dataclass's repr.
    """
    if not keys or not isinstance(keys[0], ConfigKey):
        raise TypeError("a setting declares its first key")
    secret = any(isinstance(k, ConfigKey) and k.type == ConfigType.PASSWORD for k in keys)
    return dataclasses.field(metadata={_SETTING: Setting(keys, convert, otherwise, complete)}, repr=not secret)


def settings_of(cls: type) -> tuple[tuple[str, Setting], ...]:
    """(attribute name, setting) of every field of dataclass ``cls`` declared with :func:`setting`, in order."""
    return tuple((f.name, f.metadata[_SETTING]) for f in dataclasses.fields(cls) if _SETTING in f.metadata)


def index_keys(keys: Iterable[ConfigKey], references: Iterable[str] = ()) -> Mapping[str, ConfigKey]:
    """``keys`` by name; raises ValueError for a name declared twice or a reference to no declared key."""
    index: dict[str, ConfigKey] = {}
    for key in keys:
        if key.name in index:
            raise ValueError(f"config key {key.name!r} is declared twice")
        index[key.name] = key
    missing = sorted(set(references) - index.keys())
    if missing:
        raise ValueError(f"config keys {missing} are referred to but never declared")
    return index
