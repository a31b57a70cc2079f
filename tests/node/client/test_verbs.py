"""node.client's admin, group and data verbs over a fake Route: what they send and how they read answers."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest
import trio
import trio.testing

from node.client import AdminClient, ClientError, GroupAdmin, NodeConnection, list_offsets
from node.client._site import MakeBody, PartitionsBody
from node.protocol import ApiKey, ErrorCode, Struct


class FakeRoute:
    """Answers each request with the next queued response; records (api key, version, body)."""

    def __init__(self, *, version: int = 4, brokers: int = 0, where: str = " on site test") -> None:
        self.version = version
        self.brokers = brokers
        self.where = where
        self.timeout = 5.0
        self.sent: list[tuple[ApiKey, int, dict[str, Any]]] = []
        self.answers: list[Any] = []

    def known_brokers(self) -> int:
        return self.brokers

    def _answer(self, api_key: ApiKey, body: dict[str, Any]) -> Any:
        self.sent.append((api_key, self.version, body))
        return self.answers.pop(0)

    async def on_admin(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> Struct:
        version = min(self.version, highest)
        return self._answer(api_key, make_body(version))  # type: ignore[no-any-return]

    async def on_each_broker(self, api_key: ApiKey, highest: int, make_body: MakeBody) -> list[tuple[int, Struct]]:
        return [(1, self._answer(api_key, make_body(highest))), (2, self._answer(api_key, make_body(highest)))]

    async def on_leaders(
        self, topic: str, partitions: list[int], api_key: ApiKey, highest: int, make_body: PartitionsBody
    ) -> list[Struct]:
        return [self._answer(api_key, make_body(min(self.version, highest), partitions))]

    async def coordinator(self, node_id: int, address: str) -> NodeConnection:
        raise AssertionError("not used here")


def created(error_code: int = 0) -> NS:
    return NS(topics=[NS(error_code=error_code, error_message=None)])


def test_create_topic_asks_for_the_default_replication_from_v4() -> None:
    route = FakeRoute(version=4, brokers=5)
    route.answers.append(created())
    assert trio.run(AdminClient(route).create_topic, "t", 3) == -1
    (api_key, _, body) = route.sent[0]
    assert api_key == ApiKey.CREATE_TOPICS
    assert body["topics"][0]["replication_factor"] == -1 and body["timeout_ms"] == 5000


def test_create_topic_below_v4_asks_for_at_most_three_known_brokers() -> None:
    route = FakeRoute(version=3, brokers=5)
    route.answers.append(created())
    assert trio.run(AdminClient(route).create_topic, "t", 3) == 3
    assert route.sent[0][2]["topics"][0]["replication_factor"] == 3


def test_create_topic_raises_the_code_and_says_where() -> None:
    route = FakeRoute()
    route.answers.append(created(ErrorCode.TOPIC_ALREADY_EXISTS))
    with pytest.raises(ClientError, match="creating topic 't' on site test: TOPIC_ALREADY_EXISTS") as err:
        trio.run(AdminClient(route).create_topic, "t", 1)
    assert err.value.code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_topic_overrides_keep_only_the_topics_own_configs_or_the_error() -> None:
    route = FakeRoute()
    route.answers.append(
        NS(
            results=[
                NS(
                    error_code=0,
                    error_message=None,
                    resource_name="a",
                    configs=[
                        NS(name="retention.ms", value="1000", config_source=1),
                        NS(name="segment.bytes", value="10", config_source=5),
                    ],
                ),
                NS(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=None, resource_name="b", configs=[]),
            ]
        )
    )
    found = trio.run(AdminClient(route).topic_overrides, ["a", "b"])
    assert found["a"] == {"retention.ms": "1000"}
    assert isinstance(found["b"], ClientError) and found["b"].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def offsets_answer(*partitions: tuple[int, int, int]) -> NS:
    return NS(
        topics=[
            NS(name="t", partitions=[NS(partition_index=p, error_code=code, offset=o) for p, code, o in partitions])
        ]
    )


def test_list_offsets_strict_raises_on_a_partition_error_or_a_missing_partition() -> None:
    route = FakeRoute(version=5)
    route.answers.append(offsets_answer((0, 0, 7), (1, 0, 9)))
    assert trio.run(list_offsets, route, "t", [0, 1], -1) == {0: 7, 1: 9}
    assert route.sent[0][2]["isolation_level"] == 0
    route.answers.append(offsets_answer((0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1), (1, 0, 9)))
    with pytest.raises(ClientError, match="ListOffsets t-0 on site test: NOT_LEADER_OR_FOLLOWER"):
        trio.run(list_offsets, route, "t", [0, 1], -1)
    route.answers.append(offsets_answer((0, 0, 7)))
    with pytest.raises(ClientError, match=r"answered nothing for t partitions \[1\]"):
        trio.run(list_offsets, route, "t", [0, 1], -1)


def test_list_offsets_lenient_gives_minus_one() -> None:
    route = FakeRoute(version=5)
    route.answers.append(offsets_answer((0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)))

    async def main() -> dict[int, int]:
        return await list_offsets(route, "t", [0, 1], -2, strict=False)

    assert trio.run(main) == {0: -1, 1: -1}


def test_list_groups_asks_every_broker_and_merges() -> None:
    route = FakeRoute()
    route.answers += [
        NS(error_code=0, groups=[NS(group_id="b", protocol_type="consumer"), NS(group_id="a", protocol_type="")]),
        NS(error_code=0, groups=[NS(group_id="b", protocol_type="consumer"), NS(group_id="c", protocol_type="x")]),
    ]
    groups = trio.run(GroupAdmin(AdminClient(route)).list_groups)
    assert groups == [("a", ""), ("b", "consumer"), ("c", "x")]


def test_list_groups_names_the_broker_that_failed() -> None:
    route = FakeRoute()
    route.answers += [NS(error_code=0, groups=[]), NS(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, groups=[])]
    with pytest.raises(ClientError, match="listing groups on broker 2 on site test: COORDINATOR_NOT_AVAILABLE"):
        trio.run(GroupAdmin(AdminClient(route)).list_groups)


def test_list_offsets_asks_a_lagging_leader_again_for_only_those_partitions() -> None:
    route = FakeRoute(version=5)
    route.answers.append(offsets_answer((0, ErrorCode.OFFSET_NOT_AVAILABLE, -1), (1, 0, 9)))
    route.answers.append(offsets_answer((0, ErrorCode.OFFSET_NOT_AVAILABLE, -1)))
    route.answers.append(offsets_answer((0, 0, 1079)))
    assert trio.run(list_offsets, route, "t", [0, 1], -1) == {0: 1079, 1: 9}
    asked = [[p["partition_index"] for p in sent[2]["topics"][0]["partitions"]] for sent in route.sent]
    assert asked == [[0, 1], [0], [0]]


def test_list_offsets_gives_up_on_a_leader_that_stays_lagging() -> None:
    route = FakeRoute(version=5)
    for _ in range(200):
        route.answers.append(offsets_answer((0, ErrorCode.OFFSET_NOT_AVAILABLE, -1)))

    async def main() -> None:
        with trio.move_on_after(60):  # the fake clock below makes 5 s pass at once
            await list_offsets(route, "t", [0], -1)

    with pytest.raises(ClientError, match="ListOffsets t-0 on site test: OFFSET_NOT_AVAILABLE"):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert 2 <= len(route.sent) < 200
