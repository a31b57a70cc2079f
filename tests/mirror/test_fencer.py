"""The fencer's logic against a fake old source (unit): what it fences, when, and what it reports."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from mirror import LinkConfig, MirrorError, SiteRef
from mirror._fencer import FENCE_KEY, PENDING_RETRY_S, Fencer, check_fence_text, default_fence_text, off_status
from node.client import ClientError
from node.protocol import ErrorCode

TEXT = "site east was failed over to west (link east-to-west); produce to west: 127.0.0.1:9192"


class FakeSource:
    """Topics and their config overrides; ``down`` makes every call fail like an unreachable site."""

    def __init__(self, topics: dict[str, dict[str, str]]) -> None:
        self.topics = topics
        self.down = False
        self.refuse: dict[str, ClientError] = {}  # topic -> the error altering its configs answers
        self.altered: list[tuple[str, dict[str, str], list[str]]] = []

    def _reach(self) -> None:
        if self.down:
            raise ClientError("site east: cannot connect to 127.0.0.1:9092: Connection refused")

    async def list_topics(self) -> list[str]:
        self._reach()
        return sorted(self.topics)

    async def topic_overrides(self, topics: list[str]) -> dict[str, dict[str, str] | ClientError]:
        self._reach()
        return {t: dict(self.topics[t]) for t in topics if t in self.topics}

    async def alter_topic_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> None:
        self._reach()
        if name in self.refuse:
            raise self.refuse[name]
        self.altered.append((name, dict(set_), list(delete)))
        self.topics[name].update(set_)


def selects(topic: str) -> bool:
    return not topic.startswith("__") and topic.startswith("orders")


def fencer(source: FakeSource, contacts: list[bool] | None = None, now: list[float] | None = None) -> Fencer:
    clock = now if now is not None else [1000.0]
    return Fencer(
        "east-to-west",
        source,
        selects,
        TEXT,
        interval_s=5.0,
        on_contact=None if contacts is None else contacts.append,
        clock=lambda: clock[0],
    )


def test_fence_text_is_one_line_of_1_to_1024_characters() -> None:
    assert check_fence_text(TEXT) == TEXT
    assert check_fence_text("x" * 1024) == "x" * 1024
    with pytest.raises(MirrorError, match=r"^fence: must be 1-1024 characters, got 0$"):
        check_fence_text("")
    with pytest.raises(MirrorError, match=r"^fence: must be 1-1024 characters, got 1025$"):
        check_fence_text("x" * 1025)
    with pytest.raises(MirrorError, match=r"^fence: control character '\\n' at position 3: the text must be one line$"):
        check_fence_text("abc\ndef")
    with pytest.raises(MirrorError, match=r"^body\.fence: must be a string .*, not 42$"):
        check_fence_text(42, "body.fence")


def test_the_default_fence_text_names_both_sites_the_link_the_time_and_where_to_produce() -> None:
    link = LinkConfig("east-to-west", SiteRef("east", "127.0.0.1:9092"), SiteRef("west", "127.0.0.1:9192"))
    assert default_fence_text(link, 1_790_000_000_000) == (
        "site east was failed over to west (link east-to-west, 2026-09-21T14:13:20Z); produce to west: 127.0.0.1:9192"
    )
    assert check_fence_text(default_fence_text(link, 0))
    assert off_status() == {"state": "off", "topics": [], "last_error": None, "fenced_ms": None}


def test_a_fencer_waits_for_the_source_then_fences_every_selected_topic_and_nothing_else() -> None:
    source = FakeSource({"orders": {}, "orders.eu": {"retention.ms": "1000"}, "audit": {}, "__consumer_offsets": {}})
    source.down = True
    contacts: list[bool] = []
    now = [1000.0]
    f = fencer(source, contacts, now)

    trio.run(f.check_once)
    assert f.status() == {
        "state": "pending",
        "topics": [],
        "last_error": "cannot read the topics of the old source: site east: cannot connect to 127.0.0.1:9092: "
        "Connection refused",
        "fenced_ms": None,
    }
    assert contacts == [False] and source.altered == []

    source.down = False
    now[0] = 1002.5
    trio.run(f.check_once)
    assert f.status() == {
        "state": "fenced",
        "topics": ["orders", "orders.eu"],
        "last_error": None,
        "fenced_ms": 1002500,
    }
    assert source.altered == [("orders", {FENCE_KEY: TEXT}, []), ("orders.eu", {FENCE_KEY: TEXT}, [])]
    assert source.topics["orders.eu"] == {"retention.ms": "1000", FENCE_KEY: TEXT}  # only the fence key is set
    assert source.topics["audit"] == {} and source.topics["__consumer_offsets"] == {}
    assert contacts == [False, True]

    # Fenced topics are not altered again.
    trio.run(f.check_once)
    assert len(source.altered) == 2 and f.state == "fenced"


def test_a_fencer_keeps_checking_new_topics_and_removed_fences() -> None:
    source = FakeSource({"orders": {}})
    now = [1000.0]
    f = fencer(source, now=now)
    trio.run(f.check_once)
    assert f.status()["fenced_ms"] == 1_000_000

    source.topics["orders.new"] = {}  # created on the old source since
    del source.topics["orders"][FENCE_KEY]  # someone lifted the fence
    now[0] = 1010.0
    trio.run(f.check_once)
    assert source.altered[1:] == [("orders", {FENCE_KEY: TEXT}, []), ("orders.new", {FENCE_KEY: TEXT}, [])]
    # fenced_ms says when the fence first held everywhere.
    assert f.status() == {
        "state": "fenced",
        "topics": ["orders", "orders.new"],
        "last_error": None,
        "fenced_ms": 1_000_000,
    }


def test_a_fence_set_by_someone_else_counts_and_is_left_as_it_is() -> None:
    source = FakeSource({"orders": {FENCE_KEY: "fenced by the operator"}, "orders.eu": {}})
    f = fencer(source)
    trio.run(f.check_once)
    assert source.topics["orders"][FENCE_KEY] == "fenced by the operator"
    assert source.altered == [("orders.eu", {FENCE_KEY: TEXT}, [])]
    assert f.status()["topics"] == ["orders", "orders.eu"] and f.state == "fenced"


def test_a_topic_that_cannot_be_fenced_keeps_the_fence_pending_and_is_named() -> None:
    source = FakeSource({"orders": {}, "orders.eu": {}})
    source.refuse["orders.eu"] = ClientError.from_code(
        ErrorCode.INVALID_CONFIG,
        "altering the configs of 'orders.eu'",
        "unknown topic config 'strait.fenced'",
    )
    f = fencer(source)
    trio.run(f.check_once)
    assert f.status() == {
        "state": "pending",
        "topics": ["orders"],
        "last_error": "could not fence 1 topic(s): orders.eu: altering the configs of 'orders.eu': INVALID_CONFIG: "
        "unknown topic config 'strait.fenced'",
        "fenced_ms": None,
    }
    del source.refuse["orders.eu"]
    trio.run(f.check_once)
    assert f.state == "fenced" and f.topics == ["orders", "orders.eu"] and f.last_error is None


def test_a_fenced_source_that_becomes_unreachable_stays_fenced_and_says_why_it_cannot_check() -> None:
    source = FakeSource({"orders": {}})
    f = fencer(source)
    trio.run(f.check_once)
    source.down = True
    trio.run(f.check_once)
    status = f.status()
    assert (status["state"], status["topics"]) == ("fenced", ["orders"])
    assert status["last_error"] is not None and "Connection refused" in status["last_error"]


def test_a_fencer_retries_every_second_while_pending_and_every_interval_once_fenced() -> None:
    source = FakeSource({"orders": {}})
    source.down = True
    f = fencer(source)
    checks_at: list[float] = []
    original = f.check_once

    async def check_once() -> None:
        checks_at.append(trio.current_time())
        if len(checks_at) == 3:
            source.down = False
        await original()

    f.check_once = check_once  # type: ignore[method-assign]

    async def main() -> None:
        with trio.move_on_after(13):
            await f.run()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    # Down at 0 and 1; fenced at 2; then every 5 s.
    assert checks_at == [0.0, PENDING_RETRY_S, 2 * PENDING_RETRY_S, 7.0, 12.0]
