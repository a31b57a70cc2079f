"""Links: the config file (unit) and the link runner between two real sites (integration).

The runner is driven as the mirror service will drive it: in its own trio run (a thread here),
with ``pause``/``resume``/``status`` called into that run.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic

from mirror import LINK_KEY, ConfigError, LinkConfig, LinkRunner, load_links, parse_links
from tests.mirror.conftest import Site
from tests.node.harness import wait_for

LINK = "east-to-west"
T = TypeVar("T")

# -- the config file (unit) --------------------------------------------------------------------------

FULL = """
[[link]]
name = "east-to-west"
mode = "offset-preserving"
sync_interval_s = 2.5
group_sync_interval_s = 7
source = { name = "east", bootstrap = "127.0.0.1:9092, 127.0.0.1:9093" }
target = { name = "west", bootstrap = ["127.0.0.1:9192", "127.0.0.1:9193"] }
topics = { include = ["orders.*", "payments"], exclude = ["orders-private"] }
groups = { include = ["billing-.*"] }
fetch_max_bytes = 1048576
pipeline_fetches = 4

[[link]]
name = "west-to-east"
source = { name = "west", bootstrap = "127.0.0.1:9192" }
target = { name = "east", bootstrap = "127.0.0.1:9092" }
"""

MINIMAL = """
[[link]]
name = "l"
source = { name = "east", bootstrap = "127.0.0.1:9092" }
target = { name = "west", bootstrap = "127.0.0.1:9192" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "links.toml"
    path.write_text(text)
    return path


def test_a_link_file_gives_every_field_and_the_defaults(tmp_path: Path) -> None:
    first, second = load_links(write(tmp_path, FULL))
    assert first.name == "east-to-west"
    assert (first.source.name, first.source.bootstrap) == ("east", "127.0.0.1:9092,127.0.0.1:9093")
    assert (first.target.name, first.target.bootstrap) == ("west", "127.0.0.1:9192,127.0.0.1:9193")
    assert (first.mode, first.sync_interval_s, first.group_sync_interval_s) == ("offset-preserving", 2.5, 7.0)
    assert first.mirrors_group("billing-eu") and not first.mirrors_group("audit")
    assert (first.fetch_max_bytes, first.pipeline_fetches) == (1024 * 1024, 4)
    # The defaults: every topic and group, offset-preserving, 5 s.
    assert (second.mode, second.sync_interval_s, second.group_sync_interval_s) == ("offset-preserving", 5.0, 5.0)
    assert (second.fetch_max_bytes, second.pipeline_fetches) == (8 * 1024 * 1024, 4)
    assert second.to_dict()["fetch_max_bytes"] == 8 * 1024 * 1024 and second.to_dict()["pipeline_fetches"] == 4
    assert second.mirrors_topic("anything") and second.mirrors_group("anything")
    assert json.loads(json.dumps(first.to_dict()))["topics"] == {
        "include": ["orders.*", "payments"],
        "exclude": ["orders-private"],
    }


def test_patterns_match_whole_names_and_internal_topics_are_never_mirrored(tmp_path: Path) -> None:
    link, _ = load_links(write(tmp_path, FULL))
    assert link.mirrors_topic("orders") and link.mirrors_topic("orders.eu") and link.mirrors_topic("payments")
    assert not link.mirrors_topic("orders-private")  # excluded
    assert not link.mirrors_topic("payments-v2")  # "payments" must match the whole name
    assert not link.mirrors_topic("old-orders")
    (everything,) = parse_links(
        {
            "link": [
                {
                    "name": "all",
                    "source": {"name": "a", "bootstrap": "h:1"},
                    "target": {"name": "b", "bootstrap": "h:2"},
                    "topics": {"include": ["__.*", ".*"]},
                }
            ]
        }
    )
    assert everything.mirrors_topic("orders")
    assert not everything.mirrors_topic("__consumer_offsets")
    assert not everything.mirrors_topic("__strait_internal")


def test_an_unreachable_source_is_shown_in_status_and_retried() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    text = MINIMAL.replace("127.0.0.1:9092", f"127.0.0.1:{port}") + "sync_interval_s = 0.2\n"
    (link,) = parse_links(tomllib.loads(text))
    runner = LinkRunner(link, request_timeout_s=2)

    async def main() -> None:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(runner.run)
                status = runner.status()
                assert status["state"] == "running"
                assert "site east: no broker reachable" in status["last_sync_error"]
                while runner.status()["syncs"] < 3:
                    await trio.sleep(0.05)
                nursery.cancel_scope.cancel()

    trio.run(main)
    assert runner.status()["state"] == "stopped"


def test_an_empty_file_has_no_links(tmp_path: Path) -> None:
    assert load_links(write(tmp_path, "# no links yet\n")) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MINIMAL + "sync_interval = 5\n", "link 'l': unknown key 'sync_interval' (did you mean 'sync_interval_s'?)"),
        (
            MINIMAL.replace('bootstrap = "127.0.0.1:9092"', 'bootstap = "127.0.0.1:9092"'),
            "link 'l': unknown key 'source.bootstap' (did you mean 'source.bootstrap'?)",
        ),
        (MINIMAL + 'topics = { include = ["orders("] }\n', "link 'l': topics.include[0]: 'orders(' is not a valid"),
        (MINIMAL + 'groups = { exclude = "x" }\n', "link 'l': groups.exclude: must be a list of regular expressions"),
        (MINIMAL + 'topics = { includes = ["x"] }\n', "unknown key 'topics.includes' (did you mean 'topics.include'?)"),
        (MINIMAL + "sync_interval_s = 11\n", "link 'l': sync_interval_s: 11.0 is above 10"),
        (MINIMAL + "sync_interval_s = 0\n", "link 'l': sync_interval_s: must be a number of seconds above 0"),
        (MINIMAL + "group_sync_interval_s = true\n", "link 'l': group_sync_interval_s: must be a number"),
        (MINIMAL + 'mode = "fast"\n', "link 'l': mode: 'fast' is not one of 'offset-preserving', 'mm2'"),
        (MINIMAL + "fetch_max_bytes = 1000\n", "link 'l': fetch_max_bytes: 1000 is outside 65536..67108864 (bytes)"),
        (
            MINIMAL + "fetch_max_bytes = 1e6\n",
            "link 'l': fetch_max_bytes: must be a whole number of bytes, not 1000000.0",
        ),
        (MINIMAL + "pipeline_fetches = 0\n", "link 'l': pipeline_fetches: 0 is outside 1..16 (fetched chunks)"),
        (MINIMAL + "pipeline_fetches = true\n", "link 'l': pipeline_fetches: must be a whole number of fetched chunks"),
        (MINIMAL.replace('name = "l"', 'name = "east to west"'), "link 'east to west': name: 'east to west' must be"),
        (MINIMAL.replace('name = "l"\n', ""), "link #1: name: missing"),
        ('[[link]]\nname = "l"\nsource = { name = "east", bootstrap = "h:1" }\n', "link 'l': target: missing"),
        (MINIMAL.replace("127.0.0.1:9192", "west-host"), "link 'l': target.bootstrap: 'west-host' is not host:port"),
        (MINIMAL.replace('name = "west"', 'name = "east"'), "link 'l': target.name: the source and the target"),
        (MINIMAL + MINIMAL, "link 'l': name: defined more than once"),
        (MINIMAL.replace("[[link]]", "[[links]]"), "top level: unknown key 'links' (did you mean 'link'?)"),
        ('link = "x"\n', "'link' must be an array of tables"),
        ("[[link]\n", "not valid TOML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_link_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_links(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert expected in message, message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere\.toml: cannot read the link configuration"):
        load_links(tmp_path / "nowhere.toml")


