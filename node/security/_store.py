"""What a node needs from where its site keeps SCRAM credentials and ACLs: :class:`SecurityStore`.

Kafka keeps both in ZooKeeper (``/config/users/<user>``, ``/kafka-acl...``) so that every broker
of a cluster authenticates and authorises alike; ``node.coordination`` implements this protocol
over that layout, with local copies kept current by watches, so that a look-up (every SASL
exchange, every authorised request) never waits for ZooKeeper. The request handlers and the
server use only this protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from node.security._acl import AclBinding, AclBindingFilter, Authorizer
from node.security._scram import ScramCredential

__all__ = ["SecurityStore", "SecurityStoreError"]


class SecurityStoreError(Exception):
    """The store could not be read or written (ZooKeeper unreachable, a malformed znode); the
    message names what failed. Handlers answer it with a retriable or unknown-server error."""


class SecurityStore(Protocol):
    """A site's SCRAM credentials and ACLs, as this node knows them."""

    @property
    def authorizer(self) -> Authorizer:
        """Every ACL of the site, current within about a second of a change on any node."""
        ...

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """The stored credential of ``user`` for ``mechanism`` (``SCRAM-SHA-256``/``-512``), None without one."""
        ...

    def scram_users(self) -> Mapping[str, Mapping[str, int]]:
        """user -> mechanism -> iterations, for every user with a credential."""
        ...

    async def set_scram(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Store (or replace) one credential; every node sees it within about a second."""
        ...

    async def delete_scram(self, user: str, mechanism: str) -> bool:
        """Remove one credential; False when there was none."""
        ...

    async def add_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Store the bindings (each checked with ``validate_binding`` by the caller); all nodes apply them."""
        ...

    async def remove_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Remove every stored binding ``acl_filter`` matches; returns them."""
        ...
