"""The transactional workload: a consume-transform-produce loop that must move every input record exactly once.

:class:`TransactionalLoop` is what a Kafka Streams task or any exactly-once application does with
librdkafka: a consumer in a group (``isolation.level=read_committed``, no auto-commit) reads the
input topic, and for each batch a transactional producer (``transactional.id``) begins a
transaction, writes one output record per input record, adds the batch's next offsets to the
transaction (``send_offsets_to_transaction``: the group's offsets commit with the output or not at
all) and commits it. Every ``abort_every``-th transaction is aborted on purpose, once its output
is in the log (flushed), and its batch is read again: its output must never be visible to
read_committed readers and the records it held must come out once, in a later transaction.

Each transaction is one ``txn`` operation of the history:

- invoke: ``transaction`` (its number in this process), ``group``, ``input`` and ``output`` (the
  topics), ``inputs`` (the records consumed: topic, partition, offset, value), ``offsets`` (the
  next offset of each input partition, what the transaction commits for the group) and ``abort``
  (true: it will be aborted on purpose);
- ``ok``: ``commit_transaction`` returned; ``outputs`` are the output records' positions from the
  delivery reports;
- ``fail``: certainly not committed, with ``error``: aborted (on purpose, or after an abortable
  error: ``abort_transaction`` returned), or given up before ``commit_transaction`` was called
  (only that call can commit it);
- ``info``: ``commit_transaction`` was called and did not return success (a fatal error, or
  retriable ones until :data:`STEP_S`): it may be committed or not.

The output record of input value *v* in transaction *n* of process *p* has the value
``"v|p/n"`` (:func:`output_value`), so a reader of the output topic knows the record and the
transaction of every output record, whatever became of the history.

After an abort the consumer seeks back to the batch's first offsets. After an ``info`` or a fatal
error the producer is closed and a new one is made with the same ``transactional.id``:
``init_transactions`` fences the old one and completes its last transaction (the coordinator
answers CONCURRENT_TRANSACTIONS until it has), and the consumer then seeks to the group's
committed offsets, which by then say whether the transaction committed. That is the recovery
Kafka's exactly-once applications use. A transactional call that overruns its own timeout (by
:data:`_OVERRUN_S`) counts as a fatal error: librdkafka's ``send_offsets_to_transaction`` can
block for good when the group coordinator goes down (confluentinc/librdkafka#5456, #5511, open),
so each call runs in a thread of its own and a stuck producer is left to it and replaced.

:meth:`TransactionalLoop.drain` waits until the group's committed offsets reach the ends it is
given (``txn-drain`` ``ok``, or ``fail`` with ``error``), and :func:`final_txn_read` records the
``txn-read`` that :mod:`chaos.checkers._txn` judges: the output topic read to its end
(read_committed), and the group's committed offsets.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import confluent_kafka as ck
from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, KafkaError, KafkaException, Message, TopicPartition

from chaos.errors import WorkloadError
from chaos.history import History, Op

from ._base import Workload
from ._outcomes import describe
from ._read import read_ends, read_range
from ._records import CLIENT_LOGGER, CONSUMER_DEFAULTS, ConfigValue, Record, partition_key, reader_config, record_of

__all__ = [
    "TransactionalLoop",
    "final_txn_read",
    "output_topic",
    "output_value",
    "transactional_id",
    "txn_group",
]

T = TypeVar("T")
TP = tuple[str, int]

#: Seconds one poll of the input waits for records.
_POLL_S = 0.2
#: Most input records one transaction moves.
_BATCH = 100
#: Seconds one transactional call (init, send offsets, commit, abort) may keep retrying retriable errors.
STEP_S = 30.0
#: Seconds between two checks of the group's committed offsets while draining.
_DRAIN_CHECK_S = 0.5
#: Seconds the final read waits for every transaction on the output to end (the LSO to reach the end).
_STABLE_S = 60.0

_CONSUMER: Mapping[str, ConfigValue] = {
    **CONSUMER_DEFAULTS,
    "isolation.level": "read_committed",
    "session.timeout.ms": 10_000,
    "heartbeat.interval.ms": 1_000,
}
_PRODUCER: Mapping[str, ConfigValue] = {
    "linger.ms": 5,
    "request.timeout.ms": 10_000,
    "socket.timeout.ms": 10_000,
    # A transaction left open by a killed client holds read_committed readers of the output until
    # the coordinator aborts it: keep that short (the coordinator looks every 10 s by default).
    "transaction.timeout.ms": 20_000,
    "message.timeout.ms": 20_000,
}


def output_topic(input_topic: str) -> str:
    """The output topic of the transactional workload that reads ``input_topic``.

    Named outside ``chaos-*`` so that the appliance's mirror leaves it alone: the mirror of
    transactional topics is tested with the mirror.
    """
    return f"txn-out.{input_topic}"


def transactional_id(input_topic: str) -> str:
    """The ``transactional.id`` of the transactional workload that reads ``input_topic`` (what faults aim at)."""
    return f"chaos-txn.{input_topic}"


def txn_group(input_topic: str) -> str:
    return f"chaos-txn-group.{input_topic}"


def output_value(input_value: str, transaction: str) -> str:
    """The output of ``input_value`` in ``transaction`` (``"<process>/<n>"``): ``"<input value>|<transaction>"``."""
    return f"{input_value}|{transaction}"


class _Abortable(Exception):
    """A transactional call failed with an error after which the transaction can (only) be aborted."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(describe(error))
        self.error = error