# -- two real sites (integration) ----------------------------------------------------------------------


class RunningLink:
    """A LinkRunner in its own trio run on a thread; ``call`` runs a function inside that run."""

    def __init__(self, runner: LinkRunner) -> None:
        self.runner = runner
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"link {runner.config.name}", daemon=True)

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            await nursery.start(self.runner.run)
            self._ready.set()

    def call(self, fn: Callable[[], T]) -> T:
        return trio.from_thread.run_sync(fn, trio_token=self._token)

    def status(self) -> dict[str, Any]:
        status = self.call(self.runner.status)
        assert json.loads(json.dumps(status)) == status  # JSON-able as it is
        return status

    def __enter__(self) -> RunningLink:
        self._thread.start()
        assert self._ready.wait(60), "the link runner did not finish its first pass within 60 s"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._thread.is_alive() and self._scope is not None:
            trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        self._thread.join(30)
        assert not self._thread.is_alive(), "the link runner did not stop within 30 s"
        if kind is None and self._error is not None:
            raise self._error


def link_config(east: Site, west: Site, tmp_path: Path, extra: str = "") -> LinkConfig:
    """The link of these tests, through a real file: orders.* but not orders-private, east -> west."""
    text = f"""
[[link]]
name = "{LINK}"
source = {{ name = "east", bootstrap = "{east.bootstrap}" }}
target = {{ name = "west", bootstrap = "{west.bootstrap}" }}
topics = {{ include = ["orders.*"], exclude = ["orders-private"] }}
{extra}
"""
    (link,) = load_links(write(tmp_path, text))
    return link


