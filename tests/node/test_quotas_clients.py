"""Client quotas with real clients against a real node: confluent-kafka producers and consumers
held to their byte rates, told so through ``throttle_time_ms`` (librdkafka's ``throttle_cb``),
while a client without a quota is not; Kafka's precedence (a user quota over a client-id one);
quotas set and read with AlterClientQuotas / DescribeClientQuotas, and refused when malformed.

Rates are asserted with wide margins (the machine may be loaded): the mechanism is what is checked
(throttle reported, a rate near its quota and far below an unthrottled client's), not timing.
The node samples rates over 3 windows of 1 s, so that a few seconds of traffic are dominated by
the quota rather than by the first burst (which a span of windows lets through, as in Kafka).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from node.protocol import ApiKey
from tests.node import raw
from tests.node.harness import NodeProcess, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

QUOTA = 64 * 1024  # bytes per second
RUN_S = 6.0
VALUE = b"q" * 1024
WINDOWS = {"quota_window_num": "3", "quota_window_size_seconds": "1"}


def alter(bootstrap: str, entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]) -> Any:
    """One AlterClientQuotas entry (None: remove the key); the entry's result."""
    body = {
        "entries": [
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops],
            }
        ],
        "validate_only": False,
    }
    with raw.connect(bootstrap) as sock:
        return raw.request(sock, ApiKey.ALTER_CLIENT_QUOTAS, 1, body).entries[0]


def describe(bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    body = {"components": [{"entity_type": t, "match_type": m, "match": s} for t, m, s in components], "strict": strict}
    with raw.connect(bootstrap) as sock:
        return raw.request(sock, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, body)


def produce_for(
    bootstrap: str, topic: str, client_id: str, seconds: float = RUN_S, extra: dict[str, str] | None = None
) -> tuple[float, list[float]]:
    """Produce as fast as the client may for ``seconds`` (``extra``: more librdkafka settings):
    (bytes per second acknowledged, throttle times seen)."""
    throttles: list[float] = []
    acked = 0
    deadline = time.monotonic() + seconds

    def delivered(err: Any, msg: Any) -> None:
        nonlocal acked
        if err is None and time.monotonic() <= deadline:
            acked += len(msg.value())

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "queue.buffering.max.messages": 256,  # a bounded backlog: the run ends soon after its deadline
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
            **(extra or {}),
        }
    )
    started = time.monotonic()
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
            continue
        producer.poll(0)
    elapsed = time.monotonic() - started
    producer.purge()
    producer.flush(30)
    return acked / elapsed, throttles


def consume_for(bootstrap: str, topic: str, client_id: str, seconds: float = RUN_S) -> tuple[float, list[float]]:
    """Read ``topic`` from the start for ``seconds`` (or until 4 MiB): (bytes per second, throttle times seen)."""
    throttles: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"quota-test-{client_id}",
            "enable.auto.commit": False,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    read = 0
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds and read < 4 * 1024 * 1024:
            for message in consumer.consume(100, timeout=0.2):
                if message.error() is None:
                    read += len(message.value())
        elapsed = time.monotonic() - started
    finally:
        consumer.close()
    return read / elapsed, throttles


@pytest.fixture
def quota_node(node_factory: Callable[..., NodeProcess]) -> NodeProcess:
    return node_factory(1, **WINDOWS)


def test_a_producer_is_held_to_its_quota_and_told_while_others_are_not(quota_node: NodeProcess) -> None:
    bootstrap = quota_node.bootstrap
    raw.auto_create(bootstrap, "quota-produce")
    assert alter(bootstrap, [("client-id", "slow-producer")], [("producer_byte_rate", QUOTA)]).error_code == 0
    fast, fast_throttles = produce_for(bootstrap, "quota-produce", "fast-producer")
    slow, slow_throttles = produce_for(bootstrap, "quota-produce", "slow-producer")
    assert slow_throttles and max(slow_throttles) > 0, "the throttled producer was never told"
    assert slow < 2.5 * QUOTA, f"held to {slow:.0f} B/s with a quota of {QUOTA}"
    assert not fast_throttles
    assert fast > 4 * slow, f"unthrottled {fast:.0f} B/s against throttled {slow:.0f} B/s"


def test_a_consumer_is_held_to_its_quota_and_told(quota_node: NodeProcess) -> None:
    bootstrap = quota_node.bootstrap
    raw.auto_create(bootstrap, "quota-fetch")
    produce_for(bootstrap, "quota-fetch", "filler", seconds=2.0)
    assert alter(bootstrap, [("client-id", "slow-consumer")], [("consumer_byte_rate", QUOTA)]).error_code == 0
    fast, fast_throttles = consume_for(bootstrap, "quota-fetch", "fast-consumer")
    slow, slow_throttles = consume_for(bootstrap, "quota-fetch", "slow-consumer")
    assert slow_throttles and max(slow_throttles) > 0, "the throttled consumer was never told"
    assert slow < 2.5 * QUOTA, f"held to {slow:.0f} B/s with a quota of {QUOTA}"
    assert not fast_throttles
    assert fast > 4 * slow, f"unthrottled {fast:.0f} B/s against throttled {slow:.0f} B/s"
    metrics = raw_metrics(quota_node)
    assert 'strait_quota_throttled_total{quota="fetch"}' in metrics
    assert 'strait_quota_rate{client_id="slow-consumer",quota="fetch",user=""}' in metrics


