"""A producer workload that records every write in a :class:`~chaos.ledger.Ledger`, and the read-back for the check.

:class:`ProducerWorkload` runs a confluent-kafka (librdkafka) producer in a background thread:
idempotent, ``acks=all``, one request in flight per broker, writing unique values
``b"<run id>-<seq>"`` to one topic at a target rate, or as fast as it can with at most
``max_in_flight`` writes unacknowledged. Each write is
recorded in the ledger as invoked when librdkafka takes it, then ok (with the partition and
offset the broker acknowledged) or fail (with librdkafka's error) from its delivery report.

Nothing the thread meets is swallowed: an exception ends the loop and lands in ``errors``, as
does a fatal librdkafka error (the idempotent producer gives up, for example on an out-of-order
sequence); :meth:`ProducerWorkload.wait_for_acks` raises with them. Other librdkafka errors
(a broker down, a connection refused) are what chaos is made of: they are logged, and the
writes they hit retry until ``delivery.timeout.ms``.

:meth:`ProducerWorkload.stop` gives in-flight writes a bounded time to be acknowledged, then
purges the rest; purged writes are recorded as failed with ``_PURGE_QUEUE`` (never sent) or
``_PURGE_INFLIGHT`` (sent, outcome unknown: the checker allows such a value to appear once).

:func:`read_back` reads every partition of a topic from the beginning up to the high watermark
it saw when it started, for :func:`chaos.ledger.check`.

Typical use::

    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(bootstrap, "t", ledger) as workload:
            workload.wait_for_acks(200, timeout=30)
            ...  # inject the fault, heal it
            workload.wait_for_acks(workload.acked + 200, timeout=60)
        result = check(ledger, read_back(bootstrap, "t", timeout=60))
        assert result.ok, result.summary()
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from types import TracebackType

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from chaos.errors import WorkloadError
from chaos.ledger import Ledger, Read
from chaos.workloads._records import IDEMPOTENT_DEFAULTS

__all__ = ["ProducerWorkload", "read_back"]

_log = logging.getLogger(__name__)

#: Seconds each producer poll may wait for delivery reports while the loop has nothing else to do.
_POLL_SECONDS = 0.05
#: Errors a high-watermark query is asked again after: librdkafka does not mark them retriable there.
_RETRY_WATERMARK = frozenset(
    {
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)
#: Most entries kept in ``errors`` (the first ones: later ones are usually consequences).
_MAX_ERRORS = 100
#: Most entries kept in ``client_errors`` (the latest ones).
_MAX_CLIENT_ERRORS = 20

_DEFAULT_CONFIG: Mapping[str, str | int | float | bool] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "delivery.timeout.ms": 120_000,
    "request.timeout.ms": 10_000,
    # A paused (SIGSTOPped) broker holds requests until this socket timeout (librdkafka's default
    # is 60 s), and the idempotent producer waits for them before it writes to the new leader.
    "socket.timeout.ms": 10_000,
    "message.timeout.ms": 120_000,
    **IDEMPOTENT_DEFAULTS,  # librdkafka#4953: see chaos.workloads._records
}


class ProducerWorkload:
    """Writes unique values to ``topic`` from a background thread, recording each in ``ledger``.

    ``rate`` is writes per second (None: as fast as ``max_in_flight`` allows). ``config`` entries
    override the librdkafka producer configuration (``bootstrap.servers`` and the idempotent
    ``acks=all`` defaults above). The counters are safe to read from any thread.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        ledger: Ledger,
        *,
        rate: float | None = None,
        max_in_flight: int = 1000,
        run_id: str | None = None,
        config: Mapping[str, str | int | float | bool] | None = None,
    ) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be positive (writes per second) or None, got {rate}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.topic = topic
        self.ledger = ledger
        self.rate = rate
        self.max_in_flight = max_in_flight
        self.run_id = run_id if run_id is not None else uuid.uuid4().hex[:12]
        self._config: dict[str, str | int | float | bool] = {
            **_DEFAULT_CONFIG,
            "bootstrap.servers": bootstrap,
            "error_cb": self._on_client_error,  # type: ignore[dict-item]  # librdkafka takes callables here
            **(config or {}),
        }
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._drain_seconds = 0.0
        self._thread: threading.Thread | None = None
        self._produced = 0
        self._acked = 0
        self._failed = 0
        #: What went wrong in the workload itself (not in the cluster): exceptions, fatal client errors.
        self.errors: list[str] = []
        #: The latest non-fatal librdkafka errors (brokers down, connections refused): expected under chaos.
        self.client_errors: deque[str] = deque(maxlen=_MAX_CLIENT_ERRORS)

    # -- counters --------------------------------------------------------------------------------

    @property
    def produced(self) -> int:
        """Writes handed to librdkafka (each recorded as invoked)."""
        with self._changed:
            return self._produced

    @property
    def acked(self) -> int:
        with self._changed:
            return self._acked

    @property
    def failed(self) -> int:
        with self._changed:
            return self._failed

    @property
    def in_flight(self) -> int:
        with self._changed:
            return self._produced - self._acked - self._failed

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ProducerWorkload:
        """Create the producer (a bad config raises WorkloadError here) and start writing."""
        if self._thread is not None:
            raise WorkloadError(f"workload {self.run_id} was already started")
        try:
            producer = Producer(self._config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise WorkloadError(f"workload {self.run_id}: cannot create the producer: {exc}") from exc
        self._thread = threading.Thread(
            target=self._main, args=(producer,), name=f"workload-{self.run_id}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop writing; wait up to ``timeout`` seconds for in-flight writes, then purge what is left.

        Returns when the thread has ended (at most a few seconds past ``timeout``). Raises
        WorkloadError if it does not end.
        """
        if self._thread is None:
            return
        self._drain_seconds = max(0.0, timeout)
        self._stopping.set()
        self._thread.join(timeout + 10.0)
        if self._thread.is_alive():
            raise WorkloadError(f"workload {self.run_id} did not stop within {timeout + 10.0} s")

    def __enter__(self) -> ProducerWorkload:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def wait_for_acks(self, n: int, timeout: float) -> None:
        """Block until at least ``n`` writes of this workload are acknowledged.

        Raises WorkloadError, with the counters and errors, on timeout or if the workload ended first.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._acked < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.errors or not self.running:
                    why = "errors" if self.errors else ("timed out" if remaining <= 0 else "workload not running")
                    raise WorkloadError(f"waiting for {n} acknowledged writes: {why}; {self._describe()}")
                self._changed.wait(min(remaining, 0.5))

    def _describe(self) -> str:
        errors = f"; errors: {'; '.join(self.errors[:5])}" if self.errors else ""
        client = f"; latest client errors: {'; '.join(list(self.client_errors)[-3:])}" if self.client_errors else ""
        return (
            f"workload {self.run_id} on {self.topic!r}: {self._produced} produced, {self._acked} acked, "
            f"{self._failed} failed, {self._produced - self._acked - self._failed} in flight{errors}{client}"
        )

    def __repr__(self) -> str:
        with self._changed:
            return f"<ProducerWorkload {self._describe()}>"

    # -- the thread ------------------------------------------------------------------------------

    def _error(self, message: str) -> None:
        _log.error("workload %s: %s", self.run_id, message)
        with self._changed:
            if len(self.errors) < _MAX_ERRORS:
                self.errors.append(message)
            self._changed.notify_all()

    def _main(self, producer: Producer) -> None:
        try:
            self._produce(producer)
        except BaseException as exc:  # recorded, never silent; the thread ends after draining
            self._error(f"producer loop failed: {exc!r}")
        try:
            self._drain(producer)
        except BaseException as exc:
            self._error(f"stopping the producer failed: {exc!r}")
        with self._changed:
            self._changed.notify_all()

    def _produce(self, producer: Producer) -> None:
        seq = 0
        interval = None if self.rate is None else 1.0 / self.rate
        next_write = time.monotonic()
        while not self._stopping.is_set() and not self.errors:
            if interval is not None:
                wait = next_write - time.monotonic()
                if wait > 0:
                    producer.poll(min(wait, _POLL_SECONDS))
                    continue
            if self.in_flight >= self.max_in_flight:
                producer.poll(_POLL_SECONDS)
                continue
            value = f"{self.run_id}-{seq}".encode()
            try:
                producer.produce(self.topic, value=value, on_delivery=self._on_delivery)
            except BufferError:  # librdkafka's queue is full: serve reports, then try the same value again
                producer.poll(_POLL_SECONDS)
                continue
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is not None and error.fatal():
                    self._error(f"fatal producer error: {error.name()}: {error.str()}")
                    return
                self.ledger.invoke(value)
                self.ledger.fail(value, str(exc))
                with self._changed:
                    self._produced += 1
                    self._failed += 1
                seq += 1
                continue
            # Delivery reports run only inside poll/flush on this thread, so invoke comes first.
            self.ledger.invoke(value)
            with self._changed:
                self._produced += 1
            seq += 1
            if interval is not None:
                next_write = max(next_write + interval, time.monotonic() - 1.0)  # no burst after a stall
            producer.poll(0)

    def _drain(self, producer: Producer) -> None:
        left = producer.flush(self._drain_seconds)
        if left:
            _log.warning(
                "workload %s: %d writes unacknowledged after %.1f s: purging", self.run_id, left, self._drain_seconds
            )
            producer.purge(in_queue=True, in_flight=True)
            producer.flush(5.0)  # serves the purge reports
        producer.close()

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        value = message.value() or b""
        if error is not None:
            self.ledger.fail(value, f"{error.name()}: {error.str()}")
            with self._changed:
                self._failed += 1
                self._changed.notify_all()
            return
        partition, offset = message.partition(), message.offset()
        if partition is None or offset is None or offset < 0:
            self._error(f"delivery report without an offset for {value!r}: partition {partition}, offset {offset}")
            return
        self.ledger.ack(message.topic() or self.topic, partition, offset, value)
        with self._changed:
            self._acked += 1
            self._changed.notify_all()

    def _on_client_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._error(f"fatal client error: {error.name()}: {error.str()}")
        else:
            _log.info("workload %s: client error (retrying): %s: %s", self.run_id, error.name(), error.str())
            with self._changed:
                self.client_errors.append(f"{error.name()}: {error.str()}")


def _high_watermark(consumer: Consumer, tp: TopicPartition, deadline: float) -> int:
    """The partition's high watermark, asked again after a retriable error (a leader just elected
    answers OFFSET_NOT_AVAILABLE until it knows how far the old one had committed) until ``deadline``."""
    while True:
        try:
            _, high = consumer.get_watermark_offsets(tp, timeout=max(0.1, deadline - time.monotonic()))
            return int(high)
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if not (error.retriable() or error.code() in _RETRY_WATERMARK) or time.monotonic() >= deadline:
                raise WorkloadError(f"read back {tp.topic}[{tp.partition}]: its high watermark: {error}") from e
            _log.info("read back %s[%d]: high watermark: %s; asking again", tp.topic, tp.partition, error)
            time.sleep(0.1)


def read_back(
    bootstrap: str,
    topic: str,
    *,
    timeout: float = 60.0,
    config: Mapping[str, str | int | float | bool] | None = None,
) -> list[Read]:
    """Every record of ``topic``, each partition from its start up to the high watermark seen at the start.

    Uses a consumer with ``assign`` (no group join, no commits). Raises WorkloadError naming the
    partitions and positions it could not finish within ``timeout`` seconds, or if the topic has
    no metadata.
    """
    deadline = time.monotonic() + timeout

    def remaining() -> float:
        return max(0.1, deadline - time.monotonic())

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-read-back-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            **(config or {}),
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=remaining())
        described = metadata.topics.get(topic)
        if described is None or described.error is not None or not described.partitions:
            why = "no metadata" if described is None else (described.error or "no partitions")
            raise WorkloadError(f"read back {topic!r} from {bootstrap}: {why}")
        ends = {p: _high_watermark(consumer, TopicPartition(topic, p), deadline) for p in sorted(described.partitions)}
        positions = dict.fromkeys(ends, 0)
        unfinished = {p for p, high in ends.items() if high > 0}
        out: list[Read] = []
        last_error: KafkaError | None = None
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(unfinished)])
        while unfinished:
            if time.monotonic() >= deadline:
                behind = ", ".join(f"[{p}] at {positions[p]} of {ends[p]}" for p in sorted(unfinished))
                raise WorkloadError(
                    f"read back {topic!r} from {bootstrap}: not at the end after {timeout} s: {behind}"
                    + (f"; last error: {last_error}" if last_error else "")
                )
            message = consumer.poll(min(0.5, remaining()))
            if message is None:
                continue
            error = message.error()
            partition, offset = message.partition(), message.offset()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                last_error = error
                continue
            if partition is None or offset is None:
                continue
            if error is None:
                if offset < ends[partition]:
                    out.append(Read(topic, partition, offset, message.value() or b""))
                positions[partition] = max(positions[partition], offset + 1)
            else:  # end of partition: its position is the offset reported
                positions[partition] = max(positions[partition], offset)
            if positions[partition] >= ends[partition]:
                unfinished.discard(partition)
        return out
    finally:
        consumer.close()
