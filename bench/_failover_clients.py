"""The failover benchmark's two clients: the RTO probe, and the load on the primary.

:class:`RtoProbe` measures when a site takes writes again. It is made (connected, metadata
known) before the command starts; :meth:`RtoProbe.start` is called with the command's start
time, and from then on a thread keeps **one small record in flight per partition** (acks=all,
no retries, no idempotence: each refusal comes back at once and the record is sent again
``RETRY_S`` later) until every partition has accepted one. The RTO is the time from the
command's start to the *last* partition's first acceptance: the moment every promoted
partition takes writes. A partition's probe runs concurrently with the command, so a
partition that takes writes before the command has returned (its last steps only record the
state) counts from then; the command's own duration is reported beside it.

:class:`Load` is the clients that keep writing to the primary while the failovers happen
(so that the mirror's lag at the fault is what a live site has, not 0): ``chaos.workload``'s
idempotent acks=all :class:`~chaos.workload.ProducerWorkload` at a fixed rate, moved to the
new primary once it takes writes (:meth:`Load.move_to`). The old one is stopped then, as a
client re-pointed by its operator; until that moment it writes to the old primary, and its
refusals (fenced) or timeouts (site lost) are counted.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from chaos.ledger import Ledger
from chaos.workload import ProducerWorkload

from ._procs import BenchError

CLIENT_ID = "strait-failover-bench"
PROBE_VALUE = b"rto-probe"
RETRY_S = 0.02  # a refused partition is probed again this long after the refusal
POLL_S = 0.005  # the probe thread serves delivery reports at least this often
PROBE_SETTINGS: dict[str, Any] = {
    "client.id": f"{CLIENT_ID}-probe",
    "acks": "all",
    "enable.idempotence": False,  # an idempotent producer retries; the probe sees every refusal
    "retries": 0,
    "linger.ms": 0,
    "message.timeout.ms": 2000,  # a probe stuck on a partition without a leader gives up and is sent again
    "request.timeout.ms": 2000,
}
LOAD_STOP_S = 1.0  # a moved load gives its in-flight writes this long, then purges them


@dataclass(frozen=True)
class Probed:
    """What a probe measured, in seconds from the command's start."""

    rto_s: float  # the last partition's first accepted record
    first_s: float  # the first partition's
    partitions: dict[int, float]  # partition -> its first accepted record
    sent: int  # probe records sent
    refusals: dict[str, int]  # why the others were not accepted: error name -> count


class RtoProbe:
    """One record per partition of ``topic`` at ``bootstrap``, sent again until each is accepted.

    Raises:
        BenchError: the topic has no metadata there within ``timeout`` (from the constructor).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
        self.topic = topic
        self.partitions = partitions
        self._producer = Producer({**PROBE_SETTINGS, "bootstrap.servers": bootstrap})
        try:
            found = self._producer.list_topics(topic, timeout=timeout).topics.get(topic)
        except KafkaException as exc:
            self._producer.close()
            raise BenchError(f"the RTO probe has no metadata for {topic!r} at {bootstrap}: {exc}") from exc
        if found is None or found.error is not None or len(found.partitions) != partitions:
            self._producer.close()
            raise BenchError(f"the RTO probe found {topic!r} at {bootstrap} as {found}, not {partitions} partitions")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self._accepted: dict[int, float] = {}
        self._refusals: Counter[str] = Counter()
        self._sent = 0
        self._failure: BaseException | None = None
        self._closed = False

    def start(self, started: float) -> None:
        """Probe from now on; ``started`` (time.monotonic()) is the command's start."""
        self._started = started
        self._thread = threading.Thread(target=self._main, name="rto-probe", daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> Probed:
        """Wait until every partition accepted a record; then the figures.

        Raises:
            BenchError: not within ``timeout`` (naming the partitions still refusing and why).
        """
        assert self._thread is not None, "start() first"
        self._thread.join(timeout)
        self.cancel()
        if self._failure is not None:
            raise BenchError(f"the RTO probe failed: {self._failure!r}") from self._failure
        missing = sorted(set(range(self.partitions)) - set(self._accepted))
        if missing:
            raise BenchError(
                f"partitions {missing} of {self.topic!r} took no write within {timeout:g} s of the command's end; "
                f"refusals: {dict(self._refusals)}"
            )
        offsets = {p: t - self._started for p, t in sorted(self._accepted.items())}
        return Probed(max(offsets.values()), min(offsets.values()), offsets, self._sent, dict(self._refusals))

    def cancel(self) -> None:
        """Stop probing and close the producer (records in flight are purged). Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
        if not self._closed:
            self._closed = True
            self._producer.purge()
            self._producer.close()

    def _main(self) -> None:
        try:
            self._probe()
        except BaseException as exc:  # reported by wait()
            self._failure = exc

    def _probe(self) -> None:
        in_flight: set[int] = set()
        due = dict.fromkeys(range(self.partitions), 0.0)  # partition -> when to send its next probe

        def delivered(partition: int, error: KafkaError | None, message: Message) -> None:
            now = time.monotonic()
            in_flight.discard(partition)
            if error is None:
                self._accepted.setdefault(partition, now)
            else:
                self._refusals[error.name()] += 1
                due[partition] = now + RETRY_S

        producer = self._producer
        while len(self._accepted) < self.partitions and not self._stop.is_set():
            now = time.monotonic()
            for p in range(self.partitions):
                if p not in self._accepted and p not in in_flight and due[p] <= now:
                    producer.produce(
                        self.topic,
                        PROBE_VALUE,
                        partition=p,
                        on_delivery=functools.partial(delivered, p),
                    )
                    in_flight.add(p)
                    self._sent += 1
            producer.poll(POLL_S)


@dataclass
class LoadPeriod:
    """The load on one site, from its start until it was moved away."""

    site: str
    seconds: float
    acked: int
    failed: int
    errors: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "seconds": round(self.seconds, 3),
            "acked": self.acked,
            "failed": self.failed,
            "errors": self.errors[:5],
        }


class Load:
    """An idempotent acks=all producer at ``rate`` records/s to ``topic`` on the current primary."""

    def __init__(self, topic: str, rate: float) -> None:
        self.topic = topic
        self.rate = rate
        self.periods: list[LoadPeriod] = []
        self._current: tuple[str, ProducerWorkload, float] | None = None

    @property
    def site(self) -> str | None:
        return None if self._current is None else self._current[0]

    def move_to(self, site: str, bootstrap: str) -> None:
        """Start writing to ``site`` (at ``bootstrap``), then stop the writer on the previous site."""
        config: dict[str, str | int | float | bool] = {
            "client.id": f"{CLIENT_ID}-load-{site}",
            # Critical messages only: its "connection refused" to a lost site is the fault itself (counted as
            # failed writes), printed once per broker and retry otherwise.
            "log_level": 2,
        }
        workload = ProducerWorkload(bootstrap, self.topic, Ledger(), rate=self.rate, config=config)
        previous, self._current = self._current, (site, workload.start(), time.monotonic())
        if previous is not None:
            self._end(previous)

    def stop(self) -> None:
        if self._current is not None:
            self._end(self._current)
            self._current = None

    def _end(self, current: tuple[str, ProducerWorkload, float]) -> None:
        site, workload, started = current
        workload.stop(LOAD_STOP_S)
        seconds = time.monotonic() - started
        self.periods.append(LoadPeriod(site, seconds, workload.acked, workload.failed, list(workload.errors)))
