"""Pure pieces of failover: fence text, topic selection, export lines, status text, the reverse link's definition."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import trio

from failover._run import Run
from failover._topics import MAX_FENCE_TEXT, TopicFilter, fence_text
from failover.export import record_line
from failover.reverse import _start_reverse
from failover.status import render
from failover.topology import Site, Topology
from mirror import parse_link
from storage.records import BatchBuilder, RecordBatch


def test_the_fence_text_names_the_new_primary_and_where_to_produce() -> None:
    west = Site("west", "127.0.0.1:9192,127.0.0.1:9193", "127.0.0.1:2181/west")
    text = fence_text("east", west, "east-to-west", 2, 1_761_200_000_000)
    assert text == (
        "site east was failed over to west (link east-to-west, DR epoch 2, 2025-10-23T06:13:20Z); "
        "produce to west: 127.0.0.1:9192,127.0.0.1:9193"
    )


def test_a_long_bootstrap_is_cut_so_the_fence_stays_within_the_key_limit() -> None:
    west = Site("west", ",".join(f"10.0.{i // 250}.{i % 250}:9092" for i in range(200)), "zk:2181/west")
    text = fence_text("east", west, "east-to-west", 1, 0)
    assert len(text) == MAX_FENCE_TEXT and text.endswith("...")


def test_the_topic_filter_matches_whole_names_and_never_internal_topics() -> None:
    selection = TopicFilter(include=("orders.*", "payments"), exclude=("orders-private",))
    assert selection.matches("orders.eu") and selection.matches("payments")
    assert not selection.matches("payments2") and not selection.matches("orders-private")
    assert not TopicFilter().matches("__consumer_offsets")
    status = {"link": {"topics": {"include": ["a.*"], "exclude": ["ab"]}, "groups": {"include": ["g"]}}}
    assert TopicFilter.from_status(status) == TopicFilter(("a.*",), ("ab",))
    assert TopicFilter.from_status(status, "groups") == TopicFilter(("g",), ())
    assert TopicFilter.from_status({}) == TopicFilter()


def test_an_export_line_keeps_text_as_text_and_binary_as_base64() -> None:
    builder = BatchBuilder(producer_id=4001, producer_epoch=2, base_sequence=10)
    builder.append(1000, b"order-1", b'{"total": 12}', (("trace", b"abc"),))
    builder.append(1001, None, b"\xff\xfe", (("bin", b"\x00\x80"), ("none", None)))
    batch = bytearray(builder.build())
    decoded = RecordBatch(batch)
    lines = [record_line("orders", 3, decoded.header, r) for r in decoded.records()]
    assert lines[0]["key"] == "order-1" and lines[0]["key_encoding"] == "utf8"
    assert lines[0]["value"] == '{"total": 12}' and lines[0]["headers"] == [
        {"key": "trace", "value": "abc", "encoding": "utf8"}
    ]
    assert (lines[0]["producer_id"], lines[0]["producer_epoch"], lines[0]["sequence"]) == (4001, 2, 10)
    assert lines[1]["key"] is None and lines[1]["key_encoding"] is None
    assert base64.b64decode(lines[1]["value"]) == b"\xff\xfe" and lines[1]["value_encoding"] == "base64"
    assert lines[1]["headers"][0] == {
        "key": "bin",
        "value": base64.b64encode(b"\x00\x80").decode(),
        "encoding": "base64",
    }
    assert lines[1]["headers"][1] == {"key": "none", "value": None, "encoding": None}
    assert lines[1]["sequence"] == 11 and lines[1]["offset"] == 1
    json.dumps(lines)  # every line is JSON as it is


def _status(**changes: object) -> dict[str, object]:
    status: dict[str, object] = {
        "at_ms": 10_000,
        "link": {"name": "east-to-west", "source": "east", "target": "west"},
        "link_state": "active",
        "dr": {"reachable": True, "state": "mirroring", "epoch": 0, "primary": "east", "standby": "west"},
        "mirror": {
            "admin": "http://127.0.0.1:1",
            "reachable": True,
            "state": "running",
            "last_sync_ms": 9_000,
            "group_sync": {"groups": 2, "last_sync_ms": 8_000},
        },
        "source": {"name": "east", "reachable": True, "error": None},
        "target": {"name": "west", "reachable": True, "error": None},
        "rpo": {"records": 5, "bytes": 2048, "exact": True, "partitions": 2, "partitions_behind": 1},
        "partitions": [
            {
                "topic": "orders",
                "partition": 0,
                "state": "active",
                "source_end": 105,
                "source_end_live": True,
                "source_end_seen_ms": None,
                "mirrored_end": 100,
                "lag_records": 5,
                "lag_seconds": 0.5,
                "last_fetch_ms": 9_900,
                "rpo_records": 5,
                "rpo_bytes": 2048,
                "rpo_exact": True,
            }
        ],
    }
    status.update(changes)
    return status


def test_the_status_text_says_the_rpo_and_each_partition() -> None:
    text = render(_status())
    assert "link east-to-west  east -> west  link state: active" in text
    assert "RPO if you fail over now: 5 records, 2.0 KiB (exact); 1 of 2 partitions behind" in text
    assert "group offsets synced 2.0 s ago (2 groups)" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("orders")).split()
    assert row[:6] == ["orders", "0", "active", "105", "100", "5"]


def test_the_status_text_shows_a_lost_source_with_the_last_values_and_when() -> None:
    partition = dict(_status()["partitions"][0])  # type: ignore[index]
    partition.update(source_end_live=False, source_end_seen_ms=4_000, rpo_exact=False, state="source-unavailable")
    text = render(
        _status(
            link_state="source-unavailable",
            source={"name": "east", "reachable": False, "error": "connection refused"},
            rpo={"records": 5, "bytes": 2048, "exact": False, "partitions": 1, "partitions_behind": 1},
            partitions=[partition],
        )
    )
    assert "source east: UNREACHABLE (connection refused)" in text
    assert "105 (seen 6.0 s ago)" in text
    assert "NOT exact" in text and "5~" in text


class _Mirror:
    def __init__(self, original: Mapping[str, Any] | None = None) -> None:
        self.put: dict[str, Any] = {}
        self.original = dict(original or {})

    async def status(self) -> dict[str, Any]:
        return {"link": self.original}

    async def put_link(self, name: str, definition: Mapping[str, Any]) -> dict[str, Any]:
        self.put[name] = dict(definition)
        return {"state": "active"}


def test_the_reverse_link_carries_the_old_primarys_digest_file_to_the_mirror(tmp_path: Path) -> None:
    digest = tmp_path / "east-zk.digest"
    digest.write_text("strait:east-s3cret\n")
    east = Site("east", "10.0.0.1:9092", "10.0.0.1:2181/east", zookeeper_digest_file=digest)
    west = Site("west", "10.1.0.1:9092", "10.1.0.1:2181/west")
    topology = Topology(sites={"east": east, "west": west}, links={})
    for old, expected in [(east, str(digest)), (replace(east, zookeeper_digest_file=None), None)]:
        mirror = _Mirror()
        run = SimpleNamespace(
            state=SimpleNamespace(facts={}),
            topology=replace(topology, sites={"east": old, "west": west}),
            mirror=mirror,
        )
        trio.run(_start_reverse, cast(Run, run), "east-to-west-reverse", "west", "east")
        definition = mirror.put["east-to-west-reverse"]
        assert definition["target"].get("zookeeper_digest_file") == expected
        config = parse_link(definition, origin="the reverse link")  # what the mirror makes of it
        assert config.target.zookeeper == "10.0.0.1:2181/east"
        assert config.target.zookeeper_digest_file == expected


def test_the_reverse_link_reaches_each_site_as_the_original_link_did_roles_swapped(tmp_path: Path) -> None:
    files = {}
    for name in ("east-ca.pem", "west-ca.pem", "mirror.pw", "east-zk.digest", "west-zk.digest"):
        files[name] = tmp_path / name
        files[name].write_text("strait:x\n" if name.endswith("digest") else "x\n")
    east = Site("east", "10.0.0.1:9092", "10.0.0.1:2181/east")
    west = Site("west", "10.1.0.1:9092", "10.1.0.1:2181/west")
    sasl = {"mechanism": "SCRAM-SHA-512", "username": "mirror", "password_file": str(files["mirror.pw"])}
    original = {  # the forward link as the mirror reports it (LinkConfig.to_dict)
        "name": "east-to-west",
        "source": {"name": "east", "bootstrap": east.bootstrap, "zookeeper": east.zookeeper,
                   "zookeeper_digest_file": str(files["east-zk.digest"]),
                   "tls": {"ca": str(files["east-ca.pem"]), "cert": None, "key": None, "check_hostname": True},
                   "sasl": sasl},
        "target": {"name": "west", "bootstrap": west.bootstrap, "zookeeper": west.zookeeper,
                   "zookeeper_digest_file": str(files["west-zk.digest"]),
                   "tls": {"ca": str(files["west-ca.pem"]), "cert": None, "key": None, "check_hostname": True},
                   "sasl": sasl},
        "sync_acls": True,
        "sync_users": True,
    }  # fmt: skip
    mirror = _Mirror(original)
    run = SimpleNamespace(
        state=SimpleNamespace(facts={}), topology=Topology(sites={"east": east, "west": west}, links={}), mirror=mirror
    )
    trio.run(_start_reverse, cast(Run, run), "east-to-west-reverse", "west", "east")
    config = parse_link(mirror.put["east-to-west-reverse"], origin="the reverse link")
    assert (config.source.name, config.target.name) == ("west", "east")
    assert config.source.tls is not None and config.source.tls.ca == str(files["west-ca.pem"])
    assert config.target.tls is not None and config.target.tls.ca == str(files["east-ca.pem"])
    assert config.source.sasl == config.target.sasl and config.source.sasl is not None
    assert config.source.sasl.username == "mirror"
    # The users flow back from west's ZooKeeper to east's, each with its credential.
    assert config.sync_users and config.sync_acls
    assert (config.source.zookeeper, config.source.zookeeper_digest_file) == (
        west.zookeeper,
        str(files["west-zk.digest"]),
    )
    assert (config.target.zookeeper, config.target.zookeeper_digest_file) == (
        east.zookeeper,
        str(files["east-zk.digest"]),
    )
