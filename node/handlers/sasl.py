"""SaslHandshake (17) and SaslAuthenticate (36) where no SASL exchange is due.

On a SASL listener the server runs the exchange itself, before any request reaches the dispatch
table. A request that gets here came on a listener without SASL, or after the connection
authenticated; Kafka's ``KafkaApis`` answers both with ILLEGAL_SASL_STATE (an empty mechanism
list for the handshake), and so does strait. No authorisation: both belong to authentication.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from node.protocol import ErrorCode
from node.request import Request


@dataclass(frozen=True, slots=True)
class SaslServices:
    """Nothing: the answer depends only on the connection."""


def _why(request: Request) -> str:
    protocol = request.connection.security_protocol
    if protocol.startswith("SASL_"):
        return "SaslAuthenticate request received after successful authentication"
    return f"listener {request.connection.listener} ({protocol}) does not use SASL"


async def handle_sasl_handshake(services: SaslServices, request: Request) -> dict[str, Any]:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


async def handle_sasl_authenticate(services: SaslServices, request: Request) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.ILLEGAL_SASL_STATE,
        "error_message": _why(request),
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }
