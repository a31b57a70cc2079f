"""A running strait site as the benchmarks use it: its node properties, topic cases, and its nodes' admin APIs.

- :data:`SITE_PROPERTIES`: every node's server.properties (besides broker.id, listeners,
  log.dirs and zookeeper.connect) in replication_bench's and mirror_bench's sites;
- :class:`Case`: a topic layout and the producer settings that go with it; :data:`REPLICATED`,
  RF 3 acks=all idempotent, is the case both of those benchmarks measure;
- :func:`create_topic` and :func:`wait_in_sync` (every node's admin API agrees on the leaders
  and the ISR is full), :func:`isr_shrinks` after a run;
- :func:`metric_totals`: Prometheus series summed over the nodes' ``/metrics``.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # what confluent_kafka.admin re-exports, typed

from node.proc import Deadline

from ._procs import POLL_S, BenchError, RunningSite

SITE_PROPERTIES = {
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "1",  # no consumer groups here
    "zookeeper.session.timeout.ms": "6000",
    # Sites are thrown away after each run: three nodes stopping at once in a controlled shutdown
    # only hand leaderships to each other, which took up to ~10 s of retries.
    "controlled.shutdown.enable": "false",
}


@dataclass(frozen=True)
class Case:
    """A topic layout and the producer settings that go with it."""

    key: str  # in topic names and the JSON
    label: str
    replication: int
    acks: str
    idempotent: bool
    goal: bool  # one of the two cases the goal compares; the others are diagnostics
    topic_config: tuple[tuple[str, str], ...] = ()


REPLICATED = Case(
    "rf3-acksall",
    "RF 3, acks=all, idempotent",
    3,
    "all",
    idempotent=True,
    goal=True,
    topic_config=(("min.insync.replicas", "2"),),
)


def partition_views(admin_url: str, topic: str, timeout: float) -> dict[int, dict[str, Any]]:
    """Per partition, the node's own view of ``topic`` from its admin API (leader, isr, role, offsets).

    Raises ``LookupError`` when the node does not know the topic (yet), ``OSError`` when it cannot
    be asked."""
    url = f"{admin_url}/v1/topics/{topic}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the response's socket
        raise LookupError(f"{url}: HTTP {exc.code}") from None
    return {int(p["partition"]): p for p in body["partitions"]}


def create_topic(bootstrap: str, topic: str, partitions: int, case: Case, timeout: float, *, client_id: str) -> None:
    """CreateTopics; raises ``BenchError`` naming the topic if it fails."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id})
    new = NewTopic(
        topic, num_partitions=partitions, replication_factor=case.replication, config=dict(case.topic_config)
    )
    try:
        admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[topic].result(timeout=timeout)
    except KafkaException as exc:
        raise BenchError(
            f"CreateTopics {topic!r} ({partitions} partitions, RF {case.replication}) failed: {exc}"
        ) from exc


def wait_in_sync(site: RunningSite, topic: str, partitions: int, replication: int, timeout: float) -> dict[int, int]:
    """Wait until every node agrees on each partition's leader and the ISR holds all ``replication``
    replicas; returns partition -> leader. Raises ``BenchError`` with the last state at the deadline."""
    deadline = Deadline(timeout, f"topic {topic} in sync")
    state: object = "no answer yet"
    while not deadline.expired():
        try:
            views = [partition_views(n.admin_url or "", topic, max(1.0, deadline.remaining())) for n in site.nodes]
        except (OSError, ValueError, LookupError) as exc:
            state = str(exc)
        else:
            leaders = {p: {v[p]["leader"] for v in views if p in v} for p in range(partitions)}
            isr_ok = all(len(v[p]["isr"]) == replication for v in views for p in range(partitions) if p in v)
            complete = all(len(v) == partitions for v in views)
            agreed = all(len(ids) == 1 and next(iter(ids)) is not None for ids in leaders.values())
            if complete and agreed and isr_ok:
                return {p: int(next(iter(ids))) for p, ids in leaders.items()}
            state = {p: [(v[p]["leader"], v[p]["isr"]) for v in views if p in v] for p in range(partitions)}
        time.sleep(POLL_S)  # leadership and followers' catch-up reach every node through ZooKeeper
    raise BenchError(f"topic {topic!r} not in sync within {timeout} s; per partition (leader, isr) by node: {state}")


def isr_shrinks(site: RunningSite, topic: str, replication: int, timeout: float) -> list[str]:
    """Notes naming every partition whose ISR (as its leader sees it) is below ``replication`` now."""
    notes = []
    for node in site.nodes:
        for p, view in partition_views(node.admin_url or "", topic, timeout).items():
            if view.get("role") == "leader" and len(view["isr"]) < replication:
                notes.append(f"{topic}-{p}: ISR {view['isr']} on leader {node.broker_id} after the run")
    return notes


def metric_totals(site: RunningSite, series: Mapping[str, str], timeout: float) -> dict[str, float]:
    """The Prometheus ``series`` (full series name -> our name; one line each) summed over the site's
    nodes, read from their admin ``/metrics``. Raises ``BenchError`` naming a node that cannot be read."""
    totals = dict.fromkeys(series.values(), 0.0)
    for node in site.nodes:
        try:
            with urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=timeout) as response:
                text = response.read().decode()
        except OSError as exc:
            raise BenchError(f"node {node.broker_id}: cannot read {node.admin_url}/metrics: {exc}") from exc
        for line in text.splitlines():
            name, _, number = line.partition(" ")
            if name in series:
                totals[series[name]] += float(number)
    return totals
