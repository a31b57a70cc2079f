"""The ZooKeeper kit: what every holder of a kazoo session needs, whatever znodes it keeps.

Used by the node's coordination (Kafka's znode layout, :mod:`node.coordination`) and by the
mirror's scale-out membership (``mirror._members``). It imports only the standard library and
kazoo, so any package may use it; what a caller does with its session (which znodes, when it
gives up connecting, how long it waits for the close) stays with the caller.

- :func:`split_connect`: ``host:port[,host:port...][/chroot]`` -> hosts and chroot;
- :func:`kazoo_client`: the kazoo client every session uses (reconnects forever, retries each
  command a few times, on :class:`PollHandler`); :func:`stop_quietly` ends its session and
  closes it, never raising and never hanging;
- :func:`session_of`: the id of the client's current session;
- :func:`create_or_find`: create an ephemeral znode, or read (and watch) the one standing at
  its path, to learn which session holds it;
- :func:`wall_clock_ms`: the default clock for wall-clock timestamps written into znodes
  (callers take the clock as a parameter, so tests can inject one);
- :class:`ZkDigest` and :func:`read_digest_file`: a ZooKeeper ``digest`` credential
  (``user:password``), never shown; :func:`znode_acl` and :func:`ensure_path`: the ACL a
  secured client creates a znode with (see *Security* below).

Security. Without a credential a client is anonymous and creates every znode open
(``world:anyone`` may do anything), as before. With a :class:`ZkDigest` the client authenticates
(ZooKeeper's ``addauth digest user:password``) on every connection. With ``secure_acl`` as well
it creates znodes as Kafka does with ``zookeeper.set.acl=true`` (``ZkData.defaultAcls``): the
credential may do everything (``digest:user:base64(sha1("user:password"))``, all permissions)
and the world may only READ, except under :data:`PRIVATE_ROOTS` (SCRAM credentials, broker
secrets), which the world may not read either. kazoo's ``default_acl`` holds the readable ACL, so
every create (plain, ``makepath``, ``ensure_path``, in a transaction) gets it; only the few
creates under :data:`PRIVATE_ROOTS` pass :func:`znode_acl` explicitly. The password never appears
in a repr, an error or a log line: kazoo logs the authentication packet at DEBUG, and a filter on
its logger hides the credential there.

Every function but :func:`split_connect` and :func:`wall_clock_ms` blocks on ZooKeeper: run it
in a worker thread (``trio.to_thread.run_sync``) or on kazoo's own threads.
"""

from __future__ import annotations

import atexit
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]
from kazoo.handlers.threading import SequentialThreadingHandler  # type: ignore[import-untyped]
from kazoo.protocol.serialization import Auth  # type: ignore[import-untyped]
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]
from kazoo.security import ACL, ANYONE_ID_UNSAFE, Permissions, make_digest_acl  # type: ignore[import-untyped]

logger = logging.getLogger(__name__)

COMMAND_TRIES = 5  # a kazoo command is retried this often through a connection loss
#: How long :func:`stop_quietly` waits for kazoo's ``stop()`` before closing the client's sockets.
STOP_WAIT_S = 2.0
#: Znodes the world may not read even on a secured site, with everything below them (Kafka's
#: ``ZkData.SensitiveRootPaths``): SCRAM credentials, and dynamic broker configs (which may hold secrets).
PRIVATE_ROOTS: tuple[str, ...] = ("/config/users", "/config/brokers")
#: What a log line shows instead of a credential.
HIDDEN = "[hidden]"


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


# -- credentials and ACLs ---------------------------------------------------------------------


@dataclass(frozen=True)
class ZkDigest:
    """A ZooKeeper ``digest`` credential. The password is in no repr, str or error message.

    Raises ValueError (quoting neither part: a misplaced separator would put some of the
    password in the user) for an empty user, a user with ``:`` or blanks, or an empty password.
    """

    user: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.user or ":" in self.user or self.user != "".join(self.user.split()):
            raise ValueError(f"{_EXPECTED}: the user is empty or has ':' or blanks")
        if not self.password:
            raise ValueError(f"{_EXPECTED}: the password is empty")

    @property
    def auth_data(self) -> tuple[str, str]:
        """``("digest", "user:password")``, as kazoo's ``auth_data`` and ``add_auth`` take it."""
        return "digest", f"{self.user}:{self.password}"

    def all_acl(self) -> Any:
        """Every permission for this credential: ``digest:user:base64(sha1("user:password"))``, cdrwa."""
        return make_digest_acl(self.user, self.password, all=True)

    def secure_acl(self) -> list[Any]:
        """The ACL of a secured site's znodes: this credential may do everything, the world may READ."""
        return [self.all_acl(), ACL(Permissions.READ, ANYONE_ID_UNSAFE)]


_EXPECTED = "expected one line user:password"


