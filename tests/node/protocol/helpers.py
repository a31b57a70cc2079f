"""Shared helpers for the codec tests: values and strategies derived from the declarations, and
bridges to kafka-python's two independent codecs (the JSON-driven classes and the hand-written
``kafka.protocol.old`` classes) and to aiokafka's protocol classes."""

from __future__ import annotations

import importlib
import itertools
import pkgutil
import uuid
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs.types import BitField

from node.protocol import ApiKey, ApiSchema, all_schemas
from node.protocol._schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    ArrayOf,
    Field,
    Primitive,
    StructDef,
)

INT_RANGES = {
    INT8: (-(2**7), 2**7 - 1),
    INT16: (-(2**15), 2**15 - 1),
    INT32: (-(2**31), 2**31 - 1),
    INT64: (-(2**63), 2**63 - 1),
    UINT16: (0, 2**16 - 1),
    UINT32: (0, 2**32 - 1),
}
_INT_SAMPLE_BASE = {INT8: 2, INT16: 100, INT32: 100_000, INT64: 10**12, UINT16: 50, UINT32: 3_000_000_000}


def api_versions() -> list[tuple[ApiSchema, int]]:
    """Every declared (api, version) pair."""
    return [(api, v) for api in all_schemas() for v in range(api.min_version, api.max_version + 1)]


def api_version_ids() -> list[str]:
    return [f"{api.name}-v{v}" for api, v in api_versions()]


def on_wire(f: Field, version: int, flexible: bool) -> bool:
    """Whether ``f`` is encoded at ``version`` (tagged fields only exist in flexible versions)."""
    return version in f.versions and (f.tag is None or flexible)


def wire_fields(sdef: StructDef, version: int, flexible: bool) -> list[Field]:
    return [f for f in sdef.fields if on_wire(f, version, flexible)]


# ---------------------------------------------------------------------------------------------------------------------
# values


class Sampler:
    """Deterministic values in which every field differs from its default and from its neighbours."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def struct(self, sdef: StructDef, version: int, flexible: bool) -> dict[str, Any]:
        return {f.name: self.field(f, version, flexible) for f in wire_fields(sdef, version, flexible)}

    def field(self, f: Field, version: int, flexible: bool) -> Any:
        t = f.type
        if isinstance(t, ArrayOf):
            return [self.item(t.item, version, flexible) for _ in range(2)]
        value = self.item(t, version, flexible)
        if t is BOOL:
            value = not f.default
        return value

    def item(self, t: Primitive | StructDef, version: int, flexible: bool) -> Any:
        if isinstance(t, StructDef):
            return self.struct(t, version, flexible)
        n = next(self._counter)
        if t in _INT_SAMPLE_BASE:
            # positive and away from every declared default (0, -1, 1, -2, 60000, int32 max/min)
            return _INT_SAMPLE_BASE[t] + (n % 100 if t is INT8 else n)
        if t is BOOL:
            return True
        if t is FLOAT64:
            return n + 0.25
        if t is STRING:
            return f"s{n}-é"
        if t in (BYTES, RECORDS):
            return bytes([n % 256]) * (n % 5 + 1)
        if t is UUID:
            return uuid.UUID(int=n)
        raise AssertionError(f"no sample for {t!r}")


def strategy(sdef: StructDef, version: int, flexible: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Hypothesis values for one struct at one version: every wire field, nulls where nullable."""
    return st.fixed_dictionaries(
        {f.name: _field_strategy(f, version, flexible) for f in wire_fields(sdef, version, flexible)}
    )


