"""Kafka's Admin client 4.3 sets and reads client quotas on a strait site (``java/ClientQuotas.java``):
alterClientQuotas (validateOnly too) and describeClientQuotas with each kind of filter, and the
errors Kafka gives for an unknown key and a fractional byte rate. The quotas are stored once in
ZooKeeper: every node of the site answers the same."""

from __future__ import annotations

from typing import Any

import pytest

from node.protocol import ApiKey
from tests.interop.conftest import KafkaJava
from tests.interop.javasite import bootstrap, lines
from tests.node import raw
from tests.node.harness import NodeProcess, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def entities(call: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, float]]]:
    assert "error" not in call, call
    # Json.java prints a Double as a string.
    return [(e["entity"], {k: float(v) for k, v in e["values"].items()}) for e in call["entities"]]


def test_admin_alters_and_describes_client_quotas(java_site: list[NodeProcess], kafka_java: KafkaJava) -> None:
    out = lines(kafka_java.run("ClientQuotas", bootstrap(java_site)).stdout)
    assert out[-1] == {"done": "quotas"}, out
    calls = {c["op"]: c for c in out[:-1]}
    assert calls["alterClientQuotas"] == {"op": "alterClientQuotas", "altered": 3}
    alice_c1 = {"client-id": "c1", "user": "alice"}
    everything = [
        ({"client-id": None}, {"consumer_byte_rate": 2048.0}),
        ({"user": "alice"}, {"request_percentage": 12.5}),
        (alice_c1, {"producer_byte_rate": 1024.0}),
    ]
    assert sorted(entities(calls["describeAll"]), key=str) == sorted(everything, key=str)
    assert sorted(entities(calls["describeContainsAlice"]), key=str) == sorted(everything[1:], key=str)
    assert entities(calls["describeOnlyAlice"]) == [everything[1]]
    assert entities(calls["describeOnlyDefaultClient"]) == [everything[0]]
    assert calls["validateOnly"] == {"op": "validateOnly", "altered": 1}
    assert "InvalidRequestException" in calls["unknownKey"]["error"]
    assert "Invalid configuration key bytes_per_fortnight" in calls["unknownKey"]["error"]
    assert "InvalidRequestException" in calls["fractionalByteRate"]["error"]
    assert "producer_byte_rate must be a Long value" in calls["fractionalByteRate"]["error"]
    assert calls["remove"] == {"op": "remove", "altered": 1}
    assert sorted(entities(calls["describeAllAgain"]), key=str) == sorted(everything[:2], key=str)

    # Every node keeps a copy in step with ZooKeeper: each describes the same quotas.
    def described(node: NodeProcess) -> list[tuple[tuple[tuple[str, str | None], ...], tuple[tuple[str, float], ...]]]:
        body = {"components": [], "strict": False}
        with raw.connect(node.bootstrap) as sock:
            answer = raw.request(sock, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, body)
        return sorted(
            (
                tuple((e.entity_type, e.entity_name) for e in entry.entity),
                tuple((v.key, v.value) for v in entry.values),
            )
            for entry in answer.entries
        )

    expected = [
        ((("client-id", None),), (("consumer_byte_rate", 2048.0),)),
        ((("user", "alice"),), (("request_percentage", 12.5),)),
    ]
    for node in java_site:
        wait_for(f"node {node.broker_id}'s quotas", lambda node=node: described(node) == expected)
