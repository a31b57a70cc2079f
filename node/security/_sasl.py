"""What every SASL mechanism shares: the failure it raises and the server interface (the factory is ``_servers``).

A broker runs one :class:`SaslServer` per connection. It hands each SaslAuthenticate token to
``step`` and sends back the bytes ``step`` returns; when ``step`` raises :class:`SaslFailure`
the broker answers SASL_AUTHENTICATION_FAILED with the exception's message as ``error_message``
and closes the connection. Once ``complete`` is true, ``authorization_id`` is the user the
connection acts as.
"""

from __future__ import annotations

from typing import Protocol

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslFailure(Exception):
    """An authentication failure or a malformed client message.

    The message goes to the client verbatim (SaslAuthenticate's ``error_message``), so it never
    says whether a user exists: bad credentials and unknown users get the same
    :func:`invalid_credentials` text. A malformed message is described plainly, without echoing
    secrets the client sent.
    """


def invalid_credentials(mechanism: str) -> SaslFailure:
    """The failure for a wrong password or unknown user: Kafka's wording, naming only the mechanism."""
    return SaslFailure(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    )


class SaslServer(Protocol):
    """The server side of one SASL exchange on one connection (sans-IO: bytes in, bytes out)."""

    @property
    def mechanism(self) -> str:
        """The mechanism's registered name, e.g. ``SCRAM-SHA-256``."""
        ...

    @property
    def complete(self) -> bool:
        """True once the client has authenticated; no further ``step`` is accepted."""
        ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user name; raises RuntimeError before the exchange is complete."""
        ...

    def step(self, client_message: bytes) -> bytes:
        """Consume the client's next message and return the server's reply.

        Raises SaslFailure on bad credentials, a malformed or out-of-order message, or any
        message after the exchange ended; the exchange is then over for good.
        """
        ...