def test_the_user_quota_overrides_the_client_id_one(quota_node: NodeProcess) -> None:
    bootstrap = quota_node.bootstrap
    raw.auto_create(bootstrap, "quota-precedence")
    assert alter(bootstrap, [("client-id", "both")], [("producer_byte_rate", QUOTA)]).error_code == 0
    # A PLAINTEXT connection's principal is User:ANONYMOUS, so its user is ANONYMOUS, as in Kafka.
    assert alter(bootstrap, [("user", "ANONYMOUS")], [("producer_byte_rate", 1e9)]).error_code == 0
    rate, throttles = produce_for(bootstrap, "quota-precedence", "both", seconds=3.0)
    assert not throttles, f"throttled by the client-id quota: {throttles[:5]}"
    assert rate > 4 * QUOTA
    assert alter(bootstrap, [("user", "ANONYMOUS")], [("producer_byte_rate", None)]).error_code == 0
    _, throttles = produce_for(bootstrap, "quota-precedence", "both", seconds=3.0)
    assert throttles, "the client-id quota applies again once the user quota is removed"


def test_sasl_users_get_their_own_quota_over_the_client_id_one(node_factory: Callable[..., NodeProcess]) -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_alice="alice-secret" user_bob="bob-secret";'
    )
    node = node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        sasl_enabled_mechanisms="PLAIN",
        sasl_jaas_config=jaas,
        **WINDOWS,
    )
    sasl = str(json.loads(node.ready_path.read_text())["listeners"]["SASL_PLAINTEXT"])
    raw.auto_create(node.bootstrap, "quota-sasl")
    assert alter(node.bootstrap, [("client-id", "shared")], [("producer_byte_rate", QUOTA)]).error_code == 0
    assert alter(node.bootstrap, [("user", "alice")], [("producer_byte_rate", 1e9)]).error_code == 0

    def as_user(user: str) -> dict[str, str]:
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-secret",
        }

    alice, alice_throttles = produce_for(sasl, "quota-sasl", "shared", seconds=3.0, extra=as_user("alice"))
    bob, bob_throttles = produce_for(sasl, "quota-sasl", "shared", seconds=3.0, extra=as_user("bob"))
    assert not alice_throttles, f"alice's user quota should win over the client id's: {alice_throttles[:5]}"
    assert bob_throttles and bob < 4 * QUOTA < alice, f"alice {alice:.0f} B/s, bob {bob:.0f} B/s"


def test_quotas_are_described_and_bad_input_refused(quota_node: NodeProcess) -> None:
    bootstrap = quota_node.bootstrap
    assert alter(bootstrap, [("user", None), ("client-id", None)], [("request_percentage", 25.0)]).error_code == 0
    assert alter(bootstrap, [("user", "alice")], [("consumer_byte_rate", 1000.0)]).error_code == 0
    answer = describe(bootstrap, [("user", 1, None)])
    assert answer.error_code == 0
    [entry] = answer.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", None), ("client-id", None)]
    assert [(v.key, v.value) for v in entry.values] == [("request_percentage", 25.0)]
    assert [e.entity[0].entity_name for e in describe(bootstrap, [("user", 0, "alice")], strict=True).entries] == [
        "alice"
    ]
    bad = alter(bootstrap, [("user", "alice")], [("consumer_byte_rate", 1.5)])
    assert bad.error_code == 42 and "consumer_byte_rate must be a Long value" in bad.error_message
    bad = alter(bootstrap, [("user", "alice")], [("bytes_per_fortnight", 1.0)])
    assert bad.error_code == 42 and "Invalid configuration key bytes_per_fortnight" in bad.error_message
    refused = describe(bootstrap, [("user", 0, None)])
    assert refused.error_code == 42 and refused.entries is None


def raw_metrics(node: NodeProcess) -> str:
    import urllib.request

    def scrape() -> str:
        with urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=5) as reply:
            return str(reply.read().decode())

    return str(wait_for("the node's metrics", scrape))


def test_the_operator_command_alters_and_describes(quota_node: NodeProcess) -> None:
    from click.testing import CliRunner

    from strait.cli import main

    def strait(*args: str) -> Any:
        return CliRunner().invoke(main, ["quotas", *args, "-b", quota_node.bootstrap])

    done = strait("alter", "--user", "erin", "--client-id-default", "--add", "producer_byte_rate=2048")
    assert done.exit_code == 0, done.output
    assert "altered user=erin,client-id=<default>: producer_byte_rate=2048" in done.output
    shown = strait("describe", "--user", "erin")
    assert shown.exit_code == 0, shown.output
    assert "user=erin,client-id=<default>  producer_byte_rate  2048" in shown.output
    refused = strait("alter", "--client-id", "x", "--add", "producer_byte_rate=0.5")
    assert refused.exit_code != 0 and "must be a Long value" in refused.output
    assert strait("alter", "--user", "erin", "--client-id-default", "--delete", "producer_byte_rate").exit_code == 0
    assert "no client quotas" in strait("describe", "--user", "erin").output
