"""``strait topics reassign``: plan files and arguments that are wrong get one clear line, never a traceback.

Most cases fail before any connection; the ones that need ZooKeeper's view (unknown topic, a
reassignment already running) use the session's ZooKeeper and write the znodes directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner, Result

from node.coordination import PartitionState, TopicAssignment, ZkState
from strait._reassignment_plan import PlanError, encode_plan, parse_plan, progress, propose
from strait.cli import main
from tests.node.harness import NodeProcess


def _reassign(*args: str) -> Result:
    return CliRunner().invoke(main, ["topics", "reassign", *args])


def _plan_file(tmp_path: Path, content: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def _entry(topic: str = "t", partition: object = 0, replicas: object = (2, 3)) -> dict[str, object]:
    listed = list(replicas) if isinstance(replicas, tuple) else replicas
    return {"topic": topic, "partition": partition, "replicas": listed}


def _assert_clean_failure(result: Result, *needles: str) -> None:
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output


# -- the plan format (no processes) -------------------------------------------------------------


def test_parse_plan_reads_kafkas_format() -> None:
    text = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "a", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
                {"topic": "b", "partition": 0, "replicas": [2]},
            ],
        }
    )
    plan = parse_plan(text, "p.json")
    assert plan == {("a", 1): (3, 1), ("b", 0): (2,)}
    assert parse_plan(encode_plan(plan), "again") == plan


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "p.json: not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        ("[]", "expected a JSON object"),
        ({"version": 2, "partitions": [_entry()]}, "unsupported plan version 2"),
        ({"version": 1, "partitions": []}, "'partitions' must be a non-empty list"),
        ({"version": 1}, "'partitions' must be a non-empty list, got null"),
        ({"version": 1, "partitions": [_entry(replicas=[])]}, "partitions[0] (t-0): the replica list is empty"),
        ({"version": 1, "partitions": [_entry(replicas=[2, 3, 2])]}, "broker 2 appears more than once in [2, 3, 2]"),
        ({"version": 1, "partitions": [_entry(replicas=[2, "3"])]}, 'replica "3" in [2, "3"] is not a broker id'),
        ({"version": 1, "partitions": [_entry(replicas=[-1])]}, "replica -1 in [-1] is not a broker id"),
        ({"version": 1, "partitions": [_entry(replicas=5)]}, "'replicas' must be a list of broker ids, got 5"),
        ({"version": 1, "partitions": [_entry(partition=-1)]}, "'partition' must be a non-negative integer, got -1"),
        ({"version": 1, "partitions": [_entry(partition=True)]}, "'partition' must be a non-negative integer, got tru"),
        ({"version": 1, "partitions": [_entry(topic="bad name")]}, "invalid topic name 'bad name'"),
        ({"version": 1, "partitions": [{"partition": 0, "replicas": [1]}]}, "'topic' must be a string, got null"),
        ({"version": 1, "partitions": [_entry(), _entry(replicas=[1])]}, "partitions[1]: partition t-0 is listed"),
        (
            {"version": 1, "partitions": [{**_entry(), "log_dirs": ["/data/d1", "any"]}]},
            '\'log_dirs\' ["/data/d1", "any"] is not supported',
        ),
    ],
)
def test_bad_plans_name_the_bad_value(content: object, needle: str) -> None:
    text = content if isinstance(content, str) else json.dumps(content)
    with pytest.raises(PlanError) as info:
        parse_plan(text, "p.json")
    assert needle in str(info.value)
    assert str(info.value).startswith("p.json")


def _topic(name: str, partitions: dict[int, tuple[int, ...]]) -> TopicAssignment:
    return TopicAssignment(name=name, topic_id="x", partitions=partitions, version=0)


def test_propose_spreads_round_robin_and_keeps_the_replication_factor() -> None:
    topics = {"a": _topic("a", {0: (1, 2), 1: (1, 2)}), "b": _topic("b", {0: (1,)})}
    assert propose(topics, (4, 5, 6)) == {("a", 0): (4, 5), ("a", 1): (5, 6), ("b", 0): (6,)}
    with pytest.raises(PlanError, match=r"a-0 has 2 replicas but --brokers names only 1 \(\[4\]\)"):
        propose(topics, (4,))


def test_progress_tells_complete_in_progress_and_failed_apart() -> None:
    from node.coordination import Reassignment

    plan = {("t", 0): (2, 3), ("t", 1): (2, 3), ("t", 2): (2, 3)}
    topics = {"t": _topic("t", {0: (2, 3), 1: (2, 3, 1), 2: (1, 2)})}
    states = {("t", p): PartitionState(leader=2, leader_epoch=1, isr=(1, 2), controller_epoch=1) for p in range(3)}
    running = Reassignment(partitions={("t", 1): (2, 3)}, throttle_bytes_per_s=None, version=3)
    report = progress(plan, topics, states, running)
    assert report[("t", 0)][0] is True
    assert report[("t", 1)] == (False, "in progress (replicas [2,3,1]; in sync [1,2]; target [2,3])")
    assert report[("t", 2)] == (False, "failed: not in progress, and its replicas are [1,2], not [2,3]")


# -- the command, failing before it connects ----------------------------------------------------


def test_missing_plan_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    result = _reassign("--zookeeper", "127.0.0.1:1", "--plan", str(missing))
    _assert_clean_failure(result, str(missing), "does not exist")


def test_bad_json_names_the_file_and_position(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, '{"version": 1, "partitions": [')
    result = _reassign("--zookeeper", "127.0.0.1:1", "--plan", path)
    _assert_clean_failure(result, f"{path}: not valid JSON", "line 1 column 31")


def test_empty_replica_list(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry(replicas=[])]})
    _assert_clean_failure(_reassign("-z", "127.0.0.1:1", "--plan", path), "t-0", "the replica list is empty")


def test_duplicate_broker(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry(replicas=[3, 3])]})
    _assert_clean_failure(_reassign("-z", "127.0.0.1:1", "--plan", path), "broker 3 appears more than once in [3, 3]")


def test_argument_combinations(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry()]})
    _assert_clean_failure(_reassign("-z", "127.0.0.1:1"), "give --plan FILE")
    _assert_clean_failure(_reassign("-z", "127.0.0.1:1", "--plan", path, "--verify", "--throttle", "10"), "--throttle")
    _assert_clean_failure(_reassign("-z", "127.0.0.1:1", "--plan", path, "--throttle", "0"), "--throttle", "0")
    _assert_clean_failure(_reassign("-z", "127.0.0.1:1", "--generate", "--topics", "t"), "--generate needs")
    _assert_clean_failure(_reassign("-z", "127.0.0.1:1", "--generate", "--topics", "t", "--plan", path), "--generate")
    _assert_clean_failure(
        _reassign("-z", "127.0.0.1:1", "--generate", "--topics", "t", "--brokers", "1,x"), "'x' is not a broker id"
    )
    _assert_clean_failure(
        _reassign("-z", "127.0.0.1:1", "--generate", "--topics", "t", "--brokers", "1,2,1"),
        "broker 1 appears more than once",
    )
    _assert_clean_failure(_reassign("-z", "127.0.0.1:1", "--plan", path, "--topics", "t"), "go with --generate")


def test_malformed_zookeeper_connect(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry()]})
    _assert_clean_failure(_reassign("-z", "/chroot-only", "--plan", path), "'/chroot-only' names no host")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "No such file or directory"),
        ("strait", "expected one line user:password: there is no ':'"),
        ("strait:", "expected one line user:password: the password is empty"),
        ("strait:zk-s3cret\nother:zk-s3cret", "expected one line user:password, not several"),
    ],
)
def test_a_missing_or_malformed_digest_file_names_the_option_and_the_file(
    tmp_path: Path, content: str | None, reason: str
) -> None:
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry()]})
    digest = tmp_path / "zk.digest"
    if content is not None:
        digest.write_text(content)
    result = _reassign("-z", "127.0.0.1:1", "--zookeeper-digest-file", str(digest), "--plan", path)
    assert result.exit_code == 2, result.output
    _assert_clean_failure(result, "--zookeeper-digest-file", f"{str(digest)!r}: {reason}")
    assert "s3cret" not in result.output


# -- the command against ZooKeeper ---------------------------------------------------------------


@pytest.mark.integration
def test_unreachable_zookeeper(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry()]})
    result = _reassign("-z", "127.0.0.1:1/x", "--zk-timeout", "0.5", "--plan", path)
    _assert_clean_failure(result, "could not connect to ZooKeeper at 127.0.0.1:1/x")


@pytest.mark.integration
def test_unknown_topic_partition_and_broker(
    tmp_path: Path, zk_connect: str, node_factory: Callable[..., NodeProcess]
) -> None:
    node_factory(1)

    async def setup() -> None:
        async with ZkState(zk_connect) as zk:
            await zk.create_topic("present", {0: (1,)}, {})

    trio.run(setup)
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry(topic="absent")]})
    _assert_clean_failure(_reassign("-z", zk_connect, "--plan", path), "topic 'absent' does not exist")
    _assert_clean_failure(_reassign("-z", zk_connect, "--plan", path, "--verify"), "absent-0: failed")
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry(topic="present", partition=4)]})
    _assert_clean_failure(
        _reassign("-z", zk_connect, "--plan", path), "topic 'present' has partitions 0..0; there is no partition 4"
    )
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry(topic="present", replicas=[1, 7])]})
    _assert_clean_failure(
        _reassign("-z", zk_connect, "--plan", path),
        "present-0: broker 7 is not a live broker of this site (live brokers: [1])",
    )
    _assert_clean_failure(
        _reassign("-z", zk_connect, "--generate", "--topics", "present,absent", "--brokers", "1"),
        "topic 'absent' does not exist",
    )
    _assert_clean_failure(
        _reassign("-z", zk_connect, "--generate", "--topics", "present", "--brokers", "1,2"),
        "broker 2 is not a live broker of this site",
    )
    generated = _reassign("-z", zk_connect, "--generate", "--topics", "present", "--brokers", "1")
    assert generated.exit_code == 0, generated.output
    assert generated.output.splitlines()[-1] == encode_plan({("present", 0): (1,)})
    assert _reassign("-z", zk_connect, "--plan", path, "--verify").exit_code == 1


@pytest.mark.integration
def test_a_chroot_without_brokers_is_probably_the_wrong_one(tmp_path: Path, zk_connect: str) -> None:
    async def setup() -> None:
        async with ZkState(zk_connect) as zk:
            await zk.create_topic("lonely", {0: (1,)}, {})

    trio.run(setup)
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry(topic="lonely")]})
    _assert_clean_failure(_reassign("-z", zk_connect, "--plan", path), "no broker is registered", "chroot")


@pytest.mark.integration
def test_a_reassignment_already_in_progress_is_refused(tmp_path: Path, zk_connect: str) -> None:
    async def setup() -> None:
        async with ZkState(zk_connect) as zk:
            await zk.create_topic("busy", {0: (1, 2), 1: (1, 2)}, {})
            await zk.start_reassignment({("busy", 1): (2, 1)}, None)

    trio.run(setup)
    path = _plan_file(tmp_path, {"version": 1, "partitions": [_entry(topic="busy")]})
    _assert_clean_failure(
        _reassign("-z", zk_connect, "--plan", path), "a partition reassignment is in progress", "busy-1"
    )
    verify = _reassign("-z", zk_connect, "--plan", path, "--verify")
    assert verify.exit_code == 1
    assert "busy-0: failed: not in progress, and its replicas are [1,2], not [2,3]" in verify.output
