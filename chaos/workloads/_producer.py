"""The producer workloads: unique values written through librdkafka, each send recorded with its outcome.

:class:`Producer` writes ``"<run id>-<process>-<seq>"`` values (keyless, so librdkafka spreads
them over the partitions) to one topic from a background thread, at a target rate or as fast as
``max_in_flight`` unacknowledged writes allow. Two workloads share it:

- the idempotent producer (``idempotent=True``, ``acks="all"``: the default): what the product
  promises never to lose, reorder or duplicate;
- the plain producer (``idempotent=False``, ``acks`` of your choice, retries on): with several
  requests in flight and retries it may duplicate and reorder, and with ``acks=1`` a leader's
  crash may lose what it acknowledged (the positive controls rely on that).

Each send is recorded as ``invoke`` just before ``produce()`` (a full local queue makes it wait
and try the same value again under the same invoke), then completed from its delivery report:
``ok`` with the partition and offset the broker acknowledged, or ``fail`` / ``info`` as
:func:`chaos.workloads._outcomes.send_outcome` decides (``fail`` only when the write is proven
absent). A write acknowledged without an offset (``acks=0``) is ``info``.

:meth:`Producer.stop` gives in-flight writes ``timeout`` seconds, then purges what is left and
serves the purge reports; :meth:`Producer.repoint` does the same at once (the old site is gone)
and continues with a new client against another bootstrap, same process and sequence. A fatal
librdkafka error (the idempotent producer giving up, for example on an out-of-order sequence)
ends the workload and lands in ``errors``.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import confluent_kafka as ck
from confluent_kafka import KafkaError, KafkaException, Message

from chaos.errors import WorkloadError
from chaos.history import History

from ._base import Workload
from ._outcomes import describe, send_outcome
from ._records import CLIENT_LOGGER, IDEMPOTENT_DEFAULTS, ConfigValue

__all__ = ["Producer"]

#: Seconds each producer poll may wait for delivery reports while the loop has nothing else to do.
_POLL_S = 0.05
#: Seconds spent serving the delivery reports of a purge.
_PURGE_REPORTS_S = 5.0
_ACKS = frozenset({"all", "-1", "0", "1"})

_DEFAULTS: Mapping[str, ConfigValue] = {
    "linger.ms": 5,
    "message.timeout.ms": 120_000,
    "request.timeout.ms": 10_000,
    # A paused (SIGSTOPped) broker holds requests until this socket timeout (librdkafka's default is
    # 60 s), and the idempotent producer waits for them before it writes to the new leader.
    "socket.timeout.ms": 10_000,
}


class Producer(Workload[ck.Producer]):
    """Writes unique values to ``topic`` from a background thread, recording each send in ``history``.

    ``rate`` is writes per second (None: as fast as ``max_in_flight`` allows); ``config`` entries
    override the librdkafka configuration. Counters (``invoked``, ``acked``, ``failed``,
    ``indeterminate``, ``in_flight``) are safe to read from any thread.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        history: History,
        process: str = "producer-0",
        *,
        idempotent: bool = True,
        acks: str | int = "all",
        rate: float | None = None,
        config: Mapping[str, ConfigValue] | None = None,
        max_in_flight: int = 1000,
        run_id: str | None = None,
    ) -> None:
        super().__init__(history, process)
        acks = str(acks)
        if acks not in _ACKS:
            raise ValueError(f"acks must be one of {sorted(_ACKS)}, got {acks!r}")
        if idempotent and acks not in ("all", "-1"):
            raise ValueError(f"the idempotent producer needs acks=all, got acks={acks}")
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be positive (writes per second) or None, got {rate}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.bootstrap = bootstrap
        self.topic = topic
        self.idempotent = idempotent
        self.acks = acks
        self.rate = rate
        self.max_in_flight = max_in_flight
        self.run_id = run_id if run_id is not None else uuid.uuid4().hex[:8]
        self._overrides = dict(config or {})
        self._seq = 0  # the next value's sequence number: only the worker thread moves it
        self._drain_s = 0.0

    # -- counters -----------------------------------------------------------------------------------

    @property
    def invoked(self) -> int:
        """Writes recorded as invoked."""
        return self.count("send", "invoke")

    @property
    def acked(self) -> int:
        return self.count("send", "ok")

    @property
    def failed(self) -> int:
        return self.count("send", "fail")

    @property
    def indeterminate(self) -> int:
        return self.count("send", "info")

    @property
    def in_flight(self) -> int:
        return self.pending

    def value(self, seq: int) -> str:
        """The value of this workload's write number ``seq``."""
        return f"{self.run_id}-{self.process}-{seq}"

    def wait_for_acks(self, n: int, timeout: float) -> None:
        """Block until at least ``n`` writes are acknowledged.

        Raises WorkloadError, with the counters and errors, on timeout or if the workload ended first.
        """
        self._wait_until(f"{n} acknowledged writes", lambda: self._outcomes[("send", "ok")] >= n, timeout)

    # -- lifecycle ----------------------------------------------------------------------------------

    def repoint(self, bootstrap: str, *, timeout: float = 0.0) -> int:
        """Continue against ``bootstrap`` (after a failover): same process name, next sequence numbers.

        The current client gets ``timeout`` seconds for its in-flight writes (none by default: the
        old site is gone), then is purged and closed, its pending writes completing as ``info`` (or
        ``fail`` when proven absent) before the new client writes anything. Returns the sequence
        number of the new client's first write (the values before it went to the old bootstrap).
        """
        if not self._started:
            raise WorkloadError(f"{self.process}: repoint before start")
        self._halt(timeout)
        self.bootstrap = bootstrap
        self._fatal.clear()
        first = self._seq
        self._launch()
        return first

    def _before_halt(self, timeout: float) -> None:
        self._drain_s = timeout

    def _prepare(self) -> ck.Producer:
        config: dict[str, Any] = {
            **_DEFAULTS,
            **(IDEMPOTENT_DEFAULTS if self.idempotent else {}),
            "enable.idempotence": self.idempotent,
            "acks": self.acks,
            "bootstrap.servers": self.bootstrap,
            "error_cb": self._on_client_error,
            "logger": CLIENT_LOGGER,
            **self._overrides,
        }
        try:
            return ck.Producer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise WorkloadError(f"{self.process}: cannot create the producer: {exc}") from exc

    # -- the thread ---------------------------------------------------------------------------------

    def _run(self, client: ck.Producer, stopping: threading.Event) -> None:
        interval = None if self.rate is None else 1.0 / self.rate
        next_write = time.monotonic()
        while not stopping.is_set() and not self._fatal.is_set():
            if interval is not None:
                wait = next_write - time.monotonic()
                if wait > 0:
                    client.poll(min(wait, _POLL_S))
                    continue
            if self.in_flight >= self.max_in_flight:
                client.poll(_POLL_S)
                continue
            value = self.value(self._seq)
            self._seq += 1
            self._invoke(value, "send", topic=self.topic, value=value)
            self._send(client, value, stopping)
            if interval is not None:
                next_write = max(next_write + interval, time.monotonic() - 1.0)  # no burst after a stall
            client.poll(0)

    def _send(self, client: ck.Producer, value: str, stopping: threading.Event) -> None:
        """Hand ``value`` to librdkafka, waiting while its queue is full; a refusal completes it as ``fail``."""
        on_delivery = functools.partial(self._on_delivery, value)
        while True:
            try:
                client.produce(self.topic, value=value.encode(), on_delivery=on_delivery)
                return
            except BufferError:
                if stopping.is_set():
                    self._complete(value, "fail", topic=self.topic, value=value, error="never taken: queue full")
                    return
                client.poll(_POLL_S)
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                text = describe(error) if error is not None else str(exc)
                self._complete(value, "fail", topic=self.topic, value=value, error=f"never taken: {text}")
                if error is not None and error.fatal():
                    raise WorkloadError(f"{self.process}: fatal producer error: {text}") from exc
                return

    def _shutdown(self, client: ck.Producer) -> None:
        if client.flush(0.0 if self._fatal.is_set() else self._drain_s):
            client.purge(in_queue=True, in_flight=True)
            client.flush(_PURGE_REPORTS_S)
        client.close()

    def _on_delivery(self, value: str, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            outcome = send_outcome(error, message.partition())
            self._complete(value, outcome, topic=self.topic, value=value, error=describe(error))
            return
        partition, offset = message.partition(), message.offset()
        if partition is None or offset is None or offset < 0:
            error_text = f"acknowledged without an offset (acks={self.acks}): partition {partition}, offset {offset}"
            self._complete(value, "info", topic=self.topic, value=value, error=error_text)
            return
        self._complete(
            value, "ok", topic=message.topic() or self.topic, partition=partition, offset=offset, value=value
        )

    def __repr__(self) -> str:
        with self._changed:
            return f"<Producer {self.topic!r} at {self.bootstrap} {self._describe()}>"
