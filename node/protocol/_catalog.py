"""The catalogue of declared APIs: lookup by key, advertised version ranges, compiled codecs.

Codecs are compiled on first use, once per (api, version, request/response), and cached for the
life of the process; compiling the same one twice from two threads is harmless.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._codec import Codec
from ._errors import UnknownApi, UnsupportedVersion
from ._generate import compile_struct
from ._messages_admin import ADMIN_APIS
from ._messages_data import DATA_APIS
from ._messages_group import GROUP_APIS
from ._messages_quota import QUOTA_APIS
from ._messages_reassign import REASSIGN_APIS
from ._messages_security import SECURITY_APIS
from ._messages_strait import STRAIT_APIS
from ._messages_txn import TXN_APIS
from ._schema import ApiKey, ApiSchema

_SCHEMAS: dict[int, ApiSchema] = {
    api.api_key: api
    for api in (
        *DATA_APIS,
        *GROUP_APIS,
        *ADMIN_APIS,
        *SECURITY_APIS,
        *QUOTA_APIS,
        *TXN_APIS,
        *STRAIT_APIS,
        *REASSIGN_APIS,
    )
}

if set(_SCHEMAS) != {key.value for key in ApiKey}:  # pragma: no cover - a declaration is missing
    raise AssertionError(f"schemas and ApiKey differ: {sorted(set(_SCHEMAS) ^ {k.value for k in ApiKey})}")

_REQUEST_CODECS: dict[tuple[int, int], Codec] = {}
_RESPONSE_CODECS: dict[tuple[int, int], Codec] = {}


def schema(api_key: int) -> ApiSchema:
    """The declared schema of ``api_key``; raises UnknownApi for a key without one."""
    api = _SCHEMAS.get(api_key)
    if api is None:
        raise UnknownApi(api_key)
    return api


def find_schema(api_key: int) -> ApiSchema | None:
    """The declared schema of ``api_key``, or None."""
    return _SCHEMAS.get(api_key)


def all_schemas() -> tuple[ApiSchema, ...]:
    """Every declared API, by key."""
    return tuple(_SCHEMAS[key] for key in sorted(_SCHEMAS))


def advertised_ranges(api_keys: Iterable[int]) -> dict[int, tuple[int, int]]:
    """``{api_key: (min_version, max_version)}`` for each key, as declared.

    That is 0 up to the highest non-flexible version, except where a flexible version is declared
    on purpose: ApiVersions (0, 4), SaslAuthenticate (0, 2), the SCRAM credential APIs, which
    only exist as a flexible v0, the client quota APIs (0, 1: Kafka 4.3's versions), InitProducerId
    (0, 4: KIP-360's epoch bumps), the transaction APIs (``_messages_txn``), the reassignment APIs
    (``_messages_reassign``), which only exist as flexible versions, and the group, topic, config,
    log-dir and ACL APIs up to Kafka 4.3's newest versions (``_messages_group``, ``_messages_admin``,
    ``_messages_security``).

    Raises UnknownApi for a key without a schema.
    """
    return {key: (schema(key).min_version, schema(key).max_version) for key in api_keys}


def request_codec(api: ApiSchema, version: int) -> Codec:
    """The compiled request body codec; raises UnsupportedVersion outside the declared range."""
    codec = _REQUEST_CODECS.get((api.api_key, version))
    if codec is None:
        _check_version(api, version)
        codec = compile_struct(api.request, version, api.is_flexible(version))
        _REQUEST_CODECS[api.api_key, version] = codec
    return codec


def response_codec(api: ApiSchema, version: int) -> Codec:
    """The compiled response body codec; raises UnsupportedVersion outside the declared range."""
    codec = _RESPONSE_CODECS.get((api.api_key, version))
    if codec is None:
        _check_version(api, version)
        codec = compile_struct(api.response, version, api.is_flexible(version))
        _RESPONSE_CODECS[api.api_key, version] = codec
    return codec


def _check_version(api: ApiSchema, version: int) -> None:
    if not api.min_version <= version <= api.max_version:
        raise UnsupportedVersion(api.name, version, api.max_version, header=None)