class _Broken(Exception):
    """A transactional call failed in a way that needs a new producer (fatal, or retriable for too long)."""


@dataclass
class _Clients:
    consumer: ck.Consumer
    producer: ck.Producer | None = None


class TransactionalLoop(Workload[_Clients]):
    """Moves ``input_topic`` to ``output_topic`` in transactions, recording each as a ``txn`` operation.

    Counters (``committed``, ``aborted``, ``unknown``, ``producers``) are safe to read from any thread.
    """

    def __init__(
        self,
        bootstrap: str,
        input_topic: str,
        history: History,
        process: str = "txn-0",
        *,
        output: str | None = None,
        group: str | None = None,
        transactional: str | None = None,
        abort_every: int = 5,
        batch: int = _BATCH,
        config: Mapping[str, ConfigValue] | None = None,
    ) -> None:
        super().__init__(history, process)
        if abort_every < 2:
            raise ValueError(f"abort_every must be at least 2 (all aborted would move nothing), got {abort_every}")
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        self.bootstrap = bootstrap
        self.input = input_topic
        self.output = output or output_topic(input_topic)
        self.group = group or txn_group(input_topic)
        self.transactional_id = transactional or transactional_id(input_topic)
        self.abort_every = abort_every
        self.batch = batch
        self._overrides = dict(config or {})
        self._seq = 0  # the last transaction's number: only the worker thread moves it
        self._producers = 0
        self._stuck: list[ck.Producer] = []  # producers abandoned to a call that never returned

    # -- counters -----------------------------------------------------------------------------------

    @property
    def committed(self) -> int:
        return self.count("txn", "ok")

    @property
    def aborted(self) -> int:
        return self.count("txn", "fail")

    @property
    def unknown(self) -> int:
        return self.count("txn", "info")

    @property
    def producers(self) -> int:
        """Producer instances made so far (1 + the times a broken one was replaced)."""
        with self._changed:
            return self._producers

    def wait_for_commits(self, n: int, timeout: float) -> None:
        """Block until at least ``n`` transactions committed; WorkloadError on timeout or if the workload ended."""
        self._wait_until(f"{n} committed transactions", lambda: self._outcomes[("txn", "ok")] >= n, timeout)

    # -- drain --------------------------------------------------------------------------------------

    def drain(self, ends: Mapping[tuple[str, int], int], timeout: float = 60.0) -> bool:
        """Keep moving records until the group's committed offsets reach ``ends``; record ``txn-drain``.

        True (``ok``) once every partition's committed offset is at least its end; False (``fail``
        naming the partitions behind) after ``timeout`` seconds or if the workload ends first.
        """
        return self._drain_until("txn-drain", self.group, ends, timeout)

    # -- lifecycle ----------------------------------------------------------------------------------

    def _prepare(self) -> _Clients:
        config: dict[str, Any] = {
            **_CONSUMER,
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": f"{self.process}-consumer-{uuid.uuid4().hex[:6]}",
            "error_cb": self._on_client_error,
            "logger": CLIENT_LOGGER,
        }
        try:
            consumer = ck.Consumer(config)
            consumer.subscribe([self.input])
        except (KafkaException, ValueError, TypeError) as exc:
            raise WorkloadError(f"{self.process}: cannot create the consumer: {exc}") from exc
        return _Clients(consumer)

    def _new_producer(self, stopping: threading.Event) -> ck.Producer:
        """A producer with the workload's ``transactional.id``, its transactions initialised (old instances fenced)."""
        config: dict[str, Any] = {
            **_PRODUCER,
            "bootstrap.servers": self.bootstrap,
            "transactional.id": self.transactional_id,
            "client.id": f"{self.process}-producer-{uuid.uuid4().hex[:6]}",
            "error_cb": self._on_producer_error,
            "logger": CLIENT_LOGGER,
            **self._overrides,
        }
        try:
            producer = ck.Producer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise WorkloadError(f"{self.process}: cannot create the producer: {exc}") from exc
        with self._changed:
            self._producers += 1
        try:
            self._retry(stopping, "init_transactions", producer.init_transactions)
        except (_Abortable, _Broken) as exc:
            self._give_up(producer, stuck=isinstance(exc, _Stuck))
            raise WorkloadError(f"{self.process}: init_transactions: {exc}") from None
        return producer

    def _on_producer_error(self, error: KafkaError) -> None:
        # A fatal producer error is handled by replacing the producer, not by ending the workload.
        self._client_error(describe(error))

    # -- the thread ---------------------------------------------------------------------------------

    def _run(self, client: _Clients, stopping: threading.Event) -> None:
        client.producer = self._new_producer(stopping)
        next_drain_check = time.monotonic()
        while not stopping.is_set():
            if self._fatal.is_set():
                raise WorkloadError(f"{self.process}: ended by a fatal consumer error")
            records, messages = self._poll(client.consumer)
            if messages:
                self._transact(client, records, stopping)
            with self._changed:
                drain = self._drain
            if drain is not None and time.monotonic() >= next_drain_check:
                next_drain_check = time.monotonic() + _DRAIN_CHECK_S
                self._look_up_drain(client.consumer, drain)

    def _shutdown(self, client: _Clients) -> None:
        if client.producer is not None:
            _close(client.producer)
        client.consumer.close()

    def _poll(self, consumer: ck.Consumer) -> tuple[list[Record], list[Message]]:
        records: list[Record] = []
        messages: list[Message] = []
        for message in consumer.consume(self.batch, _POLL_S):
            error = message.error()
            if error is None:
                records.append(record_of(message))
                messages.append(message)
            elif error.fatal():
                raise WorkloadError(f"{self.process}: fatal consumer error: {describe(error)}")
            elif error.code() != KafkaError._PARTITION_EOF:
                self._client_error(describe(error))
        return records, messages

    def _transact(self, clients: _Clients, records: list[Record], stopping: threading.Event) -> None:
        """Move ``records`` in one transaction and record it; afterwards the consumer is where the outcome says."""
        self._seq += 1
        number = self._seq
        name = f"{self.process}/{number}"
        abort = number % self.abort_every == 0
        nexts: dict[TP, int] = {}
        firsts: dict[TP, int] = {}
        for record in records:
            tp = (record["topic"], record["partition"])
            firsts.setdefault(tp, record["offset"])
            nexts[tp] = record["offset"] + 1
        listed = [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(nexts.items())]
        key = ("txn", number)
        about = {"transaction": number, "group": self.group, "input": self.input, "output": self.output}
        self._invoke(key, "txn", **about, inputs=records, offsets=listed, abort=abort)
        outputs: list[Record] = []
        producer = clients.producer
        assert producer is not None
        commit_called = False
        stuck = False

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is None:
                outputs.append(record_of(message))

        try:
            producer.begin_transaction()
            for record in records:
                producer.produce(self.output, value=output_value(record["value"], name).encode(), on_delivery=delivered)
            offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(nexts.items())]
            metadata = clients.consumer.consumer_group_metadata()
            self._retry(
                stopping,
                "send_offsets_to_transaction",
                lambda left: producer.send_offsets_to_transaction(offsets, metadata, left),
            )
            if abort:
                # In the log first (an abort purges what is unsent): read_committed must skip them.
                producer.flush(STEP_S)
                self._retry(stopping, "abort_transaction", producer.abort_transaction)
                self._complete(key, "fail", **about, error="aborted on purpose")
                self._seek(clients.consumer, firsts, stopping)
                return
            commit_called = True
            self._retry(stopping, "commit_transaction", producer.commit_transaction)
            producer.poll(0)  # serve the delivery reports left
            self._complete(key, "ok", **about, outputs=sorted(outputs, key=_position))
            return
        except _Abortable as exc:
            try:
                self._retry(stopping, "abort_transaction", producer.abort_transaction)
            except (_Abortable, _Broken) as abort_error:
                why = f"{exc}; then abort_transaction: {abort_error}"
                self._complete(key, "info" if commit_called else "fail", **about, error=why)
                stuck = isinstance(abort_error, _Stuck)
            else:
                self._complete(key, "fail", **about, error=f"aborted after: {exc}")
                self._seek(clients.consumer, firsts, stopping)
                return
        except (_Broken, BufferError, KafkaException) as exc:
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
            text = describe(error) if isinstance(error, KafkaError) else str(exc)
            self._complete(key, "info" if commit_called else "fail", **about, error=text)
            stuck = isinstance(exc, _Stuck)
        self._replace_producer(clients, stopping, stuck=stuck)

    def _give_up(self, producer: ck.Producer, *, stuck: bool) -> None:
        """Close ``producer``; or, when a call of it is stuck in another thread, keep it (never destroyed under it)."""
        if stuck:
            self._stuck.append(producer)
        else:
            _close(producer)

    def _replace_producer(self, clients: _Clients, stopping: threading.Event, *, stuck: bool = False) -> None:
        """A new producer (it fences the old one and completes its transaction); the consumer at the group's offsets."""
        if clients.producer is not None:
            old, clients.producer = clients.producer, None
            self._give_up(old, stuck=stuck)
        while not stopping.is_set():
            try:
                clients.producer = self._new_producer(stopping)
                break
            except WorkloadError as exc:
                self._client_error(str(exc))
        if clients.producer is not None:
            self._seek_committed(clients.consumer, stopping)

    def _retry(self, stopping: threading.Event, what: str, call: Callable[[float], T]) -> T:
        """``call(seconds left)`` again while it fails with a retriable error, for at most :data:`STEP_S`.

        Raises _Abortable for an error that requires an abort, _Broken for a fatal one or when
        retriable errors outlast the deadline (or the workload stops).
        """
        deadline = time.monotonic() + STEP_S
        while True:
            left = max(1.0, deadline - time.monotonic())
            try:
                return _bounded(what, call, left)
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is None:
                    raise _Broken(f"{what}: {exc}") from None
                if error.txn_requires_abort():
                    raise _Abortable(error) from None
                if error.fatal() or not error.retriable():
                    raise _Broken(f"{what}: {describe(error)}") from None
                self._client_error(f"{what}: {describe(error)}")
                if time.monotonic() >= deadline or stopping.is_set():
                    raise _Broken(f"{what}: still {describe(error)} after {STEP_S:g} s") from None

    def _seek(self, consumer: ck.Consumer, offsets: Mapping[TP, int], stopping: threading.Event) -> None:
        """Move the consumer back to ``offsets`` (an aborted batch's first records), or to the group's offsets."""
        try:
            for (topic, partition), offset in sorted(offsets.items()):
                consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException as exc:
            self._client_error(f"seek after an abort: {exc}")
            self._seek_committed(consumer, stopping)

    def _seek_committed(self, consumer: ck.Consumer, stopping: threading.Event) -> None:
        """Move the consumer to the group's committed offsets of its assignment (the start where none)."""
        while not stopping.is_set():
            try:
                assigned = consumer.assignment()
                found = consumer.committed(assigned, timeout=10) if assigned else []
                for tp in found:
                    if tp.error is not None:
                        raise KafkaException(tp.error)
                for tp in found:
                    offset = tp.offset if tp.offset != OFFSET_INVALID and tp.offset >= 0 else OFFSET_BEGINNING
                    consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                return
            except KafkaException as exc:
                self._client_error(f"going back to the committed offsets: {exc}")
                time.sleep(0.5)

    def __repr__(self) -> str:
        with self._changed:
            return f"<TransactionalLoop {self.input!r} -> {self.output!r} {self._describe()}>"


