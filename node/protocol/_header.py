"""The request header every Kafka request starts with (its codec is in ``_frame``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A request header. ``header_version`` is 1 (classic) or 2 (flexible, with a tagged-field buffer)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
