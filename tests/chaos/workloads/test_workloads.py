"""The workloads against real one-node sites (and against nothing): the histories they write match the spec."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.checkers import CHECKERS
from chaos.errors import WorkloadError
from chaos.history import History, load
from chaos.nemesis import kill_9
from chaos.workloads import GroupConsumer, MirrorReader, Producer, TransactionalLoop, final_read, final_txn_read
from tests.chaos.workloads.shape import acked, check_shape, polled, polls_increase_between_assigns
from tests.node.harness import NodeProcess, wait_for

NOWHERE = "127.0.0.1:1"
QUIET = {"reconnect.backoff.max.ms": 100}

Site = Callable[[str], NodeProcess]


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(30)


def two_sites(site: Site, topic: str, partitions: int) -> tuple[NodeProcess, NodeProcess]:
    """Sites east and west, each with ``topic``."""
    east, west = site("east"), site("west")
    for node in (east, west):
        create_topic(node.bootstrap, topic, partitions)
    return east, west


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


# -- against nothing ---------------------------------------------------------------------------------


def test_writes_that_never_reached_a_broker_fail_when_stopped_and_stop_is_bounded() -> None:
    history = History()
    producer = Producer(NOWHERE, "t", history, "producer-7", rate=40, run_id="r1", config=QUIET).start()
    try:
        with pytest.raises(WorkloadError, match=r"timed out.*send invoke"):
            producer.wait_for_acks(1, timeout=0.4)
    finally:
        assert timed(lambda: producer.stop(timeout=0.2)) < 3
    assert not producer.running and producer.errors == []
    pairs = check_shape(history.ops)
    # Never routed to a partition (no metadata ever came), hence never sent: proven absent.
    assert 1 <= len(pairs["send"]) == producer.invoked == producer.failed <= 40
    assert all(done["type"] == "fail" and "_PURGE_QUEUE" in done["error"] for _, done in pairs["send"])
    assert [invoked["value"] for invoked, _ in pairs["send"]] == [f"r1-producer-7-{i}" for i in range(producer.invoked)]


def test_bad_arguments_and_configuration_fail_at_construction_or_start() -> None:
    with pytest.raises(WorkloadError, match="cannot create the producer"):
        Producer(NOWHERE, "t", History(), config={"no.such.setting": 1}).start()
    with pytest.raises(ValueError, match="acks=all"):
        Producer(NOWHERE, "t", History(), acks="1")
    with pytest.raises(ValueError, match="process"):
        Producer(NOWHERE, "t", History(), "nemesis")
    with pytest.raises(WorkloadError, match="cannot create the consumer"):
        GroupConsumer(NOWHERE, "t", "g", History(), config={"no.such.setting": 1}).start()
    with pytest.raises(ValueError, match="commit"):
        GroupConsumer(NOWHERE, "t", "g", History(), commit="never")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="client"):
        GroupConsumer(NOWHERE, "t", "g", History(), client="kafka-python")
    with pytest.raises(WorkloadError, match="cannot create a consumer"):
        MirrorReader(NOWHERE, NOWHERE, "t", History(), config={"no.such.setting": 1}).start()


def test_against_nothing_the_readers_record_no_sample_count_it_and_fail_their_reads() -> None:
    history = History()
    reader = MirrorReader(NOWHERE, NOWHERE, "t", history, interval=0.1, request_timeout=0.2, config=QUIET).start()
    group = GroupConsumer(NOWHERE, "t", "g", history, config=QUIET).start()
    try:
        wait_for("an unreachable sample", lambda: reader.unreachable >= 2, timeout=10)
        assert not group.drain({("t", 0): 5}, timeout=0.5)
    finally:
        assert timed(lambda: reader.stop(timeout=0.5)) < 4
        assert timed(lambda: group.stop(timeout=0.5)) < 4
    with pytest.raises(WorkloadError, match="final read of"):
        final_read(NOWHERE, ["t"], history, site="east", role="primary", timeout=0.5, config=QUIET)
    check_shape(history.ops)
    assert reader.samples == 0 and reader.errors == [] and group.errors == []
    assert [(op["f"], op["type"]) for op in history.ops] == [
        ("drain", "fail"),
        ("read", "invoke"),
        ("read", "fail"),
    ]
    assert "t/0 at nothing committed of 5" in history.ops[0]["error"]
    assert history.ops[2]["final"] is True and history.ops[2]["site"] == "east"


# -- producers and the final read ----------------------------------------------------------------------


@pytest.mark.integration
def test_both_producers_record_acks_that_the_final_read_finds_at_their_offsets(site: Site, tmp_path: Path) -> None:
    east = site("east")
    create_topic(east.bootstrap, "p", 3)
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        idempotent = Producer(east.bootstrap, "p", history, "producer-0", max_in_flight=50)
        plain = Producer(east.bootstrap, "p", history, "producer-1", idempotent=False, acks=1, rate=300)
        with idempotent, plain:
            idempotent.wait_for_acks(300, timeout=30)
            plain.wait_for_acks(150, timeout=30)
        read = final_read(east.bootstrap, "p", history, site="east", role="primary", timeout=30)
    ops = load(path).ops
    pairs = check_shape(ops)
    assert ops[-1] == read
    assert idempotent.errors == plain.errors == []
    assert {done["type"] for _, done in pairs["send"]} == {"ok"}  # no fault: every write acknowledged
    assert idempotent.acked + plain.acked == len(pairs["send"]) >= 450
    stored = {r["value"]: (r["topic"], r["partition"], r["offset"]) for r in read["records"]}
    assert stored == acked(ops)
    assert read["final"] is True and read["role"] == "primary" and read["topic"] == "p"
    assert set(read["ends"]) == {"p/0", "p/1", "p/2"}
    assert sum(end - start for start, end in read["ends"].values()) == len(read["records"])


@pytest.mark.integration
def test_a_producer_whose_node_dies_ends_pending_writes_as_info_and_continues_on_another_site(
    site: Site, tmp_path: Path
) -> None:
    east, west = two_sites(site, "r", 2)
    history = History(tmp_path / "history.jsonl")
    producer = Producer(east.bootstrap, "r", history, rate=200, run_id="run").start()
    try:
        producer.wait_for_acks(100, timeout=30)
        assert east.child is not None
        kill_9(east.child)
        killed_at = len(history)
        wait_for("writes pending on the dead node", lambda: producer.in_flight >= 20, timeout=10)
        first_on_west = producer.repoint(west.bootstrap)
        repointed_at = len(history)
        producer.wait_for_acks(producer.acked + 100, timeout=30)
    finally:
        producer.stop(timeout=5)
    assert producer.errors == []
    pairs = check_shape(history.ops)
    # One process, one sequence across both clients.
    seqs = sorted(int(invoked["value"].rsplit("-", 1)[1]) for invoked, _ in pairs["send"])
    assert seqs == list(range(producer.invoked))
    old = [done for _, done in pairs["send"] if int(done["value"].rsplit("-", 1)[1]) < first_on_west]
    new = {done["value"]: done for _, done in pairs["send"] if int(done["value"].rsplit("-", 1)[1]) >= first_on_west}
    # repoint returned once the dead node's client had completed every write it took. Those not
    # acknowledged by the kill were routed to a partition, so they may have been appended: info.
    assert all(done["index"] < repointed_at for done in old)
    stuck = [done for done in old if done["index"] > killed_at and done["type"] != "ok"]
    assert len(stuck) >= 20 and all(done["type"] == "info" and "_PURGE" in done["error"] for done in stuck)
    read = final_read(west.bootstrap, ["r"], history, site="west", role="primary", timeout=30)
    stored = {r["value"]: (r["topic"], r["partition"], r["offset"]) for r in read["records"]}
    ok = {value: (d["topic"], d["partition"], d["offset"]) for value, d in new.items() if d["type"] == "ok"}
    assert len(ok) >= 100 and set(ok) <= set(stored) <= set(new)
    assert {value: stored[value] for value in ok} == ok
    with pytest.raises(WorkloadError, match="final read"):
        final_read(east.bootstrap, ["r"], history, site="east", role="old-primary", timeout=2, config=QUIET)
    assert history.ops[-1]["type"] == "fail" and history.ops[-1]["role"] == "old-primary"
    history.close()


# -- the group consumer --------------------------------------------------------------------------------


@pytest.mark.integration
def test_group_members_record_polls_assignments_and_commits_and_drain_to_the_end(site: Site, tmp_path: Path) -> None:
    east = site("east")
    create_topic(east.bootstrap, "g", 2)
    history = History(tmp_path / "history.jsonl")
    producer = Producer(east.bootstrap, "g", history, rate=300)
    restarting = GroupConsumer(east.bootstrap, ["g"], "grp", history, "group-0", restart_every=1.0, commit_polls=2)
    steady = GroupConsumer(east.bootstrap, ["g"], "grp", history, "group-1")
    with producer, restarting, steady:
        wait_for("two restarts", lambda: restarting.restarts >= 2 and steady.polls >= 1, timeout=30)
        producer.stop(timeout=5)
        ends: dict[tuple[str, int], int] = {}
        for topic, partition, offset in acked(history.ops).values():
            ends[(topic, partition)] = max(ends.get((topic, partition), 0), offset + 1)
        assert restarting.drain(ends, timeout=30)
        assert not steady.drain({("g", 0): 10_000}, timeout=1)
    history.close()
    ops = load(tmp_path / "history.jsonl").ops
    pairs = check_shape(ops)
    polls_increase_between_assigns(ops)
    assert restarting.errors == steady.errors == [] and restarting.crashes == 0
    assert set(acked(ops)) <= set(polled(ops))  # commit after processing: nothing the group skipped
    assert {done["type"] for _, done in pairs["commit"]} == {"ok"}
    assert any(op["f"] == "assign" and op["partitions"] for op in ops)
    assert any(op["f"] == "assign" and op["process"] == "group-0" and not op["partitions"] for op in ops)
    drains = [op for op in ops if op["f"] == "drain"]
    assert [(op["type"], op["process"]) for op in drains] == [("ok", "group-0"), ("fail", "group-1")]
    assert drains[0]["ends"] == {f"{t}/{p}": end for (t, p), end in sorted(ends.items())}
    assert "g/0 at" in drains[1]["error"] and "of 10000" in drains[1]["error"]


@pytest.mark.integration
def test_committing_before_processing_and_crashing_skips_records_the_drain_passes_over(
    site: Site, tmp_path: Path
) -> None:
    east = site("east")
    create_topic(east.bootstrap, "s", 1)
    history = History(tmp_path / "history.jsonl")
    consumer = GroupConsumer(east.bootstrap, "s", "skippy", history, commit="before", restart_every=1.0)
    with Producer(east.bootstrap, "s", history, rate=300, config={"linger.ms": 20}) as producer, consumer:
        wait_for("two crashes", lambda: consumer.crashes >= 2, timeout=60)
        producer.stop(timeout=5)
        ends = {("s", 0): 1 + max(o for _, _, o in acked(history.ops).values())}
        assert consumer.drain(ends, timeout=30)
    history.close()
    ops = load(tmp_path / "history.jsonl").ops
    check_shape(ops)
    polls_increase_between_assigns(ops)
    skipped = set(acked(ops)) - set(polled(ops))
    assert skipped, "a crash between commit and processing skipped nothing"
    # Each skipped record lies below an offset the group committed: it will never be delivered again.
    committed = max(e["offset"] for op in ops if op["f"] == "commit" and op["type"] == "ok" for e in op["offsets"])
    assert all(acked(ops)[value][2] < committed for value in skipped)


# -- the mirror reader ----------------------------------------------------------------------------------


@pytest.mark.integration
def test_the_mirror_reader_samples_lag_reads_the_target_and_counts_an_unreachable_site(
    site: Site, tmp_path: Path
) -> None:
    east, west = two_sites(site, "m", 1)
    history = History(tmp_path / "history.jsonl")
    # The "mirror" here is a second producer writing the source's first values in order, at the same offsets.
    with Producer(east.bootstrap, "m", history, max_in_flight=1) as source:
        source.wait_for_acks(50, timeout=30)
    on_source = len(acked(history.ops))
    copied = sorted(acked(history.ops).items(), key=lambda item: item[1][2])[:20]
    plain = confluent_kafka.Producer({"bootstrap.servers": west.bootstrap, "enable.idempotence": True})
    for value, _ in copied:
        plain.produce("m", value=value.encode(), partition=0)
    assert plain.flush(30) == 0
    plain.close()
    reader = MirrorReader(
        east.bootstrap, west.bootstrap, "m", history, site="west", interval=0.3, request_timeout=1.0, config=QUIET
    )
    with reader:
        reader.wait_for_samples(3, timeout=30)
        wait_for("the target's records read", lambda: reader.records >= 20, timeout=30)
        assert west.child is not None
        kill_9(west.child)
        before = reader.unreachable
        wait_for("unreachable samples", lambda: reader.unreachable >= before + 2, timeout=30)
        samples = reader.samples
        assert timed(lambda: reader.stop(timeout=1)) < 7
    assert reader.samples == samples and reader.errors == []
    history.close()
    ops = load(tmp_path / "history.jsonl").ops
    pairs = check_shape(ops)
    lags = [op for op in ops if op["f"] == "lag"]
    lag = on_source - 20
    assert lags[-1]["site"] == "west" and lags[-1]["value"] == {"records": lag, "partitions": {"m/0": lag}}
    reads = [done for _, done in pairs["read"]]
    assert all(r["role"] == "mirror" and r["final"] is False and r["site"] == "west" for r in reads)
    mirrored = {r["value"]: (r["topic"], r["partition"], r["offset"]) for read in reads for r in read["records"]}
    assert mirrored == dict(copied)  # the same values at the source's offsets, each read once


@pytest.mark.integration
@pytest.mark.slow
def test_the_transactional_loop_moves_every_record_once_and_its_aborted_output_is_read_uncommitted_only(
    zookeeper: str, tmp_path: Path
) -> None:
    """The exactly-once checker passes on what the loop did, read_committed; the same output read
    read_uncommitted shows the aborted transactions' records, and the checker names them."""
    node = NodeProcess(1, tmp_path / "east", f"{zookeeper}/txn-{uuid.uuid4().hex}", TXN_ON_ONE_NODE)
    try:
        node.start()
        _transactional_loop(node.bootstrap, tmp_path)
    finally:
        node.stop()


