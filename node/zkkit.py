"""The ZooKeeper kit: what every holder of a kazoo session needs, whatever znodes it keeps.

Used by the node's coordination (Kafka's znode layout, :mod:`node.coordination`) and by the
mirror's scale-out membership (``mirror._members``). It imports only the standard library and
kazoo, so any package may use it; what a caller does with its session (which znodes, when it
gives up connecting, how long it waits for the close) stays with the caller.

- :func:`split_connect`: ``host:port[,host:port...][/chroot]`` -> hosts and chroot;
- :func:`kazoo_client`: the kazoo client every session uses (reconnects forever, retries each
  command a few times); :func:`stop_quietly` ends its session and closes it, never raising
  and never hanging;
- :func:`session_of`: the id of the client's current session;
- :func:`create_or_find`: create an ephemeral znode, or read (and watch) the one standing at
  its path, to learn which session holds it;
- :func:`wall_clock_ms`: the default clock for wall-clock timestamps written into znodes
  (callers take the clock as a parameter, so tests can inject one).

Every function but :func:`split_connect` and :func:`wall_clock_ms` blocks on ZooKeeper: run it
in a worker thread (``trio.to_thread.run_sync``) or on kazoo's own threads.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import NodeExistsError, NoNodeError  # type: ignore[import-untyped]
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

logger = logging.getLogger(__name__)

COMMAND_TRIES = 5  # a kazoo command is retried this often through a connection loss
#: How long :func:`stop_quietly` waits for kazoo's ``stop()`` before closing the client's sockets.
STOP_WAIT_S = 2.0


def wall_clock_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def split_connect(connect: str, what: str = "zookeeper.connect") -> tuple[str, str]:
    """Split ``host:port[,host:port...][/chroot]`` into hosts and chroot (``""`` when none).

    ``what`` names the setting in errors (the node's ``zookeeper.connect``, the mirror's
    ``zookeeper``).

    Raises:
        ValueError: naming ``what`` and ``connect`` when it has no hosts or an empty chroot segment.
    """
    hosts, slash, chroot = connect.partition("/")
    if not hosts.strip() or any(not h.strip() for h in hosts.split(",")):
        raise ValueError(f"{what} {connect!r} names no host (expected host:port[,host:port][/chroot])")
    chroot = chroot.rstrip("/")
    if slash and chroot and any(not part for part in chroot.split("/")):
        raise ValueError(f"{what} {connect!r} has an empty path segment in its chroot")
    return hosts, f"/{chroot}" if chroot else ""


def kazoo_client(hosts: str, session_timeout_s: float, *, command_tries: int = COMMAND_TRIES) -> Any:
    """An unstarted kazoo client for ``hosts`` (``host:port,...[/chroot]``): it reconnects
    forever and tries each command ``command_tries`` times through a connection loss."""
    return KazooClient(
        hosts=hosts,
        timeout=session_timeout_s,
        connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
        command_retry=KazooRetry(max_tries=command_tries, delay=0.05, backoff=2, max_delay=1.0),
    )


def stop_quietly(client: Any, wait: float = STOP_WAIT_S) -> None:
    """End the client's session (its ephemerals vanish) and close the client; never raises, and
    returns within about twice ``wait`` seconds.

    kazoo's ``stop()`` closes the session, then joins kazoo's worker threads. A watch callback
    that re-arms its watch as the session closes can block a worker for good: it writes a
    wake-up byte to the client's internal socket pair, which nobody reads once the connection
    thread has ended (seen in a node stopping with hundreds of watched znodes: the node hung
    until its process manager killed it). So ``stop()`` runs in a thread of its own; when it has
    not returned within ``wait`` seconds, ``close()`` closes that socket pair, which fails the
    blocked write and lets the worker, and ``stop()``, end.
    """
    stopper = threading.Thread(target=_stop, args=(client,), name="zookeeper-stop", daemon=True)
    stopper.start()
    stopper.join(wait)
    stuck = stopper.is_alive()
    if stuck:
        logger.warning("the ZooKeeper client has not stopped after %g s; closing its sockets to end it", wait)
    try:
        client.close()
    except Exception as exc:
        logger.warning("closing the ZooKeeper client failed: %r", exc)
    if stuck:
        stopper.join(wait)
        if stopper.is_alive():
            logger.error("the ZooKeeper client is still stopping after %g s; leaving it", 2 * wait)
            handler_stop = getattr(getattr(client, "handler", None), "stop", None)
            if handler_stop is not None:
                atexit.unregister(handler_stop)  # kazoo's exit hook would wait for it forever


def _stop(client: Any) -> None:
    try:
        client.stop()
    except Exception as exc:  # stopping must not mask the error that got us here
        logger.warning("stopping the ZooKeeper client failed: %r", exc)


def session_of(client: Any) -> int | None:
    """The id of the client's current ZooKeeper session, None while it has none."""
    client_id = client.client_id
    return int(client_id[0]) if client_id else None


@dataclass(frozen=True)
class Found:
    """An ephemeral znode that stood at the path: what it holds, the session holding it, its version."""

    data: bytes
    owner: int  # ``stat.ephemeralOwner``: may be the caller's own session (an earlier create)
    version: int


def create_or_find(
    client: Any, path: str, data: bytes, *, makepath: bool = False, watch: Callable[[Any], None] | None = None
) -> Found | bool:
    """Create the ephemeral ``path`` holding ``data`` in the client's session, or read the znode
    standing there (setting ``watch`` on it, when given). One attempt; the caller decides what
    to do with someone else's znode and whether to try again.

    Returns:
        True when this call created the znode; the :class:`Found` znode when one stood there;
        False when one stood there but vanished before it could be read (its session ended,
        or its holder deleted it): try again.

    Raises:
        kazoo's errors (``NoNodeError`` for a missing parent without ``makepath``, a connection
        loss, ...), as ``client.create`` and ``client.get`` do.
    """
    try:
        client.create(path, data, ephemeral=True, makepath=makepath)
        return True
    except NodeExistsError:
        pass
    try:
        found, stat = client.get(path, watch=watch)
    except NoNodeError:
        return False
    return Found(bytes(found), int(stat.ephemeralOwner), int(stat.version))
