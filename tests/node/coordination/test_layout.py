"""The znode JSON of Kafka's classic layout: encode/decode round trips and Kafka's own shapes."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from node.coordination import (
    BrokerRegistration,
    MalformedZnode,
    PartitionState,
    Reassignment,
    validate_topic_name,
)
from node.coordination._layout import (
    decode_broker,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_offline_replicas,
    decode_partition_state,
    decode_producer_id_block_end,
    decode_reassignment,
    decode_topic,
    decode_topic_config,
    encode_broker,
    encode_cluster_id,
    encode_config_change,
    encode_controller,
    encode_controller_epoch,
    encode_offline_replicas,
    encode_partition_state,
    encode_producer_id_block,
    encode_reassignment,
    encode_topic,
    encode_topic_config,
    new_uuid,
    uuid_of,
)


def test_cluster_id_json_is_kafkas() -> None:
    assert json.loads(encode_cluster_id("AbC")) == {"version": "1", "id": "AbC"}
    assert decode_cluster_id(encode_cluster_id("AbC")) == "AbC"
    with pytest.raises(MalformedZnode, match="/cluster/id"):
        decode_cluster_id(b'{"version":"1"}')


def test_new_uuid_is_kafkas_string_form() -> None:
    ids = {new_uuid() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_broker_registration_is_version_5() -> None:
    reg = BrokerRegistration(3, "10.0.0.3", 9092, ("PLAINTEXT://10.0.0.3:9092",), rack="r1")
    obj = json.loads(encode_broker(reg, 1700000000123))
    assert obj == {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://10.0.0.3:9092"],
        "jmx_port": -1,
        "features": {},
        "host": "10.0.0.3",
        "port": 9092,
        "timestamp": "1700000000123",
        "rack": "r1",
        "version": 5,
    }
    assert decode_broker(3, encode_broker(reg, 1)) == reg


def test_broker_without_endpoints_registers_plaintext() -> None:
    reg = BrokerRegistration(1, "127.0.0.1", 19092, (), None)
    obj = json.loads(encode_broker(reg, 1))
    assert obj["endpoints"] == ["PLAINTEXT://127.0.0.1:19092"] and obj["rack"] is None


def test_broker_decode_falls_back_to_the_first_endpoint() -> None:
    # Kafka writes host null / port -1 when no listener is PLAINTEXT.
    data = b'{"version":4,"host":null,"port":-1,"jmx_port":-1,"endpoints":["SSL://h:9093"],"timestamp":"1"}'
    reg = decode_broker(7, data)
    assert (reg.host, reg.port, reg.endpoints, reg.rack) == ("h", 9093, ("SSL://h:9093",), None)


def test_a_broker_registers_every_listener_with_its_protocol_and_host_port_of_one() -> None:
    reg = BrokerRegistration(
        2,
        "10.0.0.2",
        9092,
        ("LOCAL://10.0.0.2:9092", "WAN://[2001:db8::2]:9093"),
        security_protocols={"LOCAL": "PLAINTEXT", "WAN": "PLAINTEXT"},
    )
    obj = json.loads(encode_broker(reg, 1))
    assert obj["endpoints"] == ["LOCAL://10.0.0.2:9092", "WAN://[2001:db8::2]:9093"]
    assert obj["listener_security_protocol_map"] == {"LOCAL": "PLAINTEXT", "WAN": "PLAINTEXT"}
    assert (obj["host"], obj["port"]) == ("10.0.0.2", 9092)
    back = decode_broker(2, encode_broker(reg, 1))
    assert back == reg and back.security_protocols == {"LOCAL": "PLAINTEXT", "WAN": "PLAINTEXT"}
    assert back.endpoint("WAN") == ("2001:db8::2", 9093) and back.endpoint("LOCAL") == ("10.0.0.2", 9092)
    assert back.endpoint("PLAINTEXT") is None


def test_without_a_map_a_listener_named_after_a_protocol_uses_it_and_others_plaintext() -> None:
    reg = BrokerRegistration(1, "h", 1, ("SSL://h:2", "LOCAL://h:1"))
    assert reg.listener_security_protocol_map == {"SSL": "SSL", "LOCAL": "PLAINTEXT"}
    # A registration without endpoints (an old writer) is reached on PLAINTEXT at host/port.
    assert BrokerRegistration(1, "h", 9092).endpoint("PLAINTEXT") == ("h", 9092)


def test_reached_through_points_host_and_port_at_one_listener() -> None:
    reg = BrokerRegistration(3, "10.0.0.3", 9092, ("LOCAL://10.0.0.3:9092", "WAN://proxy:19093"), rack="r1")
    wan = reg.reached_through("WAN")
    assert (wan.host, wan.port, wan.endpoints, wan.rack) == ("proxy", 19093, reg.endpoints, "r1")
    assert reg.reached_through("LOCAL") is reg
    assert reg.reached_through("REPLICATION") is reg  # no such listener: as registered


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"broker_id": -1}, "broker id -1"),
        ({"port": 70000}, "port 70000"),
        ({"endpoints": ("nonsense",)}, "'nonsense'"),
    ],
)
def test_broker_registration_names_bad_values(kwargs: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"broker_id": 1, "host": "h", "port": 1, "endpoints": (), "rack": None, **kwargs}
    with pytest.raises(ValueError, match=message):
        BrokerRegistration(**fields)  # type: ignore[arg-type]


def test_topic_assignment_is_version_3_and_keeps_reassignment_keys() -> None:
    data = encode_topic("id-1", {1: (2, 3), 0: (1, 2)}, {"adding_replicas": {"0": [4]}})
    obj = json.loads(data)
    assert obj == {
        "version": 3,
        "topic_id": "id-1",
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {"0": [4]},
        "removing_replicas": {},
    }
    topic = decode_topic("orders", data, 4)
    assert (topic.name, topic.topic_id, topic.partitions, topic.version) == (
        "orders",
        "id-1",
        {0: (1, 2), 1: (2, 3)},
        4,
    )


def test_topic_decode_reads_pre_2_8_kafka() -> None:
    topic = decode_topic("old", b'{"version":1,"partitions":{"0":[1]}}', 0)
    assert topic.topic_id == "" and topic.partitions == {0: (1,)}


@pytest.mark.parametrize(
    "data",
    [b"", b"not json", b"[1]", b'{"partitions":{"x":[1]}}', b'{"partitions":{"0":["a"]}}', b'{"partitions":[]}'],
)
def test_malformed_topic_names_its_path(data: bytes) -> None:
    with pytest.raises(MalformedZnode, match="/brokers/topics/orders"):
        decode_topic("orders", data, 0)


def test_partition_state_round_trip() -> None:
    state = PartitionState(leader=2, leader_epoch=5, isr=(2, 1), controller_epoch=3)
    obj = json.loads(encode_partition_state(state))
    assert obj == {"controller_epoch": 3, "leader": 2, "version": 1, "leader_epoch": 5, "isr": [2, 1]}
    assert decode_partition_state("t", 0, encode_partition_state(state), 9) == PartitionState(2, 5, (2, 1), 3, 9)
    with pytest.raises(MalformedZnode, match=r"/brokers/topics/t/partitions/0/state.*'leader'"):
        decode_partition_state("t", 0, b'{"leader":"x","leader_epoch":1,"isr":[],"controller_epoch":1}', 0)


def test_topic_config_and_change_notification() -> None:
    assert json.loads(encode_topic_config({"retention.ms": "1"})) == {"version": 1, "config": {"retention.ms": "1"}}
    assert decode_topic_config("t", encode_topic_config({"a": "b"})) == {"a": "b"}
    assert decode_topic_config("t", b"") == {}
    assert json.loads(encode_config_change("t")) == {"version": 2, "entity_path": "topics/t"}


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "sp ace", "ü"])
def test_invalid_topic_names_are_named(name: str) -> None:
    with pytest.raises(ValueError, match="invalid topic name"):
        validate_topic_name(name)


def test_valid_topic_names() -> None:
    for name in ("orders", "a.b_c-d", "x" * 249, "__consumer_offsets"):
        assert validate_topic_name(name) == name


def test_producer_id_block_is_kafkas() -> None:
    data = encode_producer_id_block(2, 1000, 1999)
    assert json.loads(data) == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    assert decode_producer_id_block_end(data) == 1999
    assert decode_producer_id_block_end(b"") is None  # Kafka creates the znode empty
    with pytest.raises(MalformedZnode, match="latest_producer_id_block"):
        decode_producer_id_block_end(b'{"block_end": 5}')


def test_controller_znodes_are_kafkas() -> None:
    data = encode_controller(3, 1700000000123)
    assert json.loads(data) == {"version": 1, "brokerid": 3, "timestamp": "1700000000123"}
    assert decode_controller(data) == 3
    assert encode_controller_epoch(12) == b"12"
    assert decode_controller_epoch(b"12") == 12
    for bad in (b"", b"-1", b"x", None):
        with pytest.raises(MalformedZnode, match="/controller_epoch"):
            decode_controller_epoch(bad)
    with pytest.raises(MalformedZnode, match="/controller is malformed: 'brokerid'"):
        decode_controller(b'{"version":1,"brokerid":"3"}')


def test_reassignment_is_kafkas_with_a_throttle() -> None:
    moves = {("t", 1): (3, 1), ("a", 0): (2,)}
    data = encode_reassignment(moves, 1024)
    assert json.loads(data) == {
        "version": 1,
        "partitions": [
            {"topic": "a", "partition": 0, "replicas": [2]},
            {"topic": "t", "partition": 1, "replicas": [3, 1]},
        ],
        "throttle_bytes_per_s": 1024,
    }
    assert decode_reassignment(data, 4) == Reassignment({("a", 0): (2,), ("t", 1): (3, 1)}, 1024, 4)
    # Kafka's own (no throttle key, an extra log_dirs key).
    kafkas = b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["any"]}]}'
    assert decode_reassignment(kafkas, 0) == Reassignment({("t", 0): (1,)}, None, 0)


def test_reassignment_entries_may_record_their_original_replicas() -> None:
    data = encode_reassignment({("t", 0): (2, 3), ("t", 1): (1,)}, None, {("t", 0): (1, 2)})
    assert json.loads(data)["partitions"] == [
        {"topic": "t", "partition": 0, "replicas": [2, 3], "original_replicas": [1, 2]},
        {"topic": "t", "partition": 1, "replicas": [1]},  # unknown: no key
    ]
    assert decode_reassignment(data, 2) == Reassignment({("t", 0): (2, 3), ("t", 1): (1,)}, None, 2, {("t", 0): (1, 2)})
    # A repeated entry replaces the earlier one, original included.
    repeated = (
        b'{"partitions":[{"topic":"t","partition":0,"replicas":[2],"original_replicas":[1]},'
        b'{"topic":"t","partition":0,"replicas":[3]}]}'
    )
    assert decode_reassignment(repeated, 0) == Reassignment({("t", 0): (3,)}, None, 0)


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1}',
        b'{"partitions":[{"partition":0,"replicas":[1]}]}',
        b'{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
        b'{"partitions":[{"topic":"t","partition":0,"replicas":"1"}]}',
        b'{"partitions":[],"throttle_bytes_per_s":"fast"}',
        b'{"partitions":[{"topic":"t","partition":0,"replicas":[1],"original_replicas":"1"}]}',
    ],
)
def test_malformed_reassignment_names_its_path(data: bytes) -> None:
    with pytest.raises(MalformedZnode, match="/admin/reassign_partitions"):
        decode_reassignment(data, 0)


def test_offline_replicas_round_trip() -> None:
    data = encode_offline_replicas([("t", 3), ("a", 0), ("t", 3)])
    assert json.loads(data) == {"version": 1, "partitions": [["a", 0], ["t", 3]]}
    assert decode_offline_replicas(2, data) == frozenset({("a", 0), ("t", 3)})
    for bad in (b'{"partitions":{}}', b'{"partitions":[["t"]]}', b'{"partitions":[["t",true]]}'):
        with pytest.raises(MalformedZnode, match="/strait/offline_replicas/2"):
            decode_offline_replicas(2, bad)


def test_uuid_of_reads_the_string_form_back_and_gives_zero_for_no_id() -> None:
    text = new_uuid()
    assert uuid_of(text).bytes == base64.urlsafe_b64decode(text + "==")
    assert uuid_of("AAAAAAAAAAAAAAAAAAAAAA") == uuid.UUID(int=0)
    for malformed in ("", "short", "not base64 at all!!", "A" * 30):
        assert uuid_of(malformed) == uuid.UUID(int=0), malformed