def admin(site: Site) -> AdminClient:
    return AdminClient({"bootstrap.servers": site.bootstrap})


def create(site: Site, name: str, partitions: int, **configs: str) -> None:
    client = admin(site)  # held until the result: a dropped client cancels its requests
    client.create_topics([NewTopic(name, partitions, 3, config=configs)])[name].result(30)


def topic_names(site: Site) -> set[str]:
    client = admin(site)
    return set(client.list_topics(timeout=10).topics)


def partition_count(site: Site, topic: str) -> int:
    client = admin(site)
    # All topics: asking Metadata for one topic by name would auto-create it on the site.
    meta = client.list_topics(timeout=10).topics.get(topic)
    return 0 if meta is None or meta.error is not None else len(meta.partitions)


def overrides(site: Site, topic: str) -> dict[str, str]:
    """The topic's own config overrides (DescribeConfigs source DYNAMIC_TOPIC_CONFIG)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(site)
    configs = client.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in configs.items() if entry.source == 1}


def alter(site: Site, topic: str, set_: dict[str, str], delete: tuple[str, ...] = ()) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    client = admin(site)
    client.incremental_alter_configs([resource])[resource].result(30)


def produce(site: Site, topic: str, n: int, *, partitions: list[int] | None = None, tag: str = "") -> None:
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        kwargs: dict[str, Any] = {} if partitions is None else {"partition": partitions[i % len(partitions)]}
        producer.produce(
            topic, key=f"k{i % 11}".encode(), value=f"{tag}{i}".encode(), headers=[("i", b"%d" % i)], **kwargs
        )
        if i % 100 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


Record = tuple[int, int, bytes | None, bytes | None, object, int]


def ends(site: Site, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": f"ends-{time.monotonic_ns()}"})
    try:
        count = partition_count(site, topic)
        consumer.list_topics(topic, timeout=10)  # metadata first, else UNKNOWN_PARTITION under load
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(count)}
    finally:
        consumer.close()


def read(site: Site, topic: str) -> list[Record]:
    """Every record of every partition: (partition, offset, key, value, headers, timestamp), sorted."""
    want = ends(site, topic)
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": f"r-{time.monotonic_ns()}"})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in want])
        out: list[Record] = []
        deadline = time.monotonic() + 60
        while len(out) < sum(want.values()) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp()[1]))
        return sorted(out)
    finally:
        consumer.close()


def wait_mirrored(east: Site, west: Site, topic: str, *, timeout: float = 30) -> list[Record]:
    """Wait until west holds exactly east's records of ``topic``, at the same partitions and offsets."""
    expected = read(east, topic)
    assert expected, f"nothing produced to {topic} on east"
    wait_for(f"{topic} mirrored to west", lambda: ends(west, topic) == ends(east, topic), timeout=timeout)
    assert read(west, topic) == expected
    return expected


