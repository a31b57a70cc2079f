"""The mirror reader: how far the target site lags the source, and what the target holds, sampled as it goes.

Every ``interval`` seconds :class:`MirrorReader`

1. records a ``lag`` info sample for the target ``site``: per partition of the source topic, the
   source's high watermark minus the target's (the target is asked first, so a sample never
   shows a lag smaller than the real one), ``value`` = {"records": total, "partitions":
   {"<topic>/<p>": n}}. A partition the target does not have yet counts from 0. When either site
   does not answer, nothing is recorded for that sample and ``unreachable`` counts it;
2. reads the records mirrored since the previous sample, up to the target's high watermark it
   just saw, and records them as one ``read`` invoke and ``ok`` (``site``, ``role`` "mirror",
   ``final`` false, ``ends`` = {"<topic>/<p>": [first offset asked, next offset]} of the
   partitions it read, ``records``). A sample with nothing new reads nothing and records no read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from chaos.errors import WorkloadError
from chaos.history import History

from ._base import Workload
from ._outcomes import describe
from ._records import ConfigValue, Record, partition_key, reader_config, record_of

__all__ = ["MirrorReader"]

#: Most records one consume call returns.
_BATCH = 1000


class _Unreachable(Exception):
    """A site did not answer a metadata or watermark request."""


@dataclass
class _Clients:
    source: Consumer  # metadata and watermarks only
    target: Consumer  # watermarks, and the reads (by assign)


class MirrorReader(Workload[_Clients]):
    """Samples the lag of ``topic`` from source to target and reads what the target holds, recording both.

    Counters (``samples``, ``unreachable``, ``records`` and :meth:`count`) are safe to read from
    any thread.
    """

    def __init__(
        self,
        source_bootstrap: str,
        target_bootstrap: str,
        topic: str,
        history: History,
        process: str = "mirror-reader",
        site: str = "west",
        interval: float = 1.0,
        *,
        request_timeout: float = 5.0,
        config: Mapping[str, ConfigValue] | None = None,
    ) -> None:
        super().__init__(history, process)
        if interval <= 0 or request_timeout <= 0:
            raise ValueError(f"interval and request_timeout must be positive, got {interval}, {request_timeout}")
        self.source_bootstrap = source_bootstrap
        self.target_bootstrap = target_bootstrap
        self.topic = topic
        self.site = site
        self.interval = interval
        self.request_timeout = request_timeout
        self._overrides = dict(config or {})
        self._positions: dict[int, int] = {}  # next offset to read per target partition (worker thread only)
        self._unreachable = 0
        self._records = 0

    @property
    def samples(self) -> int:
        """Lag samples recorded."""
        return self.count("lag", "info")

    @property
    def unreachable(self) -> int:
        """Samples skipped because a site did not answer."""
        with self._changed:
            return self._unreachable

    @property
    def records(self) -> int:
        """Records read on the target."""
        with self._changed:
            return self._records

    def wait_for_samples(self, n: int, timeout: float) -> None:
        """Block until ``n`` lag samples are recorded; WorkloadError on timeout."""
        self._wait_until(f"{n} lag samples", lambda: self._outcomes[("lag", "info")] >= n, timeout)

    # -- the thread ---------------------------------------------------------------------------------

    def _prepare(self) -> _Clients:
        source = self._consumer(self.source_bootstrap)
        try:
            return _Clients(source, self._consumer(self.target_bootstrap))
        except WorkloadError:
            source.close()
            raise

    def _consumer(self, bootstrap: str) -> Consumer:
        try:
            return Consumer(reader_config(bootstrap, {"error_cb": self._on_client_error, **self._overrides}))
        except (KafkaException, ValueError, TypeError) as exc:
            raise WorkloadError(f"{self.process}: cannot create a consumer for {bootstrap}: {exc}") from exc

    def _run(self, client: _Clients, stopping: threading.Event) -> None:
        next_sample = time.monotonic()
        while not stopping.wait(max(0.0, next_sample - time.monotonic())) and not self._fatal.is_set():
            next_sample = max(next_sample + self.interval, time.monotonic())
            try:
                target_ends = self._sample(client)
            except _Unreachable as exc:
                self._client_error(str(exc))
                with self._changed:
                    self._unreachable += 1
                continue
            self._read_new(client.target, target_ends, stopping)

    def _shutdown(self, client: _Clients) -> None:
        try:
            client.target.close()
        finally:
            client.source.close()

    def _sample(self, client: _Clients) -> dict[int, int]:
        """Record one lag sample and return the target's high watermarks; _Unreachable if a site is silent."""
        partitions = self._partitions(client.source)
        if not partitions:
            return {}
        target = {p: self._high(client.target, p, missing_is_zero=True) for p in partitions}
        source = {p: self._high(client.source, p, missing_is_zero=False) for p in partitions}
        lags = {partition_key(self.topic, p): source[p] - target[p] for p in partitions}
        self._record("info", "lag", site=self.site, value={"records": sum(lags.values()), "partitions": lags})
        return target

    def _partitions(self, consumer: Consumer) -> list[int]:
        """The source topic's partitions ([] while it does not exist yet)."""
        try:
            described = consumer.list_topics(self.topic, timeout=self.request_timeout).topics.get(self.topic)
        except KafkaException as exc:
            raise _Unreachable(f"source {self.source_bootstrap}: {exc}") from exc
        if described is None or described.error is not None:
            return []
        return sorted(described.partitions)

    def _high(self, consumer: Consumer, partition: int, *, missing_is_zero: bool) -> int:
        where = self.target_bootstrap if missing_is_zero else self.source_bootstrap
        try:
            found = consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=self.request_timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if missing_is_zero and error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return 0
            raise _Unreachable(f"{where}: watermarks of {partition_key(self.topic, partition)}: {exc}") from exc
        if found is None:
            raise _Unreachable(f"{where}: watermarks of {partition_key(self.topic, partition)} timed out")
        return int(found[1])

    def _read_new(self, consumer: Consumer, ends: Mapping[int, int], stopping: threading.Event) -> None:
        """Read each target partition from where the last read ended up to ``ends``; record it as one read."""
        wanted = {p: end for p, end in ends.items() if end > self._positions.get(p, 0)}
        if not wanted:
            return
        fresh = [p for p in wanted if p not in self._positions]
        if fresh:
            consumer.incremental_assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in sorted(fresh)])
            for p in fresh:
                self._positions[p] = 0
        started = {p: self._positions[p] for p in wanted}
        key = ("read", time.monotonic_ns())
        self._invoke(key, "read", site=self.site, topic=self.topic, role="mirror")
        records: list[Record] = []
        deadline = time.monotonic() + max(self.interval, 1.0)
        while any(self._positions[p] < end for p, end in wanted.items()) and not stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for message in consumer.consume(_BATCH, min(0.2, remaining)):
                error, partition, offset = message.error(), message.partition(), message.offset()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        self._client_error(describe(error))
                    continue
                if partition is None or offset is None:
                    continue
                records.append(record_of(message))
                self._positions[partition] = offset + 1
        read_ends = {partition_key(self.topic, p): [first, self._positions[p]] for p, first in sorted(started.items())}
        self._complete(
            key, "ok", site=self.site, topic=self.topic, role="mirror", final=False, ends=read_ends, records=records
        )
        with self._changed:
            self._records += len(records)
