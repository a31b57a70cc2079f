"""Choosing the SASL server of a mechanism: :func:`new_server`."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from node.security._plain import PlainServer
from node.security._sasl import MECHANISMS, SaslServer
from node.security._scram import ScramCredential, ScramMechanism, ScramServer

__all__ = ["new_server"]


def new_server(
    mechanism: str,
    *,
    plain_users: Mapping[str, str] | None,
    scram_lookup: Callable[[str, str], ScramCredential | None] | None,
) -> SaslServer:
    """A fresh server for one exchange with ``mechanism``.

    PLAIN is enabled by ``plain_users`` (user name to password), the SCRAM mechanisms by
    ``scram_lookup(mechanism, user)``. Raises ValueError naming the mechanism when it is unknown
    or its source of credentials was not given.
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SASL mechanism {mechanism!r}; known mechanisms are {', '.join(MECHANISMS)}")
    if mechanism == "PLAIN":
        if plain_users is None:
            raise ValueError("SASL mechanism 'PLAIN' is not enabled: no PLAIN users are configured")
        return PlainServer(plain_users)
    if scram_lookup is None:
        raise ValueError(f"SASL mechanism {mechanism!r} is not enabled: no SCRAM credential store is configured")
    return ScramServer(ScramMechanism.from_name(mechanism), scram_lookup)
