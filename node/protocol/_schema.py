"""The notation the message schemas are declared in: types, fields, structs, APIs.

A schema is data: ``S(F("acks", INT16, "0+"), F("topic_data", A(S(...)), "0+"))``. Versions are
written as Kafka writes them: ``"3+"`` (3 and up), ``"2-4"`` (inclusive), ``"1"`` (only 1). A field
can be nullable in some versions (``nullable="1+"``), carry a default (used when it is absent from
the version, or omitted when encoding), or be a tagged field of flexible versions (``tag=0``).

Nothing here reads or writes bytes; ``_codec`` compiles these declarations per version.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Any

NO_MAX = 0x7FFF  # the "+" in "3+": api versions are int16

# ---------------------------------------------------------------------------------------------------------------------
# Types


@dataclass(frozen=True, slots=True)
class Primitive:
    """A scalar wire type. ``fixed`` is its ``struct`` code when it has a fixed size, else None."""

    name: str
    fixed: str | None
    default: Any

    def __repr__(self) -> str:
        return self.name


INT8 = Primitive("int8", "b", 0)
INT16 = Primitive("int16", "h", 0)
INT32 = Primitive("int32", "i", 0)
INT64 = Primitive("int64", "q", 0)
UINT16 = Primitive("uint16", "H", 0)
UINT32 = Primitive("uint32", "I", 0)
FLOAT64 = Primitive("float64", "d", 0.0)
BOOL = Primitive("bool", "?", False)
STRING = Primitive("string", None, "")
BYTES = Primitive("bytes", None, b"")
RECORDS = Primitive("records", None, None)  # decoded zero-copy as a memoryview of the frame
UUID = Primitive("uuid", None, uuid.UUID(int=0))


@dataclass(frozen=True, slots=True)
class StructDef:
    """An ordered list of fields. Wire order is declaration order (tagged fields go in the tag buffer)."""

    fields: tuple[Field, ...]

    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


@dataclass(frozen=True, slots=True)
class ArrayOf:
    """An array of a primitive or of structs."""

    item: Primitive | StructDef


FieldType = Primitive | ArrayOf | StructDef  # a StructDef field is a nested struct (Kafka's tagged structs)


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``none`` is the empty range."""

    low: int
    high: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @staticmethod
    def parse(text: str) -> Versions:
        """``"3+"``, ``"2-4"``, ``"1"`` or ``"none"``; raises ValueError naming the text otherwise."""
        try:
            if text == "none":
                return Versions(1, 0)
            if text.endswith("+"):
                return Versions(int(text[:-1]), NO_MAX)
            low, sep, high = text.partition("-")
            return Versions(int(low), int(high) if sep else int(low))
        except ValueError:
            raise ValueError(f"bad version range {text!r} (expected like '0+', '2-4' or '1')") from None


_NO_DEFAULT: Any = object()


@dataclass(frozen=True, slots=True)
class Field:
    """One declared field. ``default`` is already resolved (a declared one, else the type's zero value)."""

    name: str
    type: FieldType
    versions: Versions
    nullable: Versions
    default: Any
    tag: int | None = None
    about: str = field(default="", compare=False)

    def is_array(self) -> bool:
        return isinstance(self.type, ArrayOf)

    def fresh_default(self) -> Any:
        """The default as a new object: arrays get a new empty list each time (None when nullable-by-default)."""
        if isinstance(self.type, ArrayOf) and self.default is not None:
            return list(self.default)
        return self.default


def F(
    name: str,
    type_: FieldType,
    versions: str = "0+",
    *,
    nullable: str = "none",
    default: Any = _NO_DEFAULT,
    tag: int | None = None,
) -> Field:
    """Declare a field. Without ``default``: the type's zero value (``[]`` for arrays, None for records
    and for nested structs: a tagged struct left at None is not written).

    Raises ValueError for a name that is not a snake_case identifier (names end up in generated code).
    """
    if not (name.isidentifier() and name == name.lower() and not name.startswith("_")):
        raise ValueError(f"field name {name!r} is not a snake_case identifier")
    if default is _NO_DEFAULT:
        default = () if isinstance(type_, ArrayOf) else None if isinstance(type_, StructDef) else type_.default
    elif isinstance(type_, ArrayOf) and default is not None:
        default = tuple(default)
    return Field(name, type_, Versions.parse(versions), Versions.parse(nullable), default, tag)


def S(*fields: Field) -> StructDef:
    """Declare a struct; field names must be unique (raises ValueError naming the duplicate)."""
    seen: set[str] = set()
    for f in fields:
        if f.name in seen:
            raise ValueError(f"duplicate field name {f.name!r} in struct")
        seen.add(f.name)
    return StructDef(tuple(fields))


def A(item: Primitive | StructDef) -> ArrayOf:
    """Declare an array type."""
    return ArrayOf(item)


# ---------------------------------------------------------------------------------------------------------------------
# APIs


class ApiKey(enum.IntEnum):
    """The API keys strait declares schemas for: Kafka's, and strait's own from 1000 up."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    MIRROR_APPEND = 1000  # strait's own (inter-site mirror); Kafka's keys stay below 100
    TRUNCATE_PARTITIONS = 1001  # strait's own (DR failback: truncate to a cut, controller-driven)
    PARTITION_STATES = 1002  # strait's own (the controller's written partition states, to every broker)


@dataclass(frozen=True, slots=True)
class ApiSchema:
    """One API: Kafka's name (``"Produce"``), the versions declared here, and its request/response structs.

    ``flexible_from`` is the first flexible version of the API in Kafka (which may be above
    ``max_version``: it still decides the header version of requests we reject as unsupported).
    """

    api_key: int
    name: str
    max_version: int
    flexible_from: int | None
    request: StructDef
    response: StructDef
    min_version: int = 0

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        """2 for flexible versions (header with tagged fields), else 1."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """1 for flexible versions, else 0; ApiVersions always answers with header v0."""
        if self.api_key == ApiKey.API_VERSIONS:
            return 0
        return 1 if self.is_flexible(version) else 0
