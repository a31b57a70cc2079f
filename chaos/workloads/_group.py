"""The consumer-group workload: a group member that records what it polls, its assignments and its commits.

:class:`GroupConsumer` subscribes a confluent-kafka consumer to the topics in ``group`` and, from a
background thread, records

- each poll that returns records as a ``poll`` invoke and ``ok`` with those ``records``, both
  recorded once the records are in hand (an empty poll is not an operation). Recording a poll
  *is* processing it: what the group has seen is what its ``poll`` entries hold;
- every rebalance callback (assigned, revoked, lost) as an ``assign`` info entry with the whole
  assignment after it (an empty list: nothing assigned), so that a checker knows where polls of
  a partition may legitimately go back (to the committed offset);
- each synchronous offset commit as ``commit`` invoke / ``ok`` / ``fail`` / ``info`` with the
  ``offsets`` (the next offset to read, per partition): ``fail`` only when proven not stored
  (:func:`chaos.workloads._outcomes.commit_outcome`).

``commit="after"`` (the correct consumer) commits what it has processed, every ``commit_polls``
polls or ``commit_seconds`` seconds, when its partitions are revoked, and before it closes.
``commit="before"`` is the positive control: it commits what a poll returned *before* recording
it. With ``restart_every`` seconds the consumer is closed and created again (it leaves and rejoins
the group): cleanly after a commit with ``commit="after"``; with ``commit="before"``, each restart
is a crash between the commit and the processing when the poll at hand returned records, which
are then never recorded by anyone: the skipped-read and unseen checkers must find them.

:meth:`GroupConsumer.drain` waits until the group's committed offsets reach the ends it is given
and records a ``drain`` entry (``ok``, or ``fail`` with ``error`` on timeout).

Commits are synchronous, and librdkafka gives a synchronous commit no deadline of its own (a paused
coordinator holds it for ``socket.timeout.ms``): ``stop`` during such a fault still returns in
time, abandoning the client, with the pending commit completed as ``info`` and the abandonment in
``errors``. Heal faults before stopping, as the runner does.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import confluent_kafka as ck
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from chaos.errors import WorkloadError
from chaos.history import History, OpType

from ._base import Drain, Workload
from ._outcomes import commit_outcome, describe
from ._records import CLIENT_LOGGER, CONSUMER_DEFAULTS, ConfigValue, Record, partition_key, record_of

__all__ = ["GroupConsumer"]

CommitMode = Literal["after", "before"]
TP = tuple[str, int]

#: Seconds one poll waits for records.
_POLL_S = 0.2
#: Most records one poll returns.
_POLL_RECORDS = 500
#: Seconds between two checks of the group's committed offsets while draining.
_DRAIN_CHECK_S = 0.5
_CLIENTS = ("confluent-kafka",)

_DEFAULTS: Mapping[str, ConfigValue] = {
    **CONSUMER_DEFAULTS,
    "session.timeout.ms": 10_000,
    "heartbeat.interval.ms": 1_000,
}


class GroupConsumer(Workload[ck.Consumer]):
    """A member of ``group`` consuming ``topics``, recording polls, assignments and commits in ``history``.

    Counters (``polls``, ``records``, ``restarts``, ``crashes`` and :meth:`count`) are safe to read
    from any thread.
    """

    def __init__(
        self,
        bootstrap: str,
        topics: str | Sequence[str],
        group: str,
        history: History,
        process: str = "group-0",
        *,
        commit: CommitMode = "after",
        restart_every: float | None = None,
        client: str = "confluent-kafka",
        commit_polls: int = 10,
        commit_seconds: float = 1.0,
        config: Mapping[str, ConfigValue] | None = None,
    ) -> None:
        super().__init__(history, process)
        if commit not in ("after", "before"):
            raise ValueError(f"commit must be 'after' or 'before', got {commit!r}")
        if client not in _CLIENTS:
            raise ValueError(f"client must be one of {list(_CLIENTS)}, got {client!r}")
        if restart_every is not None and restart_every <= 0:
            raise ValueError(f"restart_every must be positive (seconds) or None, got {restart_every}")
        if commit_polls < 1 or commit_seconds <= 0:
            raise ValueError(f"commit_polls must be >= 1 and commit_seconds > 0, got {commit_polls}, {commit_seconds}")
        self.bootstrap = bootstrap
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        if not self.topics:
            raise ValueError("a group consumer needs at least one topic")
        self.group = group
        self.commit = commit
        self.restart_every = restart_every
        self.client = client
        self.commit_polls = commit_polls
        self.commit_seconds = commit_seconds
        self._overrides = dict(config or {})
        # The worker thread's state (rebalance callbacks run on it, inside consume and close).
        self._consumer: ck.Consumer | None = None
        self._assigned: set[TP] = set()
        self._processed: dict[TP, int] = {}  # next offset after the last record recorded, per partition
        self._committed: dict[TP, int] = {}  # what this member last committed successfully
        self._closing = False
        self._op_seq = 0  # keys of pending operations
        self._polls_since_commit = 0
        self._last_commit = time.monotonic()
        # Shared with other threads, under the lock.
        self._records = 0
        self._restarts = 0
        self._crashes = 0

    # -- counters -----------------------------------------------------------------------------------

    @property
    def polls(self) -> int:
        """Polls recorded (those that returned records)."""
        return self.count("poll", "ok")

    @property
    def records(self) -> int:
        with self._changed:
            return self._records

    @property
    def restarts(self) -> int:
        """Times the consumer was closed and created again (crashes included)."""
        with self._changed:
            return self._restarts

    @property
    def crashes(self) -> int:
        """Restarts between a commit and the processing of what it committed (``commit="before"``)."""
        with self._changed:
            return self._crashes

    def wait_for_records(self, n: int, timeout: float) -> None:
        """Block until this member has recorded at least ``n`` records; WorkloadError on timeout."""
        self._wait_until(f"{n} polled records", lambda: self._records >= n, timeout)

    # -- drain --------------------------------------------------------------------------------------

    def drain(self, ends: Mapping[tuple[str, int], int], timeout: float = 60.0) -> bool:
        """Keep consuming until the group's committed offsets reach ``ends`` ({(topic, partition): end}).

        Records a ``drain`` ``ok`` entry with ``group`` and ``ends`` and returns True once every
        partition's committed offset is at least its end (an end of 0 is reached at once), or a
        ``drain`` ``fail`` entry naming the partitions behind and returns False after ``timeout``
        seconds or if the workload ends first. Restarts pause while draining. With
        ``commit="after"`` the committed offsets are what the group processed (this member commits
        at every check); with ``commit="before"``, what it was delivered.
        """
        return self._drain_until("drain", self.group, ends, timeout)

    # -- lifecycle ----------------------------------------------------------------------------------

    def _prepare(self) -> ck.Consumer:
        return self._new_consumer()

    def _new_consumer(self) -> ck.Consumer:
        config: dict[str, Any] = {
            **_DEFAULTS,
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": f"{self.process}-{uuid.uuid4().hex[:6]}",
            "error_cb": self._on_client_error,
            "logger": CLIENT_LOGGER,
            **self._overrides,
        }
        try:
            consumer = ck.Consumer(config)
            consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        except (KafkaException, ValueError, TypeError) as exc:
            raise WorkloadError(f"{self.process}: cannot create the consumer: {exc}") from exc
        self._consumer = consumer
        return consumer

    def _run(self, client: ck.Consumer, stopping: threading.Event) -> None:
        consumer = client
        while True:
            crashed = self._consume(consumer, stopping)
            if stopping.is_set():
                return  # _shutdown closes the last consumer
            self._close(consumer, commit_first=not crashed)
            with self._changed:
                self._restarts += 1
                self._crashes += crashed
            consumer = self._new_consumer()

    def _shutdown(self, client: ck.Consumer) -> None:
        del client  # the consumer of the latest restart is the one to close
        if self._consumer is not None:
            self._close(self._consumer, commit_first=True)
            self._consumer = None

    def _close(self, consumer: ck.Consumer, *, commit_first: bool) -> None:
        """Close ``consumer`` (leaving the group), committing what was processed first unless it crashes."""
        if commit_first and self.commit == "after":
            self._commit_processed(consumer, self._assigned)
        self._closing = True
        try:
            consumer.close()
        finally:
            self._closing = False
            if self._assigned:  # close could not run the revoke callback (no coordinator)
                self._set_assignment(set())
            self._processed.clear()
            self._committed.clear()

    # -- the thread ---------------------------------------------------------------------------------

    def _consume(self, consumer: ck.Consumer, stopping: threading.Event) -> bool:
        """Consume until ``stopping`` or a restart is due; return whether the restart is a crash."""
        restart_at = None if self.restart_every is None else time.monotonic() + self.restart_every
        next_drain_check = time.monotonic()
        while not stopping.is_set():
            if self._fatal.is_set():
                raise WorkloadError(f"{self.process}: ended by a fatal client error")
            with self._changed:
                drain = self._drain
            restart_due = drain is None and restart_at is not None and time.monotonic() >= restart_at
            if restart_due and self.commit == "after":
                return False
            records = self._poll(consumer)
            if records and self.commit == "before":
                self._commit(consumer, _next_offsets(records))
                if restart_due:
                    return True  # crash: committed, never processed
            if records:
                self._record_poll(records)
            if restart_due:
                return False  # an idle poll: nothing to skip
            if self.commit == "after" and self._commit_due():
                self._commit_processed(consumer, self._assigned)
            if drain is not None and time.monotonic() >= next_drain_check:
                next_drain_check = time.monotonic() + _DRAIN_CHECK_S
                self._check_drain(consumer, drain)
        return False

    def _poll(self, consumer: ck.Consumer) -> list[Record]:
        records = []
        for message in consumer.consume(_POLL_RECORDS, _POLL_S):
            error = message.error()
            if error is None:
                records.append(record_of(message))
            elif error.fatal():
                raise WorkloadError(f"{self.process}: fatal consumer error: {describe(error)}")
            elif error.code() != KafkaError._PARTITION_EOF:
                self._client_error(describe(error))
        return records

    def _record_poll(self, records: list[Record]) -> None:
        self._op_seq += 1
        key = ("poll", self._op_seq)
        self._invoke(key, "poll", group=self.group)
        self._complete(key, "ok", group=self.group, records=records)
        self._processed.update(_next_offsets(records))
        self._polls_since_commit += 1
        with self._changed:
            self._records += len(records)

    def _commit_due(self) -> bool:
        return self._polls_since_commit >= self.commit_polls or (
            time.monotonic() - self._last_commit >= self.commit_seconds
        )

    def _commit_processed(self, consumer: ck.Consumer, partitions: Iterable[TP]) -> None:
        """Commit what was processed of ``partitions`` since the last successful commit, if anything."""
        offsets = {
            tp: self._processed[tp]
            for tp in partitions
            if tp in self._processed and self._committed.get(tp) != self._processed[tp]
        }
        self._polls_since_commit = 0
        self._last_commit = time.monotonic()
        if offsets:
            self._commit(consumer, offsets)

    def _commit(self, consumer: ck.Consumer, offsets: Mapping[TP, int]) -> None:
        """Commit ``offsets`` synchronously, recording the invoke and its completion."""
        listed = [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())]
        self._op_seq += 1
        key = ("commit", self._op_seq)
        self._invoke(key, "commit", group=self.group, offsets=listed)
        try:
            result = consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())], asynchronous=False
            )
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None:
                self._complete(key, "info", group=self.group, offsets=listed, error=str(exc))
            else:
                self._complete(key, commit_outcome(error), group=self.group, offsets=listed, error=describe(error))
            return
        refused = [(tp, tp.error) for tp in result or [] if tp.error is not None]
        if refused:
            outcomes = {commit_outcome(error) for _, error in refused}
            text = "; ".join(f"{partition_key(tp.topic, tp.partition)}: {describe(error)}" for tp, error in refused)
            # One request: a partition refused for sure and another stored make the whole commit unsure.
            outcome: OpType = "fail" if outcomes == {"fail"} and len(refused) == len(offsets) else "info"
            self._complete(key, outcome, group=self.group, offsets=listed, error=text)
            return
        self._complete(key, "ok", group=self.group, offsets=listed)
        self._committed.update(offsets)

    def _check_drain(self, consumer: ck.Consumer, drain: Drain) -> None:
        if self.commit == "after":
            self._commit_processed(consumer, self._assigned)
        self._look_up_drain(consumer, drain)

    # -- rebalance callbacks (on the worker thread, inside consume and close) -----------------------

    def _set_assignment(self, assigned: set[TP]) -> None:
        self._assigned = assigned
        listed = [{"topic": t, "partition": p} for t, p in sorted(assigned)]
        self._record("info", "assign", group=self.group, partitions=listed)

    def _on_assign(self, consumer: ck.Consumer, partitions: list[TopicPartition]) -> None:
        self._set_assignment(self._assigned | {(tp.topic, tp.partition) for tp in partitions})

    def _on_revoke(self, consumer: ck.Consumer, partitions: list[TopicPartition]) -> None:
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        if self.commit == "after" and not self._closing:
            self._commit_processed(consumer, revoked)
        self._forget(revoked)

    def _on_lost(self, consumer: ck.Consumer, partitions: list[TopicPartition]) -> None:
        self._forget({(tp.topic, tp.partition) for tp in partitions})  # another member may own them: no commit

    def _forget(self, partitions: set[TP]) -> None:
        for tp in partitions:
            self._processed.pop(tp, None)
            self._committed.pop(tp, None)
        self._set_assignment(self._assigned - partitions)

    def __repr__(self) -> str:
        with self._changed:
            return f"<GroupConsumer {self.group!r} {self._describe()}>"


def _next_offsets(records: Iterable[Record]) -> dict[TP, int]:
    """The next offset to read after ``records``, per partition (records of a partition come in order)."""
    return {(r["topic"], r["partition"]): r["offset"] + 1 for r in records}
