"""The mirror process of a link, seen from failover: its admin API, called from trio.

``mirror.MirrorAdminClient`` blocks (urllib); each call here runs it in a worker thread and
turns its errors into :class:`~failover.errors.FailoverError` naming the mirror's URL. The
token is read from the link's token file only when a state-changing call needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import trio

from mirror import MirrorAdminClient, MirrorError
from mirror._admin import AdminApiError, check_token

from .errors import FailoverError, TopologyError
from .topology import Link

T = TypeVar("T")


class MirrorControl:
    """The admin API of the mirror running ``link`` (``link.mirror_admin``)."""

    def __init__(self, link: Link, *, timeout: float = 10.0) -> None:
        self.link = link
        self.timeout = timeout
        self._reader: MirrorAdminClient | None = None
        self._writer: MirrorAdminClient | None = None

    def _client(self, auth: bool) -> MirrorAdminClient:
        try:
            if not auth:
                if self._reader is None:
                    self._reader = MirrorAdminClient(self.link.mirror_admin, timeout=self.timeout)
                return self._reader
            if self._writer is None:
                self._writer = MirrorAdminClient(self.link.mirror_admin, token=self._token(), timeout=self.timeout)
            return self._writer
        except AdminApiError as exc:
            raise TopologyError(f"link {self.link.name!r}: mirror_admin: {exc}") from None

    def _token(self) -> str:
        path = self.link.token_file
        if path is None:
            raise TopologyError(
                f"link {self.link.name!r}: changing the mirror needs its admin token: set token_file in the topology"
            )
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise TopologyError(
                f"link {self.link.name!r}: cannot read the mirror's admin token {path}: {exc.strerror or exc}"
            ) from None
        try:
            return check_token(token, str(path))
        except MirrorError as exc:
            raise TopologyError(str(exc)) from None

    async def _call(self, what: str, fn: Callable[[MirrorAdminClient], T], *, auth: bool = False) -> T:
        client = self._client(auth)
        try:
            return await trio.to_thread.run_sync(fn, client, abandon_on_cancel=True)
        except AdminApiError as exc:
            raise FailoverError(
                f"the mirror of link {self.link.name!r} ({self.link.mirror_admin}): {what}: {exc}"
            ) from None

    async def status(self, name: str | None = None) -> dict[str, Any]:
        """The status of link ``name`` (default: this link) as the mirror reports it."""
        link = name or self.link.name
        return await self._call(f"read link {link!r}", lambda c: c.link(link))

    async def links(self) -> dict[str, Any]:
        return await self._call("list links", lambda c: c.links())

    async def failover(self, name: str, fence: str, *, auto_fence: bool = True) -> dict[str, Any]:
        """Stop link ``name`` for good (until :meth:`restore`) and fence its source when reachable."""
        return await self._call(
            f"fail over link {name!r}", lambda c: c.failover(name, fence=fence, auto_fence=auto_fence), auth=True
        )

    async def restore(self, name: str) -> dict[str, Any]:
        return await self._call(f"restore link {name!r}", lambda c: c.restore(name), auth=True)

    async def sync_groups(self, name: str) -> dict[str, Any]:
        return await self._call(f"sync the groups of link {name!r}", lambda c: c.sync_groups(name), auth=True)

    async def put_link(self, name: str, definition: Mapping[str, Any]) -> dict[str, Any]:
        return await self._call(f"add link {name!r}", lambda c: c.put_link(name, dict(definition)), auth=True)

    async def delete(self, name: str) -> dict[str, Any]:
        return await self._call(f"delete link {name!r}", lambda c: c.delete(name), auth=True)
