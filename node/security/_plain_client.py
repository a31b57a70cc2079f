"""The client side of SASL/PLAIN (RFC 4616), sans-IO: one message, ``NUL user NUL password`` in UTF-8.

The authorization id is left empty (the server then acts as the user, and Kafka refuses any
other). The server's reply to a success carries no data. PLAIN sends the password itself, so it
belongs on TLS (SASL_SSL) outside a trusted network.
"""

from __future__ import annotations

MECHANISM = "PLAIN"


class PlainClient:
    """The client side of one PLAIN exchange; the same shape as ``ScramClient`` (``start``, ``step``)."""

    mechanism = MECHANISM

    def __init__(self, username: str, password: str) -> None:
        if "\0" in username or "\0" in password:
            raise ValueError("a SASL/PLAIN user name or password cannot contain a NUL character")
        self._message = b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")
        self._state = "start"  # then "sent", then "complete"

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def start(self) -> bytes:
        """The one client message; raises RuntimeError when the exchange has already started."""
        if self._state != "start":
            raise RuntimeError("the SASL/PLAIN exchange has already started")
        self._state = "sent"
        message, self._message = self._message, b""
        return message

    def step(self, server_message: bytes) -> None:
        """Take the server's (empty) answer to a success: the exchange is complete. Raises
        RuntimeError when called before ``start`` or after the exchange ended."""
        if self._state != "sent":
            raise RuntimeError(f"the SASL/PLAIN exchange is at {self._state!r}: no server message is expected")
        self._state = "complete"
