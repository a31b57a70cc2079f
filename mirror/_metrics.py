"""Prometheus metrics of a mirror process, built at scrape time from each link's ``status()``.

:class:`MirrorMetrics` owns a private :class:`prometheus_client.CollectorRegistry` (never the
global one) holding one custom collector. Every scrape calls the ``statuses`` callable and turns
what the link runners report into metric families; nothing is copied or cached between scrapes.
The copiers' own counters (records and bytes copied, gaps, errors) are reported as Prometheus
counters: they only grow while the process lives and restart from 0 with it.

Metric names (all prefixed ``strait_mirror_``; ``link, topic, partition`` labels per partition)::

    strait_mirror_link_state{link,state}                        gauge    1 for the link's current state
    strait_mirror_link_syncs_total{link}                        counter  topic sync passes made
    strait_mirror_link_sync_failing{link}                       gauge    1 while the last sync pass failed
    strait_mirror_link_conflicts{link}                          gauge    target topics the link leaves alone
    strait_mirror_partition_state{link,topic,partition,state}   gauge    1 for the partition's current state
    strait_mirror_source_high_watermark{link,topic,partition}   gauge    as of the copier's last fetch
    strait_mirror_source_log_start_offset{link,topic,partition} gauge
    strait_mirror_mirrored_offset{link,topic,partition}         gauge    the target's log end offset
    strait_mirror_lag_records{link,topic,partition}             gauge    source HW - mirrored offset
    strait_mirror_lag_bytes{link,topic,partition}               gauge    an estimate (mean record size)
    strait_mirror_lag_seconds{link,topic,partition}             gauge    age of the oldest unmirrored record
    strait_mirror_records_copied_total{link,topic,partition}    counter
    strait_mirror_bytes_copied_total{link,topic,partition}      counter
    strait_mirror_gap_records_total{link,topic,partition}       counter  records lost to source retention
    strait_mirror_errors_total{link,topic,partition}            counter  copier errors (each retried)
    strait_mirror_replication_latency_seconds{link}             histogram  source timestamp -> appended on the target

A value the link does not know yet (-1 in ``status()``: no fetch made yet) is left out rather
than exported as -1, and so are the offsets and lag of a partition in state ``unassigned``
(another process of a shared link copies it; what this process last saw of it is stale).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

__all__ = ["LINK_STATES", "MirrorMetrics"]

#: The link states exported as ``strait_mirror_link_state`` (a state outside these still gets its series).
LINK_STATES = ("starting", "running", "paused", "stopped", "failed", "failed-over")

_PARTITION = ["link", "topic", "partition"]
UNASSIGNED = "unassigned"  # a partition's state while another process of a shared link owns it


class MirrorMetrics:
    """The metrics of the links ``statuses()`` returns (each a ``LinkRunner.status()`` dict).

    ``statuses`` is called on the thread that renders (the trio thread under the admin API),
    must not block, and may raise: the exception propagates out of :meth:`render`.
    """

    def __init__(self, statuses: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_StatusCollector(statuses))

    def render(self) -> bytes:
        """Every metric in the Prometheus text exposition format (see :attr:`content_type`)."""
        return generate_latest(self._registry)

    @property
    def content_type(self) -> str:
        return CONTENT_TYPE_LATEST


class _StatusCollector:
    def __init__(self, statuses: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        self._statuses = statuses

    def describe(self) -> Iterable[Metric]:
        return _Families().all()

    def collect(self) -> Iterable[Metric]:
        families = _Families()
        for status in self._statuses():
            _link(families, status)
        return families.all()


def _link(f: _Families, status: Mapping[str, Any]) -> None:
    name = str(status["link"]["name"])
    state = str(status["state"])
    for known in dict.fromkeys((*LINK_STATES, state)):
        f.link_state.add_metric([name, known], 1 if known == state else 0)
    f.syncs.add_metric([name], int(status.get("syncs", 0)))
    f.sync_failing.add_metric([name], 0 if status.get("last_sync_error") is None else 1)
    f.conflicts.add_metric([name], len(status.get("conflicts", ())))
    for topic, entry in sorted(status.get("topics", {}).items()):
        for p in entry.get("partitions", ()):
            labels = [name, topic, str(p["partition"])]
            f.partition_state.add_metric([*labels, str(p["state"])], 1)
            if p["state"] != UNASSIGNED:  # else another process copies it: what this one saw is stale
                _partition_gauges(f, labels, p)
            f.records_copied.add_metric(labels, p["records_copied"])
            f.bytes_copied.add_metric(labels, p["bytes_copied"])
            f.gap_records.add_metric(labels, p["gap_records"])
            f.errors.add_metric(labels, p["errors"])
    latency = status.get("latency")
    if latency is not None:
        buckets = [("+Inf" if bound == "+Inf" else repr(float(bound)), count) for bound, count in latency["buckets"]]
        f.latency.add_metric([name], buckets, latency["sum"])


def _partition_gauges(f: _Families, labels: list[str], p: Mapping[str, Any]) -> None:
    for family, key in (
        (f.source_high_watermark, "source_high_watermark"),
        (f.source_log_start, "source_log_start"),
        (f.mirrored_offset, "mirrored_offset"),
        (f.lag_records, "lag_records"),
        (f.lag_bytes, "lag_bytes"),
        (f.lag_seconds, "lag_seconds"),
    ):
        value = p.get(key)
        if value is not None and value >= 0:
            family.add_metric(labels, value)


class _Families:
    """Fresh, empty families for one scrape."""

    def __init__(self) -> None:
        self.link_state = GaugeMetricFamily(
            "strait_mirror_link_state", "1 for the link's current state, 0 for the others.", labels=["link", "state"]
        )
        self.syncs = CounterMetricFamily(
            "strait_mirror_link_syncs", "Topic sync passes the link made.", labels=["link"]
        )
        self.sync_failing = GaugeMetricFamily(
            "strait_mirror_link_sync_failing",
            "1 while the link's last topic sync pass failed (a site unreachable, ...), else 0.",
            labels=["link"],
        )
        self.conflicts = GaugeMetricFamily(
            "strait_mirror_link_conflicts",
            "Selected topics that exist on the target but are not this link's mirrors (left alone).",
            labels=["link"],
        )
        self.partition_state = GaugeMetricFamily(
            "strait_mirror_partition_state",
            "1 for a mirrored partition's current state (copying, paused, unassigned, diverged, ...).",
            labels=[*_PARTITION, "state"],
        )
        self.source_high_watermark = GaugeMetricFamily(
            "strait_mirror_source_high_watermark",
            "The source partition's high watermark as of the copier's last fetch.",
            labels=_PARTITION,
        )
        self.source_log_start = GaugeMetricFamily(
            "strait_mirror_source_log_start_offset",
            "The source partition's log start offset as of the copier's last fetch.",
            labels=_PARTITION,
        )
        self.mirrored_offset = GaugeMetricFamily(
            "strait_mirror_mirrored_offset",
            "The mirror partition's log end offset on the target: everything below is copied.",
            labels=_PARTITION,
        )
        self.lag_records = GaugeMetricFamily(
            "strait_mirror_lag_records", "Records committed on the source and not yet mirrored.", labels=_PARTITION
        )
        self.lag_bytes = GaugeMetricFamily(
            "strait_mirror_lag_bytes",
            "Bytes not yet mirrored, estimated from the mean size of the records copied so far.",
            labels=_PARTITION,
        )
        self.lag_seconds = GaugeMetricFamily(
            "strait_mirror_lag_seconds",
            "Age in seconds of the oldest record not yet mirrored (0 when caught up).",
            labels=_PARTITION,
        )
        self.records_copied = CounterMetricFamily(
            "strait_mirror_records_copied", "Records appended to the mirror by this process.", labels=_PARTITION
        )
        self.bytes_copied = CounterMetricFamily(
            "strait_mirror_bytes_copied",
            "Record batch bytes appended to the mirror by this process.",
            labels=_PARTITION,
        )
        self.gap_records = CounterMetricFamily(
            "strait_mirror_gap_records",
            "Records the source deleted (retention) before they were mirrored: lost to the mirror.",
            labels=_PARTITION,
        )
        self.errors = CounterMetricFamily(
            "strait_mirror_errors", "Copier errors (each followed by a reconnect and retry).", labels=_PARTITION
        )
        self.latency = HistogramMetricFamily(
            "strait_mirror_replication_latency_seconds",
            "From a batch's newest timestamp on the source to its append on the target.",
            labels=["link"],
        )

    def all(self) -> list[Metric]:
        return [
            self.link_state,
            self.syncs,
            self.sync_failing,
            self.conflicts,
            self.partition_state,
            self.source_high_watermark,
            self.source_log_start,
            self.mirrored_offset,
            self.lag_records,
            self.lag_bytes,
            self.lag_seconds,
            self.records_copied,
            self.bytes_copied,
            self.gap_records,
            self.errors,
            self.latency,
        ]