class _Stuck(_Broken):
    """A librdkafka call that did not return within its own timeout (and a grace): its producer is abandoned."""


#: Seconds a transactional call may overrun its own timeout before its producer is given up on.
_OVERRUN_S = 10.0


def _bounded(what: str, call: Callable[[float], T], timeout: float) -> T:
    """``call(timeout)`` in a thread of its own, given up on (_Stuck) if it overruns ``timeout`` by :data:`_OVERRUN_S`.

    librdkafka's ``send_offsets_to_transaction`` can block past its timeout, for good, when the
    group coordinator goes down (confluentinc/librdkafka#5456 and #5511, open): the thread is then
    left blocked (it holds the producer, which must not be destroyed under it) and the caller
    replaces the producer.
    """
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call(timeout)))
        except BaseException as exc:  # handed to the caller
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=f"txn-{what}", daemon=True)
    thread.start()
    thread.join(timeout + _OVERRUN_S)
    if not outcome:
        raise _Stuck(f"{what} did not return within {timeout + _OVERRUN_S:.0f} s (librdkafka#5456)")
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


def _close(producer: ck.Producer) -> None:
    """Close ``producer`` whatever its state: ``close`` aborts an open transaction first, which a
    fenced or otherwise failed producer refuses with its fatal error."""
    with contextlib.suppress(KafkaException):
        producer.purge(in_queue=True, in_flight=True)
    with contextlib.suppress(KafkaException):
        producer.close()