@pytest.mark.integration
def test_a_link_mirrors_selected_topics_with_their_partitions_and_configs(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    configs = {"retention.ms": "86400000", "cleanup.policy": "delete", "max.message.bytes": "2097152"}
    create(east, "orders.eu", 3, **configs)
    create(east, "orders-private", 1)
    create(east, "payments", 1)
    produce(east, "orders.eu", 300, tag="eu-")
    link = link_config(east, west, tmp_path)  # the default sync interval: 5 s
    assert link.sync_interval_s == 5.0
    runner = LinkRunner(link, fetch_max_wait_ms=100)
    with RunningLink(runner) as running:
        # The first pass created the matching topic before run() reported started (west's other
        # nodes learn of it through ZooKeeper a moment later).
        assert sorted(running.status()["topics"]) == ["orders.eu"]
        wait_for("orders.eu on west", lambda: partition_count(west, "orders.eu") == 3, timeout=10)
        assert overrides(west, "orders.eu") == configs | {LINK_KEY: LINK}
        wait_mirrored(east, west, "orders.eu")

        # Topics created while the link runs: the matching one is mirrored within 10 s.
        created = time.monotonic()
        create(east, "orders.us", 2, **{"retention.ms": "3600000"})
        create(east, "inventory", 1)
        wait_for("orders.us on west", lambda: partition_count(west, "orders.us") == 2, timeout=10)
        assert time.monotonic() - created <= 10
        assert overrides(west, "orders.us") == {"retention.ms": "3600000", LINK_KEY: LINK}
        produce(east, "orders.us", 200, tag="us-")
        wait_mirrored(east, west, "orders.us")

        # New partitions on the source: added on the target within 10 s and copied.
        east_admin = admin(east)
        east_admin.create_partitions([NewPartitions("orders.eu", 5)])["orders.eu"].result(30)
        wait_for("orders.eu grown on west", lambda: partition_count(west, "orders.eu") == 5, timeout=10)
        produce(east, "orders.eu", 100, partitions=[3, 4], tag="new-")
        records = wait_mirrored(east, west, "orders.eu")
        assert {r[0] for r in records} == {0, 1, 2, 3, 4}

        # Config changes on the source are followed (set and removed); the link key stays.
        alter(east, "orders.eu", {"retention.ms": "172800000", "segment.ms": "600000"}, delete=("max.message.bytes",))
        expected = {
            "retention.ms": "172800000",
            "cleanup.policy": "delete",
            "segment.ms": "600000",
            LINK_KEY: LINK,
        }
        wait_for("orders.eu configs followed", lambda: overrides(west, "orders.eu") == expected, timeout=10)

        status = running.status()
        assert status["state"] == "running" and status["conflicts"] == []
        assert status["last_sync_error"] is None
        assert sorted(status["topics"]) == ["orders.eu", "orders.us"]
        eu = status["topics"]["orders.eu"]
        assert (eu["source_partitions"], eu["target_partitions"], eu["problem"]) == (5, 5, None)
        east_ends = ends(east, "orders.eu")
        for p in eu["partitions"]:
            assert p["state"] == "copying" and p["gaps"] == [] and p["last_error"] is None
            assert p["mirrored_offset"] == east_ends[p["partition"]]
        assert sum(p["records_copied"] for p in eu["partitions"]) == 400
        assert status["totals"]["records_copied"] == 600 and status["totals"]["bytes_copied"] > 0

        # A source topic deleted: its copiers stop, the mirror keeps its data.
        east_admin.delete_topics(["orders.us"])["orders.us"].result(30)
        wait_for("orders.us dropped from the link", lambda: "orders.us" not in running.status()["topics"], timeout=10)
        assert sum(ends(west, "orders.us").values()) == 200
        assert overrides(west, "orders.us")[LINK_KEY] == LINK

    on_west = topic_names(west)
    assert {"orders.eu", "orders.us"} <= on_west
    assert not {"orders-private", "payments", "inventory"} & on_west


@pytest.mark.integration
def test_a_target_topic_that_is_not_this_links_mirror_is_left_alone(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    create(west, "orders.local", 1, **{"retention.ms": "60000"})
    produce(west, "orders.local", 10, tag="west-")
    create(west, "orders.theirs", 1, **{LINK_KEY: "another-link"})
    for name in ("orders.local", "orders.theirs", "orders.ok"):
        create(east, name, 2, **{"retention.ms": "3600000"})
        produce(east, name, 50)
    west_local = read(west, "orders.local")
    with RunningLink(
        LinkRunner(link_config(east, west, tmp_path, "sync_interval_s = 1"), fetch_max_wait_ms=100)
    ) as running:
        wait_mirrored(east, west, "orders.ok")
        passes = running.status()["syncs"]  # a few more passes: none of them may touch the two other topics
        wait_for("two more sync passes", lambda: running.status()["syncs"] >= passes + 2, timeout=30)
        status = running.status()
    assert sorted(status["topics"]) == ["orders.ok"]
    conflicts = {c["topic"]: c["reason"] for c in status["conflicts"]}
    assert conflicts == {
        "orders.local": (
            "topic 'orders.local' exists on site west and it is not a mirror topic: the link leaves it alone"
        ),
        "orders.theirs": (
            "topic 'orders.theirs' exists on site west and it is a mirror of link 'another-link': "
            "the link leaves it alone"
        ),
    }
    assert partition_count(west, "orders.local") == 1
    assert overrides(west, "orders.local") == {"retention.ms": "60000"}
    assert read(west, "orders.local") == west_local
    assert partition_count(west, "orders.theirs") == 1
    assert overrides(west, "orders.theirs") == {LINK_KEY: "another-link"}
    assert sum(ends(west, "orders.theirs").values()) == 0


@pytest.mark.integration
def test_pause_stops_copying_and_resume_catches_up(two_sites: tuple[Site, Site], tmp_path: Path) -> None:
    east, west = two_sites
    create(east, "orders.p", 2)
    produce(east, "orders.p", 100, tag="before-")
    runner = LinkRunner(link_config(east, west, tmp_path, "sync_interval_s = 1"), fetch_max_wait_ms=100)
    with RunningLink(runner) as running:
        wait_mirrored(east, west, "orders.p")
        mirrored = ends(west, "orders.p")

        running.call(runner.pause)
        status = running.status()
        assert status["state"] == "paused"
        assert [p["state"] for p in status["topics"]["orders.p"]["partitions"]] == ["paused", "paused"]
        produce(east, "orders.p", 100, tag="paused-")
        # Three sync passes and many fetch waits: a running copier would have copied by now.
        passes = running.status()["syncs"]
        wait_for("three sync passes while paused", lambda: running.status()["syncs"] >= passes + 3, timeout=30)
        assert ends(west, "orders.p") == mirrored
        assert runner.paused

        running.call(runner.resume)
        wait_mirrored(east, west, "orders.p", timeout=15)
        status = running.status()
        assert status["state"] == "running"
        parts = status["topics"]["orders.p"]["partitions"]
        assert [p["state"] for p in parts] == ["copying", "copying"]
        assert sum(p["records_copied"] for p in parts) == 200  # counted across the pause
        wait_for("lag 0", lambda: running.status()["totals"]["lag_records"] == 0, timeout=10)
