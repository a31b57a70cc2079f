"""One ZooKeeper session for trio code, over kazoo: its life, its worker threads, its hints.

:class:`ZkSession` owns one kazoo client from :meth:`~ZkSession.start` (connect within the
connection timeout, create the chroot and Kafka's persistent paths, set the watches) to
:meth:`~ZkSession.close`. The operations on the state (the subject modules: :mod:`._topics`,
:mod:`._partition_states`, :mod:`._brokers`, ...) are plain blocking functions
``fn(client, ...)``; :meth:`ZkSession.run` is the one way trio calls them, and
:class:`Operation` turns such a function into an async method once, so no operation is
written twice.

Threading. Kazoo is thread-based; the rules that keep it from blocking trio:

- every blocking kazoo call runs in ``trio.to_thread.run_sync``; each operation is one
  function run whole in one worker thread (:meth:`ZkSession.run`);
- kazoo's own threads (watches, session events) never call trio except through
  ``TrioToken.run_sync_soon`` (see :mod:`._hints`), and never wait for trio.

Cancellation. Every operation may be cancelled. A cancelled read returns nothing. A cancelled
write is abandoned, not undone: its worker thread finishes the operation (each operation is
written so that it completes or fails as a whole), so after a cancelled write re-read to learn
the outcome, as after a ZooKeeper connection loss. :meth:`ZkSession.close` is shielded;
:meth:`ZkSession.start` may be cancelled and then leaves nothing running.

Sessions. Kazoo reconnects by itself. When ZooKeeper expired the session (the process was
unreachable for longer than the session timeout) kazoo opens a new one; the ephemerals kept
in :attr:`ZkSession.ephemerals` (the broker registration, the offline replicas) died with the
old session and are re-created (see :mod:`._ephemeral`), then the hint ``"session"`` is sent.
``/controller`` is not restored: it died too, and a new election decides. Watches (kazoo
``ChildrenWatch``/``DataWatch``) survive reconnects and session expiry.

Security. With a :class:`~node.zkkit.ZkDigest` the session authenticates with it; with
``set_acl`` as well (``zookeeper.set.acl``) every znode it creates is readable by the world and
writable only with that credential, and the SCRAM credentials are not even readable (see
:mod:`node.zkkit`). Without them, znodes are created open, as before. Znodes that exist already
keep their ACLs.

Clocks. Deadlines use trio's clock (``trio.current_time``: a ``trio.testing.MockClock``
drives them in tests); wall-clock timestamps written into znodes come from the injected
``clock_ms``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import trio
from kazoo.exceptions import KazooException  # type: ignore[import-untyped]
from kazoo.protocol.states import KazooState  # type: ignore[import-untyped]

from node.zkkit import ZkDigest, ensure_path, kazoo_client, session_of, split_connect, stop_quietly, wall_clock_ms

from ._ephemeral import KeptEphemerals
from ._errors import CoordinationError
from ._hints import Hints
from ._layout import PERSISTENT_PATHS, STRAIT_PATHS
from ._read_cache import ReadCache
from ._reads import retried
from ._watches import ChangeWatches

P = ParamSpec("P")
T = TypeVar("T")

Describe = str | Callable[[], str]  # what an operation does, for errors ("create topic 'orders'")
NewClient = Callable[[str, float], Any]  # (hosts[/chroot], session timeout in s) -> an unstarted kazoo client


class ZkSession:
    """One session with the ZooKeeper named by ``connect`` (``zookeeper.connect``).

    Use ``async with`` or :meth:`start` / :meth:`close`; one trio run per instance.
    ``clock_ms`` gives the wall-clock timestamps written into znodes; ``digest`` authenticates
    the session and ``set_acl`` secures the znodes it creates (module docstring); ``new_client``
    makes the kazoo client (a fault point for tests; by default :func:`~node.zkkit.kazoo_client`
    with ``digest`` and ``set_acl``). Errors from :meth:`run`: what the operation raises
    (subclasses of :class:`CoordinationError`, ``ValueError`` for invalid arguments); any other
    ZooKeeper failure (connection loss, closed session) is a :class:`CoordinationError` naming
    the operation and the connect string.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
        clock_ms: Callable[[], int] = wall_clock_ms,
        digest: ZkDigest | None = None,
        set_acl: bool = False,
        new_client: NewClient | None = None,
    ) -> None:
        """Nothing connects until :meth:`start`.

        Raises:
            ValueError: ``connect`` is malformed, a timeout is not positive, or ``set_acl``
                comes without ``digest``.
        """
        self._hosts, self._chroot = split_connect(connect)
        if session_timeout_ms <= 0 or connection_timeout_ms <= 0:
            raise ValueError(
                f"ZooKeeper timeouts must be positive: session {session_timeout_ms} ms, "
                f"connection {connection_timeout_ms} ms"
            )
        if set_acl and digest is None:
            raise ValueError("zookeeper.set.acl needs a ZooKeeper digest credential to create znodes with")
        if new_client is None:
            new_client = functools.partial(kazoo_client, digest=digest, secure_acl=set_acl)
        self.connect = connect
        self.clock_ms = clock_ms
        self.ephemerals = KeptEphemerals()  # re-created in each new session; deleted by close()
        self._session_timeout = session_timeout_ms / 1000
        self._connection_timeout = connection_timeout_ms / 1000
        self._new_client = new_client
        self._client: Any = None  # the kazoo client, set by start()
        self._hints = Hints()
        self._closed = False
        self._session_lock = threading.Lock()  # _seen_session is noted from trio's and kazoo's threads
        self._seen_session: int | None = None
        #: What the last snapshot read of the watched znodes (see :mod:`._read_cache`); marked by
        #: the watches, emptied by every change of the connection's state.
        self.read_cache = ReadCache()
        self._watches: ChangeWatches | None = None

    @property
    def _name(self) -> str:
        return f"{type(self).__name__}({self.connect!r})"

    # -- life -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, create the chroot and Kafka's persistent paths if missing, and set the watches.

        Raises:
            CoordinationError: already started or closed; no session within the connection
                timeout (the message names the connect string).
        """
        if self._client is not None or self._closed:
            raise CoordinationError(f"{self._name} was started before; use a new {type(self).__name__}")
        self._hints.bind(trio.lowlevel.current_trio_token())
        deadline = trio.current_time() + self._connection_timeout
        try:
            if self._chroot:
                await self._ensure_chroot(deadline)
            client = self._new_client(self._hosts + self._chroot, self._session_timeout)
            client.add_listener(self._on_state)
            self._client = client
            await self._connect(client, deadline)
            await self.run("initialise", self._initialise)
        except BaseException:
            self._closed = True
            self._hints.close()
            if self._client is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(stop_quietly, self._client)
            raise

    async def close(self) -> None:
        """Delete the kept ephemerals, end the session and close the hint channel. Idempotent.

        Shielded from cancellation; bounded by kazoo's own stop timeout.
        """
        if self._closed:
            return
        self._closed = True
        client = self._client
        try:
            if client is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self._close, client)
        finally:
            self._hints.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def post(self, hint: str) -> None:
        """Queue a hint of the caller's own on :meth:`events` (thread-safe, never blocks), e.g.
        ``"stalled"`` when the process was stopped and everything must be read again."""
        self._hints.post(hint)

    def events(self) -> trio.MemoryReceiveChannel[str]:
        """Hints that something changed; re-read the named state when one arrives.

        ``"topics"`` (a topic was created or deleted), ``"topic:<name>"`` (its assignment changed
        or it was deleted), ``"config:<name>"`` (its config znode appeared, changed or vanished),
        ``"brokers"`` (a broker registered or went away), ``"states"`` (the leader/ISR state of
        some partition was written or deleted), ``"controller"`` (``/controller`` appeared,
        changed or vanished), ``"reassignment"`` (a reassignment started, progressed or ended),
        ``"offline"`` (some broker's offline replicas changed), ``"session"`` (the session
        expired and a new one was opened: anything may have changed meanwhile; the kept
        ephemerals are restored).
        Hints from before :meth:`start` returned are not sent: read the state after starting.
        Each hint is queued at most once until read. Always the same channel, meant for one
        reader; it ends after :meth:`close`.
        """
        return self._hints.receive_channel

    # -- the one way in -------------------------------------------------------------------------

    async def run(self, what: Describe, fn: Callable[Concatenate[Any, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(client, *args, **kwargs)`` whole in one worker thread; see the module docstring
        for cancellation. ``what`` (or what it returns) names the operation in errors.

        Raises:
            CoordinationError: not started or closed; a ZooKeeper failure (naming ``what``).
            Whatever ``fn`` raises otherwise.
        """
        if self._closed or self._client is None:
            state = "closed" if self._closed else "not started"
            raise CoordinationError(f"{self._name} is {state}; cannot {_text(what)}")
        call = functools.partial(fn, self._client, *args, **kwargs)
        try:
            return await trio.to_thread.run_sync(call, abandon_on_cancel=True)
        except KazooException as exc:
            raise CoordinationError(
                f"ZooKeeper {self.connect}: {_text(what)} failed: {type(exc).__name__} {exc}".rstrip()
            ) from exc

    # -- connecting -----------------------------------------------------------------------------

    async def _connect(self, client: Any, deadline: float) -> None:
        """Start ``client`` and wait (in trio, cancellably) until it has a session."""
        connected = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def on_state(state: str) -> bool:
            if state != KazooState.CONNECTED:
                return False
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(connected.set)
            return True  # one-shot: kazoo removes the listener

        client.add_listener(on_state)
        client.start_async()
        with trio.move_on_at(deadline):
            await connected.wait()
        if not connected.is_set():
            raise CoordinationError(
                f"could not connect to ZooKeeper at {self.connect} within {self._connection_timeout:g} s"
            )

    async def _ensure_chroot(self, deadline: float) -> None:
        """Create the chroot with a short-lived session outside it (kazoo needs it to exist)."""
        client = self._new_client(self._hosts, self._session_timeout)
        try:
            await self._connect(client, deadline)
            await trio.to_thread.run_sync(client.ensure_path, self._chroot, abandon_on_cancel=True)
        except KazooException as exc:
            raise CoordinationError(
                f"ZooKeeper {self.connect}: creating chroot {self._chroot} failed: {exc!r}"
            ) from exc
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(stop_quietly, client)

    def _initialise(self, client: Any) -> None:
        for path in PERSISTENT_PATHS + STRAIT_PATHS:
            ensure_path(client, path)
        self._note_session(client)  # the first session (kazoo's thread may note it too)
        self._watches = ChangeWatches(client, self._hints, lambda: self._closed, self.read_cache)
        self._watches.start()

    def _close(self, client: Any) -> None:
        self.ephemerals.close(client)
        stop_quietly(client)

    # -- kazoo-thread callbacks (never block, never touch trio but through Hints.post) ---------

    def _on_state(self, state: str) -> None:
        """Connection listener (kazoo's connection thread): hand session changes to a kazoo worker.
        Any change may mean a watch's report was missed: the next snapshot reads everything."""
        self.read_cache.invalidate()
        if state == KazooState.CONNECTED and not self._closed:
            self._client.handler.spawn(self._after_connect)

    def _after_connect(self) -> None:
        """Kazoo worker thread: restore the ephemerals if needed; hint ``"session"`` for a new session."""
        client = self._client
        new_session = self._note_session(client)
        self.ephemerals.restore(client)
        if new_session and self._watches is not None:
            self._watches.states.rearm()  # plain watches die with their session
        if new_session and not self._closed:
            self._hints.post("session")

    def _note_session(self, client: Any) -> bool:
        """Note the client's session; True when it replaced one seen before (that one expired)."""
        session = session_of(client)
        if session is None:
            return False
        with self._session_lock:
            new_session = self._seen_session is not None and session != self._seen_session
            self._seen_session = session
        return new_session


