"""What a link's security sync copies, its ledger's form, and the link keys that turn it on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from mirror import ConfigError, MirrorError, parse_links
from mirror._config import LinkConfig
from mirror._mm2 import remote_topic
from mirror._security_sync import FileLedger, Owned, copied_binding
from node.security._acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)


def link(**keys: Any) -> LinkConfig:
    table = {
        "name": "east-to-west",
        "source": {"name": "east", "bootstrap": "127.0.0.1:9092"},
        "target": {"name": "west", "bootstrap": "127.0.0.1:9093"},
        "topics": {"exclude": ["private.*"]},
        "groups": {"include": ["app-.*"]},
        **keys,
    }
    (config,) = parse_links({"link": [table]})
    return config


def binding(
    rtype: ResourceType,
    name: str,
    operation: AclOperation = AclOperation.READ,
    ptype: PatternType = PatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, ptype), AccessControlEntry("User:alice", "*", operation, permission))


def copy(b: AclBinding, *, mm2: bool = False) -> AclBinding | None:
    return copied_binding(b, link(), mm2=mm2, target_topic=lambda t: remote_topic("east", t) if mm2 else t)


def test_offset_preserving_links_copy_the_acls_of_what_they_mirror_as_they_are() -> None:
    for kept in (
        binding(ResourceType.TOPIC, "orders"),
        binding(ResourceType.TOPIC, "*", AclOperation.ALL, permission=AclPermissionType.DENY),
        binding(ResourceType.TOPIC, "priv", AclOperation.WRITE, PatternType.PREFIXED),  # may cover mirrored topics
        binding(ResourceType.GROUP, "app-billing"),
        binding(ResourceType.GROUP, "app-", ptype=PatternType.PREFIXED),
        binding(ResourceType.TRANSACTIONAL_ID, "tx-1", AclOperation.WRITE),
    ):
        assert copy(kept) == kept
    for dropped in (
        binding(ResourceType.TOPIC, "private-ledger"),  # excluded by the link
        binding(ResourceType.TOPIC, "__consumer_offsets"),  # internal: never mirrored
        binding(ResourceType.GROUP, "ops"),  # not a mirrored group
        binding(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION),  # the site's own
        binding(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CREATE),
    ):
        assert copy(dropped) is None, dropped


def test_mm2_links_copy_literal_topic_acls_renamed_read_only_as_mirrormaker_2_does() -> None:
    assert copy(binding(ResourceType.TOPIC, "orders", AclOperation.ALL), mm2=True) == binding(
        ResourceType.TOPIC, "east.orders", AclOperation.READ
    )
    assert copy(binding(ResourceType.TOPIC, "orders", AclOperation.DESCRIBE), mm2=True) == binding(
        ResourceType.TOPIC, "east.orders", AclOperation.DESCRIBE
    )
    assert copy(binding(ResourceType.TOPIC, "orders", AclOperation.WRITE), mm2=True) is None
    assert copy(binding(ResourceType.TOPIC, "ord", ptype=PatternType.PREFIXED), mm2=True) is None
    assert copy(binding(ResourceType.TOPIC, "*"), mm2=True) is None
    assert copy(binding(ResourceType.TRANSACTIONAL_ID, "tx-1", AclOperation.WRITE), mm2=True) is None
    assert copy(binding(ResourceType.GROUP, "app-billing"), mm2=True) == binding(ResourceType.GROUP, "app-billing")


def test_the_ledger_round_trips_through_its_file_and_refuses_a_foreign_one(tmp_path: Path) -> None:
    owned = Owned(
        frozenset(
            {binding(ResourceType.TOPIC, "orders"), binding(ResourceType.GROUP, "app-", ptype=PatternType.PREFIXED)}
        ),
        frozenset({("alice", "SCRAM-SHA-256")}),
    )
    ledger = FileLedger(tmp_path / "security-east-to-west.json")

    async def round_trip() -> Owned:
        assert await ledger.load() == Owned()  # no file yet: nothing owned
        await ledger.save(owned)
        return await ledger.load()

    assert trio.run(round_trip) == owned
    assert (tmp_path / "security-east-to-west.json").stat().st_mode & 0o777 == 0o600
    (tmp_path / "security-east-to-west.json").write_text(json.dumps({"version": 7}))
    with pytest.raises(MirrorError, match="not a version 1 security ledger"):
        trio.run(ledger.load)


def test_the_link_keys_turn_the_sync_on_and_off() -> None:
    config = link()
    assert (config.sync_acls, config.sync_users) == (True, False)
    assert config.to_dict()["sync_acls"] is True
    with pytest.raises(ConfigError, match="sync_acls: must be true or false, not 'yes'"):
        link(sync_acls="yes")
    with pytest.raises(ConfigError, match=r"sync_users: needs source.zookeeper and target.zookeeper"):
        link(sync_users=True)
    with pytest.raises(ConfigError, match=r"sync_users: needs source.zookeeper \("):
        link(
            sync_users=True,
            target={"name": "west", "bootstrap": "127.0.0.1:9093", "zookeeper": "127.0.0.1:2181/west"},
        )
    both = link(
        sync_users=True,
        source={"name": "east", "bootstrap": "127.0.0.1:9092", "zookeeper": "127.0.0.1:2181/east"},
        target={"name": "west", "bootstrap": "127.0.0.1:9093", "zookeeper": "127.0.0.1:2181/west"},
    )
    assert both.sync_users
    assert parse_links({"link": [both.to_dict()]}) == [both]