def _field_strategy(f: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    t = f.type
    if isinstance(t, ArrayOf):
        item = strategy(t.item, version, flexible) if isinstance(t.item, StructDef) else _primitive(t.item)
        base: st.SearchStrategy[Any] = st.lists(item, max_size=3)
    elif isinstance(t, StructDef):  # a tagged struct: absent (None, its default) or a value
        return st.none() | strategy(t, version, flexible)
    else:
        base = _primitive(t)
    return st.none() | base if version in f.nullable else base


def _primitive(t: Primitive) -> st.SearchStrategy[Any]:
    if t in INT_RANGES:
        low, high = INT_RANGES[t]
        return st.integers(low, high)
    if t is BOOL:
        return st.booleans()
    if t is FLOAT64:
        return st.floats(allow_nan=False)
    if t is STRING:
        return st.text(st.characters(codec="utf-8"), max_size=12)
    if t in (BYTES, RECORDS):
        return st.binary(max_size=24)
    if t is UUID:
        return st.uuids()
    raise AssertionError(f"no strategy for {t!r}")


def project(value: Any, sdef: StructDef, version: int, flexible: bool) -> Any:
    """A decoded Struct (or dict) reduced to its wire fields at ``version``; memoryviews become bytes."""
    if value is None:
        return None
    fields = value.__dict__ if hasattr(value, "__dict__") and not isinstance(value, dict) else value
    out = {}
    for f in wire_fields(sdef, version, flexible):
        v = fields[f.name]
        if isinstance(f.type, ArrayOf) and isinstance(f.type.item, StructDef) and v is not None:
            v = [project(item, f.type.item, version, flexible) for item in v]
        elif isinstance(f.type, StructDef):
            v = project(v, f.type, version, flexible)
        elif isinstance(v, (memoryview, bytearray)):
            v = bytes(v)
        out[f.name] = v
    return out


def positional(value: dict[str, Any], sdef: StructDef, version: int) -> tuple[Any, ...]:
    """A value in wire order as nested tuples: how the hand-written old-style classes take and give them."""
    out = []
    for f in wire_fields(sdef, version, flexible=False):
        v = value[f.name]
        if isinstance(f.type, ArrayOf) and isinstance(f.type.item, StructDef) and v is not None:
            v = [positional(item, f.type.item, version) for item in v]
        elif isinstance(v, memoryview):
            v = bytes(v)
        out.append(v)
    return tuple(out)


def fit(value: Any, typ: Any) -> Any:
    """Adapt a ``positional`` value to an old-style schema ``typ``.

    Those classes declare a few arrays of one-field structs as arrays of the field itself
    (Metadata topics, CreatePartitions assignments): the same bytes on the wire. They also decode
    authorized-operations ints as sets of bit positions (``BitField``).
    """
    if value is None:
        return None
    if hasattr(typ, "names"):  # Schema; a nested Schema (no length prefix) takes a run of our flat values
        flat, out = list(value), []
        for t in typ.fields:
            width = _width(t)
            out.append(fit(tuple(flat[:width]), t) if hasattr(t, "names") else fit(flat[0], t))
            del flat[:width]
        assert not flat, f"{len(flat)} values left over for {typ.names}"
        return tuple(out)
    if hasattr(typ, "array_of"):  # Array
        inner = typ.array_of
        if not hasattr(inner, "names"):
            value = [v[0] if isinstance(v, tuple) and len(v) == 1 else v for v in value]
        return [fit(v, inner) for v in value]
    if getattr(typ, "__name__", "") == "BitField":
        return typ.from_32_bit_field(value & 0xFFFFFFFF) if value != -(2**31) else None
    return value


def unfit(value: Any, typ: Any) -> Any:
    """The inverse of ``fit`` for a value an old-style class decoded (Structs become tuples)."""
    if value is None:
        return None
    if hasattr(value, "SCHEMA"):
        value = tuple(getattr(value, name) for name in value.SCHEMA.names)
    if hasattr(typ, "names"):
        out: list[Any] = []
        for v, t in zip(value, typ.fields, strict=True):
            if hasattr(t, "names"):
                out.extend(unfit(v, t))
            else:
                out.append(unfit(v, t))
        return tuple(out)
    if hasattr(typ, "array_of"):
        return [unfit(v, typ.array_of) for v in value]
    if getattr(typ, "__name__", "") == "BitField":
        return _from_bits(value)
    return value


def _width(typ: Any) -> int:
    """How many of our flat fields an old-style field type stands for (nested Schemas flatten)."""
    return sum(_width(t) for t in typ.fields) if hasattr(typ, "names") else 1


# ---------------------------------------------------------------------------------------------------------------------
# kafka-python (JSON-driven classes)

_KP_MODULES = (
    "kafka.protocol.producer.produce",
    "kafka.protocol.producer.transaction",
    "kafka.protocol.consumer.fetch",
    "kafka.protocol.consumer.offsets",
    "kafka.protocol.consumer.group",
    "kafka.protocol.metadata.metadata",
    "kafka.protocol.metadata.api_versions",
    "kafka.protocol.metadata.find_coordinator",
    "kafka.protocol.admin.topics",
    "kafka.protocol.admin.configs",
    "kafka.protocol.admin.groups",
    "kafka.protocol.admin.acl",
    "kafka.protocol.admin.transactions",
    "kafka.protocol.admin.cluster",
    "kafka.protocol.admin.users",
    "kafka.protocol.admin.client_quotas",
    "kafka.protocol.sasl",
)


def kp_classes() -> dict[tuple[int, bool], Any]:
    """kafka-python's JSON-driven message classes by (api_key, is_request)."""
    found: dict[tuple[int, bool], Any] = {}
    for name in _KP_MODULES:
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
                message: Any = obj
                found[message.API_KEY, message.is_request()] = message
    return found


# kafka-python patches a few spec fields on its side: Metadata's and DescribeCluster's authorized-operations
# ints are renamed ``authorized_operations`` and, like DescribeGroups', decoded as a set of bit positions.
KP_RENAMES: dict[int, dict[str, str]] = {
    ApiKey.METADATA: {
        "cluster_authorized_operations": "authorized_operations",
        "topic_authorized_operations": "authorized_operations",
    },
    ApiKey.DESCRIBE_CLUSTER: {"cluster_authorized_operations": "authorized_operations"},
}
KP_BITFIELDS = {
    (ApiKey.METADATA, "authorized_operations"),
    (ApiKey.DESCRIBE_GROUPS, "authorized_operations"),
    (ApiKey.DESCRIBE_CLUSTER, "authorized_operations"),
}


def kp_name(api_key: int, name: str) -> str:
    return KP_RENAMES.get(api_key, {}).get(name, name)


def _to_bits(value: int) -> set[int] | None:
    bits: set[int] = BitField.from_32_bit_field(value & 0xFFFFFFFF)
    return None if bits == {31} else bits


def _from_bits(bits: set[int] | None) -> int:
    unsigned: int = BitField.to_32_bit_field({31} if bits is None else bits)
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


def to_kp(cls: Any, value: dict[str, Any], api_key: int, version: int | None = None) -> Any:
    """Build a kafka-python object of ``cls`` from one of our plain values (nested struct arrays too)."""
    fields = cls.fields
    kwargs: dict[str, Any] = {}
    for name, v in value.items():
        their = kp_name(api_key, name)
        field = fields[their]
        if field.is_struct_array() and v is not None:
            kwargs[their] = [to_kp(field.data_class, item, api_key) for item in v]
        elif field.is_struct() and v is not None:
            kwargs[their] = to_kp(field.data_class, v, api_key)
        elif isinstance(v, memoryview):
            kwargs[their] = bytes(v)
        elif (api_key, their) in KP_BITFIELDS:
            kwargs[their] = _to_bits(v)
        else:
            kwargs[their] = v
    return cls[version](**kwargs) if version is not None else cls(**kwargs)


def from_kp(their: dict[str, Any], sdef: StructDef, version: int, flexible: bool, api_key: int) -> dict[str, Any]:
    """A kafka-python ``to_dict(json=False)`` value mapped back to our names and types (records as bytes)."""
    out: dict[str, Any] = {}
    for f in wire_fields(sdef, version, flexible):
        name = kp_name(api_key, f.name)
        v = their[name]
        if isinstance(f.type, ArrayOf) and isinstance(f.type.item, StructDef) and v is not None:
            v = [from_kp(item, f.type.item, version, flexible, api_key) for item in v]
        elif isinstance(f.type, StructDef) and v is not None:
            v = from_kp(v, f.type, version, flexible, api_key)
        elif isinstance(v, (bytearray, memoryview)):
            v = bytes(v)
        elif (api_key, name) in KP_BITFIELDS:
            v = _from_bits(v)
        out[f.name] = v
    if set(their) - {kp_name(api_key, f.name) for f in wire_fields(sdef, version, flexible)}:
        raise AssertionError(f"kafka-python has fields we do not: {sorted(set(their))}")
    return out


# ---------------------------------------------------------------------------------------------------------------------
# hand-written old-style classes (kafka.protocol.old, aiokafka.protocol)


def old_style_classes(package: str) -> dict[tuple[int, int, bool], Any]:
    """Old-style request/response classes of ``package`` by (api_key, version, is_request)."""
    keys = {int(k) for k in ApiKey}
    found: dict[tuple[int, int, bool], Any] = {}
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        for obj in vars(module).values():
            if not isinstance(obj, type) or not hasattr(obj, "SCHEMA"):
                continue
            key, version = getattr(obj, "API_KEY", None), getattr(obj, "API_VERSION", None)
            if not (isinstance(key, int) and isinstance(version, int) and key in keys):
                continue
            # kafka-python's classes say is_request(); aiokafka's requests name their RESPONSE_TYPE
            is_request = obj.is_request() if hasattr(obj, "is_request") else hasattr(obj, "RESPONSE_TYPE")
            found[key, version, bool(is_request)] = obj
    return found


def iter_sampled(api: ApiSchema, version: int, request: bool) -> Iterator[dict[str, Any]]:
    """Two differently seeded sample values for one message."""
    sdef = api.request if request else api.response
    flexible = api.is_flexible(version)
    sampler = Sampler()
    for _ in range(2):
        yield sampler.struct(sdef, version, flexible)