#: One broker: __transaction_state with one replica.
TXN_ON_ONE_NODE = {
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "3",
}


def _transactional_loop(servers: str, tmp_path: Path) -> None:
    create_topic(servers, "in", 2)
    create_topic(servers, "txn-out.in", 2)
    history = History(tmp_path / "history.jsonl")
    producer = Producer(servers, "in", history, rate=400)
    loop = TransactionalLoop(servers, "in", history, abort_every=3, batch=40)
    with producer, loop:
        loop.wait_for_commits(3, timeout=60)
        # Another instance with the loop's transactional.id fences it: the loop's producer fails
        # fatally, and the loop makes a new one and goes back to the group's committed offsets.
        zombie_killer = confluent_kafka.Producer(
            {"bootstrap.servers": servers, "transactional.id": loop.transactional_id}
        )
        zombie_killer.init_transactions(30)
        zombie_killer.close()
        wait_for("a new producer", lambda: loop.producers >= 2, timeout=60)
        loop.wait_for_commits(loop.committed + 3, timeout=60)
        producer.stop(timeout=10)
        ends: dict[tuple[str, int], int] = {}
        for topic, partition, offset in acked(history.ops).values():
            ends[(topic, partition)] = max(ends.get((topic, partition), 0), offset + 1)
        assert loop.drain(ends, timeout=60)
    final_read(servers, ["in"], history, site="east", role="primary", timeout=30)
    final_txn_read(servers, "in", loop.output, loop.group, history, site="east", timeout=30)
    history.close()
    ops = load(tmp_path / "history.jsonl").ops
    pairs = check_shape(ops)
    assert loop.errors == [] and loop.aborted >= 2 and loop.committed >= 6
    # The new instance's init_transactions retries while the loop's replacement has a transaction
    # open, and each retry aborts and fences that one: the two may fence each other a few times.
    fenced = [done for _, done in pairs["txn"] if done["type"] != "ok" and "aborted on purpose" not in done["error"]]
    assert fenced and all("FENCED" in done["error"].upper() for done in fenced), [d["error"] for d in fenced]
    assert loop.producers >= len(fenced) + 1, loop.client_errors  # one more for each init that failed
    assert {done["type"] for invoked, done in pairs["txn"] if invoked["abort"]} == {"fail"}
    read = pairs["txn-read"][0][1]
    assert read["open"] == {} and read["committed"] == {f"in/{p}": end for (_, p), end in sorted(ends.items())}
    result = CHECKERS["exactly-once"](load(tmp_path / "history.jsonl"))
    assert (result.verdict, result.checked) == ("pass", 2 * len(acked(ops))), result.anomalies

    uncommitted = History.of(ops)
    final_txn_read(servers, "in", loop.output, loop.group, uncommitted, site="east", isolation="read_uncommitted")
    result = CHECKERS["exactly-once"](uncommitted)
    names = {anomaly.name for anomaly in result.anomalies}
    assert names == {"aborted-read", "txn-duplicate"}, result.anomalies
