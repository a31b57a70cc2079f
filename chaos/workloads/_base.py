"""What every workload shares: a named process, a background thread, its pending operations and errors.

A :class:`Workload` records into a :class:`chaos.history.History` under its ``process`` name.
Each operation is registered as pending when its ``invoke`` is recorded and leaves that set with
its completion, under one lock, so that :meth:`Workload.stop` can complete whatever is still
pending as ``info`` exactly once: a completion that arrives later (a delivery report served by a
client that would not close in time) finds nothing pending and is dropped, never recorded twice,
and a thread abandoned that way records nothing more.

The thread calls the subclass's ``_run(client, stopping)`` and then, whatever happened,
``_shutdown(client)``. An exception that ends ``_run`` lands in :attr:`Workload.errors`. Each
launch of the thread gets its own stop event, so a client abandoned by ``stop`` (still stuck in
its close) never resumes work when a new one is launched (``Producer.repoint``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import confluent_kafka as ck
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition

from chaos.errors import WorkloadError
from chaos.history import FAILOVER, NEMESIS, History, Op, OpType

from ._outcomes import describe
from ._records import partition_key

__all__ = ["GRACE_S", "Drain", "Workload"]

_log = logging.getLogger("chaos.workloads")

#: Seconds ``stop`` waits past its timeout for the thread to end before it abandons the thread.
GRACE_S = 5.0
#: Most entries kept in ``errors`` (the first ones: later ones are usually consequences).
_MAX_ERRORS = 100
#: Most entries kept in ``client_errors`` (the latest ones).
_MAX_CLIENT_ERRORS = 20
#: Fields of an entry that are its own, not the operation's.
_ENTRY_KEYS = frozenset({"index", "type", "process", "f", "time", "mono"})

#: Seconds a committed-offsets lookup of a drain may take (the worker thread does nothing else meanwhile).
_LOOKUP_S = 2.0

ClientT = TypeVar("ClientT")
TP = tuple[str, int]


@dataclass
class Drain:
    """A drain asked for by ``_drain_until`` and followed by the worker thread (under the workload's lock)."""

    ends: dict[TP, int]
    deadline: float  # time.monotonic() when the drain gives up
    committed: dict[TP, int] = field(default_factory=dict)
    last_error: str | None = None
    reached: threading.Event = field(default_factory=threading.Event)

    def behind(self) -> list[str]:
        return [
            f"{partition_key(*tp)} at {self.committed.get(tp, 'nothing committed')} of {end}"
            for tp, end in sorted(self.ends.items())
            if end > 0 and self.committed.get(tp, -1) < end
        ]


class Workload(Generic[ClientT]):
    """A named history process that works from a background thread; ``with`` starts and stops it.

    Subclasses create their client in ``_prepare`` (in the caller's thread, so that a bad
    configuration raises from :meth:`start`), work in ``_run`` until ``stopping`` is set, and
    release the client in ``_shutdown``. Counters and ``errors`` are safe to read from any thread.
    """

    def __init__(self, history: History, process: str) -> None:
        if not process or process in (NEMESIS, FAILOVER):
            raise ValueError(f"a workload's process name must be non-empty and not {NEMESIS!r} or {FAILOVER!r}")
        self.history = history
        self.process = process
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._started = False
        self._pending: dict[Hashable, Op] = {}
        self._abandoned: set[threading.Thread] = set()  # threads whose client would not close: not recorded
        self._outcomes: Counter[tuple[str, str]] = Counter()
        self._errors: list[BaseException] = []
        self._client_errors: deque[str] = deque(maxlen=_MAX_CLIENT_ERRORS)
        self._fatal = threading.Event()  # set by a fatal client error: the worker loop ends
        self._drain: Drain | None = None  # the drain the worker thread follows, if any

    # -- what any thread may read -------------------------------------------------------------------

    @property
    def errors(self) -> list[BaseException]:
        """The exceptions that ended the workload (or a client of it), oldest first."""
        with self._changed:
            return list(self._errors)

    @property
    def client_errors(self) -> list[str]:
        """The latest non-fatal client errors (a broker down, a connection refused): chaos expects them."""
        with self._changed:
            return list(self._client_errors)

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def pending(self) -> int:
        """Operations invoked and not completed yet."""
        with self._changed:
            return len(self._pending)

    def count(self, f: str, type: OpType) -> int:
        """How many operations ``f`` this workload has recorded as ``type`` (``invoke``, ``ok``, ...)."""
        with self._changed:
            return self._outcomes[(f, type)]

    def _describe(self) -> str:
        """Counters and errors in words (called with the lock held)."""
        counts = ", ".join(f"{f} {t} {n}" for (f, t), n in sorted(self._outcomes.items()))
        errors = f"; errors: {'; '.join(map(str, self._errors[:3]))}" if self._errors else ""
        client = f"; latest client errors: {'; '.join(list(self._client_errors)[-3:])}" if self._client_errors else ""
        return f"{self.process}: {counts or 'nothing recorded'}, {len(self._pending)} pending{errors}{client}"

    def __repr__(self) -> str:
        with self._changed:
            return f"<{type(self).__name__} {self._describe()}>"

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> Self:
        """Create the client (a bad configuration raises WorkloadError here) and start working."""
        if self._started:
            raise WorkloadError(f"{self.process}: already started")
        self._started = True
        self._launch()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop working: give pending operations up to ``timeout`` seconds, then complete the rest as ``info``.

        Returns within ``timeout`` + :data:`GRACE_S` seconds, never later: a client that does not
        close by then is abandoned to its daemon thread, and that is added to ``errors``.
        """
        self._halt(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _launch(self) -> None:
        client = self._prepare()
        stopping = threading.Event()
        self._stopping = stopping
        thread = threading.Thread(
            target=self._main, args=(client, stopping), name=f"workload-{self.process}", daemon=True
        )
        self._thread = thread
        thread.start()

    def _halt(self, timeout: float) -> None:
        thread = self._thread
        if thread is None:
            return
        self._before_halt(max(0.0, timeout))
        self._stopping.set()
        thread.join(max(0.0, timeout) + GRACE_S)
        if thread.is_alive():
            with self._changed:
                self._abandoned.add(thread)
            self._error(WorkloadError(f"{self.process}: its client did not stop within {timeout + GRACE_S:.1f} s"))
        self._abandon("the workload stopped with the operation pending")

    def _main(self, client: ClientT, stopping: threading.Event) -> None:
        try:
            self._run(client, stopping)
        except BaseException as exc:  # recorded, never silent; the client is still shut down below
            self._error(exc)
        try:
            self._shutdown(client)
        except BaseException as exc:
            self._error(exc)
        with self._changed:
            self._changed.notify_all()

    # -- what subclasses provide --------------------------------------------------------------------

    def _prepare(self) -> ClientT:
        raise NotImplementedError

    def _run(self, client: ClientT, stopping: threading.Event) -> None:
        raise NotImplementedError

    def _shutdown(self, client: ClientT) -> None:
        raise NotImplementedError

    def _before_halt(self, timeout: float) -> None:
        """Called by ``stop`` before it sets the stop event (``timeout``: the time ``stop`` allows)."""

    # -- draining a consumer group to given ends -----------------------------------------------------

    def _drain_until(self, f: str, group: str, ends: Mapping[TP, int], timeout: float) -> bool:
        """Wait until the worker thread finds ``group``'s committed offsets at ``ends``; record ``f``.

        The worker thread follows ``self._drain`` with :meth:`_look_up_drain`. Records ``f`` ``ok``
        with ``group`` and ``ends`` and returns True once every partition's committed offset is at
        least its end (an end of 0 is reached at once); else ``fail`` naming the partitions behind,
        after ``timeout`` seconds or when the workload ends first, and returns False.
        """
        deadline = time.monotonic() + timeout
        request = Drain({(topic, partition): int(end) for (topic, partition), end in ends.items()}, deadline)
        recorded_ends = {partition_key(*tp): end for tp, end in sorted(request.ends.items())}
        with self._changed:
            self._drain = request
        try:
            while not request.reached.wait(min(0.5, max(0.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline or not self.running:
                    break
        finally:
            with self._changed:
                self._drain = None
        if request.reached.is_set():
            self._record("ok", f, group=group, ends=recorded_ends)
            return True
        with self._changed:
            why = f"timed out after {timeout} s" if self.running else "the consumer stopped"
            behind = "; ".join(request.behind()) or "unknown"
            error = f"{why}; behind: {behind}" + (f"; last error: {request.last_error}" if request.last_error else "")
        self._record("fail", f, group=group, ends=recorded_ends, error=error)
        return False

    def _look_up_drain(self, consumer: ck.Consumer, drain: Drain) -> None:
        """On the worker thread: the group's committed offsets of ``drain``'s partitions; whether they reach it."""
        try:
            lookup_s = min(_LOOKUP_S, max(0.1, drain.deadline - time.monotonic()))
            found = consumer.committed([TopicPartition(t, p) for t, p in sorted(drain.ends)], timeout=lookup_s)
        except KafkaException as exc:
            with self._changed:
                drain.last_error = str(exc)
            return
        with self._changed:
            for tp in found:
                if tp.error is None and tp.offset != OFFSET_INVALID:
                    drain.committed[(tp.topic, tp.partition)] = tp.offset
            if not drain.behind():
                drain.reached.set()

    # -- recording ----------------------------------------------------------------------------------

    def _invoke(self, key: Hashable, f: str, **fields: Any) -> Op:
        """Record the invoke of an operation and keep it pending under ``key``."""
        with self._changed:
            if threading.current_thread() in self._abandoned:
                raise WorkloadError(f"{self.process}: an abandoned client tried to record {f}")
            if key in self._pending:
                raise WorkloadError(f"{self.process}: operation {key!r} invoked twice")
            op = self.history.invoke(self.process, f, **fields)
            self._pending[key] = op
            self._outcomes[(f, "invoke")] += 1
            return op

    def _complete(self, key: Hashable, type: OpType, **fields: Any) -> Op | None:
        """Record the completion of the pending operation ``key``; None if it is no longer pending."""
        with self._changed:
            invoked = self._pending.pop(key, None)
            if invoked is None:
                return None
            op = self.history.complete(invoked, type, **fields)
            self._outcomes[(invoked["f"], type)] += 1
            self._changed.notify_all()
            return op

    def _record(self, type: OpType, f: str, **fields: Any) -> Op | None:
        """Record an entry that has no invoke (an ``assign``, a ``lag`` sample, a ``drain``).

        None (nothing recorded) from a thread ``stop`` abandoned: the history ended for it.
        """
        with self._changed:
            if threading.current_thread() in self._abandoned:
                return None
            op = self.history.append(type, self.process, f, **fields)
            self._outcomes[(f, type)] += 1
            self._changed.notify_all()
            return op

    def _abandon(self, reason: str) -> None:
        """Complete every pending operation as ``info``, with its invoke's fields and ``error``."""
        with self._changed:
            for key in list(self._pending):
                fields = {k: v for k, v in self._pending[key].items() if k not in _ENTRY_KEYS}
                self._complete(key, "info", **{**fields, "error": reason})

    def _error(self, exc: BaseException) -> None:
        _log.error("%s: %r", self.process, exc)
        with self._changed:
            if len(self._errors) < _MAX_ERRORS:
                self._errors.append(exc)
            self._changed.notify_all()

    def _on_client_error(self, error: KafkaError) -> None:
        """librdkafka's ``error_cb``: a fatal error ends the workload, others are expected under faults."""
        if error.fatal():
            self._error(WorkloadError(f"{self.process}: fatal client error: {describe(error)}"))
            self._fatal.set()
        else:
            self._client_error(describe(error))

    def _client_error(self, text: str) -> None:
        _log.info("%s: client error (expected under faults): %s", self.process, text)
        with self._changed:
            self._client_errors.append(text)

    def _wait_until(self, what: str, reached: Callable[[], bool], timeout: float) -> None:
        """Block until ``reached()`` (called with the lock held) is true.

        Raises WorkloadError, with the counters and errors, on timeout or if the workload ends first.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while not reached():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._errors or not self.running:
                    why = "errors" if self._errors else ("timed out" if remaining <= 0 else "workload not running")
                    raise WorkloadError(f"waiting for {what}: {why}; {self._describe()}")
                self._changed.wait(min(remaining, 0.5))
