"""An in-memory stand-in for kazoo clients, for unit tests of the ``fn(client, ...)`` functions.

Only what the ephemeral-znode code calls (``node.zkkit`` and ``node.coordination._ephemeral``):
``create``/``get``/``set``/``delete``/``ensure_path``, ``client_id``
and ``connected``. Several :class:`FakeClient` share one :class:`FakeZooKeeper` as sessions
share a server; :meth:`FakeClient.expire` ends the session (its ephemerals vanish) and gives
the client a new one, as kazoo does after an expiry.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]


@dataclass
class Stat:
    version: int
    ephemeralOwner: int  # kazoo ZnodeStat field name


class FakeZooKeeper:
    """The znodes: path -> (data, stat). ``/`` always exists."""

    def __init__(self) -> None:
        self.znodes: dict[str, tuple[bytes, Stat]] = {}
        self._sessions = itertools.count(0x100)

    def new_session(self) -> int:
        return next(self._sessions)

    def end_session(self, session: int) -> None:
        for path in [p for p, (_, stat) in self.znodes.items() if stat.ephemeralOwner == session]:
            del self.znodes[path]

    def exists(self, path: str) -> bool:
        return path == "/" or path in self.znodes


class FakeClient:
    def __init__(self, server: FakeZooKeeper) -> None:
        self.server = server
        self.session = server.new_session()
        self.connected = True

    @property
    def client_id(self) -> tuple[int, bytes]:
        return self.session, b"password"

    def expire(self) -> int:
        """End the session (its ephemerals vanish) and open a new one; returns the old id."""
        old = self.session
        self.server.end_session(old)
        self.session = self.server.new_session()
        return old

    def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False, makepath: bool = False) -> str:
        if self.server.exists(path):
            raise NodeExistsError()
        parent = path.rsplit("/", 1)[0] or "/"
        if not self.server.exists(parent):
            if not makepath:
                raise NoNodeError()
            self.create(parent, makepath=True)
        self.server.znodes[path] = (value, Stat(0, self.session if ephemeral else 0))
        return path

    def ensure_path(self, path: str) -> None:
        if not self.server.exists(path):
            self.create(path, makepath=True)

    def get(self, path: str, watch: object = None) -> tuple[bytes, Stat]:
        """``watch`` is accepted and never called (no test here needs a watch to fire)."""
        if path not in self.server.znodes:
            raise NoNodeError()
        return self.server.znodes[path]

    def set(self, path: str, value: bytes, version: int = -1) -> Stat:
        _, stat = self.get(path)
        if version not in (-1, stat.version):
            raise BadVersionError()
        new = Stat(stat.version + 1, stat.ephemeralOwner)
        self.server.znodes[path] = (value, new)
        return new

    def delete(self, path: str, version: int = -1) -> None:
        _, stat = self.get(path)
        if version not in (-1, stat.version):
            raise BadVersionError()
        del self.server.znodes[path]