class Operation(Generic[P, T]):
    """An async method made once from a blocking ``fn(client, ...)``: ``method(...)`` is
    ``await session.run(what, fn, ...)``.

    ``what`` names the operation in errors: a ``str.format`` template over ``fn``'s argument
    names (``"create topic {name!r}"``), or a function of those arguments. ``retry=True``
    retries the whole of ``fn`` through a connection loss (:mod:`._reads`): for reads only.
    The method's docstring is ``fn``'s.
    """

    def __init__(
        self, what: str | Callable[..., str], fn: Callable[Concatenate[Any, P], T], *, retry: bool = False
    ) -> None:
        self._what = what
        self._fn: Callable[..., T] = functools.partial(_retrying, fn) if retry else fn
        self._signature = inspect.signature(fn)
        self._name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = f"{owner.__qualname__}.{name}"

    def describe(self, *args: Any, **kwargs: Any) -> str:
        """What the call ``method(*args, **kwargs)`` does, in words."""
        bound = self._signature.bind(None, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(list(bound.arguments.items())[1:])  # without the client
        return self._what.format(**arguments) if isinstance(self._what, str) else self._what(**arguments)

    @overload
    def __get__(self, session: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, session: ZkSession, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, session: ZkSession | None, owner: type[Any]) -> Self | Callable[P, Awaitable[T]]:
        if session is None:
            return self

        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return await session.run(lambda: self.describe(*args, **kwargs), self._fn, *args, **kwargs)

        method.__qualname__ = self._name
        method.__doc__ = self.__doc__
        return method


def _retrying(fn: Callable[..., T], client: Any, *args: Any, **kwargs: Any) -> T:
    return retried(functools.partial(fn, client, *args, **kwargs))


def _text(what: Describe) -> str:
    return what if isinstance(what, str) else what()