def read_digest_file(path: str | os.PathLike[str]) -> ZkDigest:
    """The credential in ``path``: one line ``user:password`` (a final line break is allowed; the
    password is everything after the first ``:``, as ZooKeeper splits it).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not UTF-8 or not one such line; the message quotes nothing of the file
            (nor its name: the caller names it with the setting).
    """
    with open(path, "rb") as file:
        data = file.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{_EXPECTED}, not UTF-8 text") from None
    line = text.removesuffix("\n").removesuffix("\r")
    user, colon, password = line.partition(":")
    if "\n" in line or "\r" in line:
        raise ValueError(f"{_EXPECTED}, not several")
    if not colon:
        raise ValueError(f"{_EXPECTED}: there is no ':'")
    return ZkDigest(user, password)


def _private(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in PRIVATE_ROOTS)


def znode_acl(client: Any, path: str) -> list[Any] | None:
    """The ACL for creating ``path`` (relative to the client's chroot) when the client's default
    will not do: on a secured client (one with a ``default_acl``) a path under
    :data:`PRIVATE_ROOTS` gets the default without the world's entries. None otherwise: create
    with kazoo's default (the secured ACL, or open on a client that sets none)."""
    default = getattr(client, "default_acl", None)
    if not default or not _private(path):
        return None
    return [acl for acl in default if acl.id != ANYONE_ID_UNSAFE]


def ensure_path(client: Any, path: str) -> None:
    """``client.ensure_path(path)``, each missing znode created with its own :func:`znode_acl`.

    A znode the client may not read counts as there: ZooKeeper answers NoAuth only for a znode
    that exists (a secured site's private ones, to a client without the credential).
    """
    try:
        if client.exists(path) is not None:
            return
    except NoAuthError:
        return
    acl = znode_acl(client, path)
    if acl is None:
        client.ensure_path(path)
        return
    parent = path.rpartition("/")[0]
    if parent:
        ensure_path(client, parent)
    client.ensure_path(path, acl=acl)


class _HideAuth(logging.Filter):
    """Hides the credential of the authentication packets kazoo logs (``Sending request(...): Auth(...)``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(arg, Auth) for arg in record.args):
            record.args = tuple(arg._replace(auth=HIDDEN) if isinstance(arg, Auth) else arg for arg in record.args)
        return True


_HIDE_AUTH = _HideAuth()


def kazoo_client(
    hosts: str,
    session_timeout_s: float,
    *,
    command_tries: int = COMMAND_TRIES,
    digest: ZkDigest | None = None,
    secure_acl: bool = False,
) -> Any:
    """An unstarted kazoo client for ``hosts`` (``host:port,...[/chroot]``): it reconnects
    forever and tries each command ``command_tries`` times through a connection loss.

    With ``digest`` it authenticates with that credential on each connection; with
    ``secure_acl`` too, the znodes it creates get :meth:`ZkDigest.secure_acl` (see the module
    docstring). ValueError for ``secure_acl`` without ``digest``.
    """
    if secure_acl and digest is None:
        raise ValueError("secured znodes (zookeeper.set.acl) need a ZooKeeper digest credential")
    kazoo_log = logging.getLogger("kazoo.client")  # kazoo's default; its connection logs through it too
    if digest is not None and _HIDE_AUTH not in kazoo_log.filters:
        kazoo_log.addFilter(_HIDE_AUTH)
    return KazooClient(
        hosts=hosts,
        timeout=session_timeout_s,
        connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
        command_retry=KazooRetry(max_tries=command_tries, delay=0.05, backoff=2, max_delay=1.0),
        auth_data={digest.auth_data} if digest is not None else None,
        default_acl=digest.secure_acl() if secure_acl and digest is not None else None,
        logger=kazoo_log,
        handler=PollHandler(),
    )


_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR


class PollHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler, with a ``select`` that costs one ``poll`` call.

    kazoo's connection thread calls ``select`` before every request it writes and for every answer
    it reads. kazoo's own builds a ``selectors.DefaultSelector`` each time (an epoll object: create,
    register, wait, close). With thousands of znodes read or written at once (a failover at 5,000
    partitions) that was half of kazoo's thread in py-spy: each of those system calls lets another
    thread take the GIL, which this thread then waits to get back. A ``poll`` object needs one
    system call and, unlike ``select.select``, takes descriptors above 1,023.

    Same contract as kazoo's: lists of objects with ``fileno()``; the readable and writable ones are
    returned (an error or hang-up counts as both, as ``select`` reports it); ``xlist`` is ignored
    (kazoo passes none); ``timeout`` in seconds, None to wait for ever.
    """

    def select(
        self, rlist: list[Any], wlist: list[Any], xlist: list[Any], timeout: float | None = None
    ) -> tuple[list[Any], list[Any], list[Any]]:
        poller = select.poll()
        masks: dict[int, int] = {}
        for obj in rlist:
            masks[obj.fileno()] = select.POLLIN
        for obj in wlist:
            masks[obj.fileno()] = masks.get(obj.fileno(), 0) | select.POLLOUT
        for fd, mask in masks.items():
            poller.register(fd, mask)
        ready = dict(poller.poll(None if timeout is None else max(0.0, timeout) * 1000))
        if not ready:
            return [], [], []
        return (
            [obj for obj in rlist if ready.get(obj.fileno(), 0) & _READABLE],
            [obj for obj in wlist if ready.get(obj.fileno(), 0) & _WRITABLE],
            [],
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