def _position(record: Record) -> tuple[str, int, int]:
    return (record["topic"], record["partition"], record["offset"])


def final_txn_read(
    bootstrap: str,
    input_topic: str,
    output: str,
    group: str,
    history: History,
    *,
    site: str,
    isolation: str = "read_committed",
    timeout: float = 60.0,
    process: str = "txn-read",
) -> Op:
    """Record the ``txn-read`` the exactly-once checker judges; return its ``ok`` entry.

    Waits (up to :data:`_STABLE_S`, within ``timeout``) until no transaction is open on
    ``output`` (its last stable offset equals its high watermark), then reads every partition of
    ``output`` from its start to its end with ``isolation`` and looks up ``group``'s committed
    offsets of ``input_topic``. The ``ok`` entry has ``site``, ``input``, ``output``, ``group``,
    ``isolation``, ``records``, ``ends`` ({"<topic>/<p>": [log start, end]}), ``open``
    (partitions whose last stable offset stayed below the high watermark: {"<topic>/<p>": [lso, hw]})
    and ``committed`` ({"<input>/<p>": offset}, -1 where nothing is committed). Raises WorkloadError
    (after recording a ``fail``) when the read cannot finish in time.
    """
    about = {"site": site, "input": input_topic, "output": output, "group": group, "isolation": isolation}
    invoked = history.invoke(process, "txn-read", **about)
    deadline = time.monotonic() + timeout
    consumers: list[ck.Consumer] = []
    try:
        committed_view = ck.Consumer(reader_config(bootstrap, {"isolation.level": "read_committed"}))
        consumers.append(committed_view)
        uncommitted_view = ck.Consumer(reader_config(bootstrap, {"isolation.level": "read_uncommitted"}))
        consumers.append(uncommitted_view)
        open_ = _wait_stable(committed_view, uncommitted_view, output, min(deadline, time.monotonic() + _STABLE_S))
        reader = ck.Consumer(reader_config(bootstrap, {"enable.partition.eof": True, "isolation.level": isolation}))
        consumers.append(reader)
        ends = read_ends(reader, [output], deadline)
        records = read_range(reader, ends, deadline)
        group_view = ck.Consumer({**reader_config(bootstrap), "group.id": group})
        consumers.append(group_view)
        inputs = read_ends(group_view, [input_topic], deadline)
        found = group_view.committed([TopicPartition(t, p) for t, p in sorted(inputs)], timeout=10)
        committed: dict[str, int] = {}
        for tp in found:
            if tp.error is not None:
                raise WorkloadError(f"the committed offset of {partition_key(tp.topic, tp.partition)}: {tp.error}")
            committed[partition_key(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else -1
    except (WorkloadError, KafkaException, RuntimeError, ValueError, TypeError) as exc:
        history.complete(invoked, "fail", **about, error=str(exc))
        raise WorkloadError(f"transactional read of {output} at {site} ({bootstrap}): {exc}") from exc
    finally:
        for consumer in consumers:
            consumer.close()
    recorded_ends = {partition_key(t, p): [low, high] for (t, p), (low, high) in sorted(ends.items())}
    return history.complete(
        invoked, "ok", **about, records=records, ends=recorded_ends, open=open_, committed=committed
    )


def _wait_stable(committed: ck.Consumer, uncommitted: ck.Consumer, topic: str, deadline: float) -> dict[str, list[int]]:
    """Until every partition's last stable offset equals its high watermark; what is still open at ``deadline``."""
    ends = read_ends(uncommitted, [topic], deadline)
    while True:
        open_: dict[str, list[int]] = {}
        for tp in sorted(ends):
            lso = committed.get_watermark_offsets(TopicPartition(*tp), timeout=10)[1]
            hw = uncommitted.get_watermark_offsets(TopicPartition(*tp), timeout=10)[1]
            if lso < hw:
                open_[partition_key(*tp)] = [int(lso), int(hw)]
        if not open_ or time.monotonic() >= deadline:
            return open_
        time.sleep(0.5)
