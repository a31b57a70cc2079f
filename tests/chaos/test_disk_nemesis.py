"""chaos.nemesis's disk faults: each fault is real (the errno a writer gets) until heal removes it.

The XFS tests make real 300 MiB sparse images, loop-mount them and need root and xfsprogs; a
small Python child that holds a file open on the image stands in for a node (kill and start).
The torn-tail tests need nothing but files. The last test runs a real node with one log dir on
an image and one plain dir, and fills, then fails, the image under it.
"""

from __future__ import annotations

import errno
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.errors import NemesisError
from chaos.nemesis import (
    DiskFull,
    FailingDir,
    ReadOnlyDir,
    TornTail,
    XfsImage,
    disk_faults_unavailable,
    kill_9,
)
from node.proc import Child, Deadline, spawn, wait_until
from node.protocol import ErrorCode
from tests.node.harness import NodeProcess, wait_for
from tests.node.raw import produce_raw
from tests.node.test_replication import consume_all, create_topic, partition_states

UNAVAILABLE = disk_faults_unavailable()
needs_xfs = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"XFS disk nemeses unavailable: {UNAVAILABLE}")

HOLD = """\
import sys, time
held = open(sys.argv[1], "ab")
held.write(b"held ")
held.flush()
print("up", flush=True)
while True:
    time.sleep(1)
"""


class Holder:
    """A NodeControl stand-in: a Python child that holds ``file`` open for appending, as a node holds its segments."""

    def __init__(self, tmp_path: Path, file: Path) -> None:
        self.name = "holder"
        self.file = file
        self.log_dirs = [file.parent]
        self.log = tmp_path / "holder.log"
        self.child: Child | None = None
        self.starts = 0
        self.kills = 0

    @property
    def running(self) -> bool:
        return self.child is not None and self.child.running

    def start(self) -> None:
        child = self.child = spawn([sys.executable, "-c", HOLD, str(self.file)], self.log, name=self.name)
        wait_until(lambda: "up" in child.log_tail(), Deadline(30, "the holder up"), watch=[child])
        self.starts += 1

    def kill(self) -> None:
        if self.child is not None:
            kill_9(self.child)
            self.kills += 1


class FakeNode:
    """A NodeControl whose process is imaginary: it counts kills and starts."""

    def __init__(self, log_dirs: list[Path]) -> None:
        self.name = "east node 2"
        self.broker_id = 2
        self.log_dirs = log_dirs
        self.running = True
        self.kills = 0
        self.starts = 0

    def kill(self) -> None:
        self.running = False
        self.kills += 1

    def start(self) -> None:
        self.running = True
        self.starts += 1


@pytest.fixture
def image(tmp_path: Path) -> Iterator[XfsImage]:
    with XfsImage(tmp_path / "disk.img", tmp_path / "mnt") as made:
        yield made


@pytest.fixture
def holder(tmp_path: Path, image: XfsImage) -> Iterator[Holder]:
    target = Holder(tmp_path, image.mountpoint / "segment.log")
    target.start()
    try:
        yield target
    finally:
        target.kill()


def errno_of_write(path: Path, data: bytes = b"x" * 65536) -> int:
    """0 if ``data`` could be appended to ``path`` (created if missing) and fsynced, else the errno."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        return exc.errno or -1
    return 0


def loop_attached(device: str) -> bool:
    return Path(f"/sys/block/{Path(device).name}/loop/backing_file").exists()


# -- the image --------------------------------------------------------------------------------------


@pytest.mark.chaos
@needs_xfs
def test_an_xfs_image_is_a_mounted_filesystem_until_closed(tmp_path: Path) -> None:
    image = XfsImage(tmp_path / "disk.img", tmp_path / "mnt")
    try:
        device = image.device
        assert device is not None and loop_attached(device) and image.mounted
        # Sparse: mkfs writes XFS's 64 MiB log (its minimum) and little else of the 300 MiB.
        assert image.path.stat().st_blocks * 512 < 100 * 1024 * 1024
        assert 200 * 1024 * 1024 < image.free_bytes() < 300 * 1024 * 1024
        assert errno_of_write(image.mountpoint / "f") == 0
        with open(image.mountpoint / "f", "rb"):  # busy: close() unmounts lazily, and still detaches
            image.close()
        assert not image.mounted and image.device is None
        wait_until(lambda: not loop_attached(device), Deadline(10, f"{device} to detach"))
        image.close()  # idempotent
    finally:
        image.close()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("x")
    with pytest.raises(NemesisError, match="not empty"):
        XfsImage(tmp_path / "other.img", tmp_path / "full")
    with pytest.raises(NemesisError, match="at least 300 MiB"):
        XfsImage(tmp_path / "small.img", tmp_path / "small", size_mb=100)


# -- disk full ----------------------------------------------------------------------------------------


@pytest.mark.chaos
@needs_xfs
def test_disk_full_fails_writes_with_enospc_until_healed(image: XfsImage) -> None:
    existing = image.mountpoint / "existing.log"
    assert errno_of_write(existing) == 0
    full = DiskFull(image)
    assert full.name == "disk-full" and "ENOSPC" in full.description
    full.start()
    assert image.free_bytes() < 64 * 1024, image.free_bytes()
    assert str(image.mountpoint) in full.target and "bytes preallocated" in full.target
    assert errno_of_write(existing) == errno.ENOSPC
    assert errno_of_write(image.mountpoint / "new.log") == errno.ENOSPC
    filled = full.filled
    full.start()  # idempotent
    assert full.filled == filled
    full.heal()
    assert errno_of_write(existing) == 0 and errno_of_write(image.mountpoint / "new.log") == 0
    full.heal()  # idempotent
    with DiskFull(image):  # again, as a context
        assert errno_of_write(existing) == errno.ENOSPC
    assert errno_of_write(existing) == 0
    assert not (image.mountpoint / ".chaos-disk-full").exists()


# -- read-only ----------------------------------------------------------------------------------------


@pytest.mark.chaos
@needs_xfs
def test_read_only_dir_fails_writes_with_erofs_and_heal_restarts_the_node(image: XfsImage, holder: Holder) -> None:
    existing = image.mountpoint / "existing.log"
    assert errno_of_write(existing) == 0
    opened_before = os.open(existing, os.O_WRONLY | os.O_APPEND)
    try:
        read_only = ReadOnlyDir(image, holder)
        read_only.start()
        assert "read-only" in read_only.target and "holder" in read_only.target
        assert errno_of_write(existing) == errno.EROFS
        assert errno_of_write(image.mountpoint / "new.log") == errno.EROFS
        with pytest.raises(OSError) as renamed:
            existing.rename(image.mountpoint / "moved.log")
        assert renamed.value.errno == errno.EROFS
        assert existing.read_bytes().startswith(b"x")  # reads still work
        # What Linux allows: a descriptor opened for writing before the fault keeps writing.
        assert os.write(opened_before, b"y") == 1
        read_only.start()  # idempotent
        assert holder.starts == 1 and holder.kills == 0
        read_only.heal()
        assert (holder.starts, holder.kills) == (2, 1) and holder.running
        assert errno_of_write(existing) == 0 and errno_of_write(image.mountpoint / "new.log") == 0
        read_only.heal()  # idempotent: no second restart
        assert (holder.starts, holder.kills) == (2, 1)
    finally:
        os.close(opened_before)


# -- failing ------------------------------------------------------------------------------------------


@pytest.mark.chaos
@needs_xfs
def test_failing_dir_answers_eio_until_heal_remounts_it_keeping_what_was_synced(
    image: XfsImage, holder: Holder
) -> None:
    synced = image.mountpoint / "synced.log"
    payload = os.urandom(100_000)
    assert errno_of_write(synced, payload) == 0
    failing = FailingDir(image, holder)
    failing.start()
    assert "EIO" in failing.target
    assert errno_of_write(synced) == errno.EIO
    assert errno_of_write(image.mountpoint / "new.log") == errno.EIO
    with pytest.raises(OSError) as read:
        synced.read_bytes()
    assert read.value.errno == errno.EIO
    failing.start()  # idempotent
    failing.heal()  # the holder keeps the filesystem busy: heal must kill it before unmounting
    assert (holder.starts, holder.kills) == (2, 1) and holder.running
    assert synced.read_bytes() == payload  # fsynced before the fault: log recovery kept it
    assert errno_of_write(image.mountpoint / "new.log") == 0
    failing.heal()  # idempotent
    assert (holder.starts, holder.kills) == (2, 1)


@pytest.mark.chaos
@needs_xfs
def test_heal_after_a_start_that_failed_does_nothing_more(image: XfsImage) -> None:
    node = FakeNode([image.mountpoint])
    image.unmount()
    for nemesis in (ReadOnlyDir(image, node), FailingDir(image, node)):
        with pytest.raises(NemesisError, match="not mounted"), nemesis:
            pass
        nemesis.heal()
    assert (node.kills, node.starts) == (0, 0)  # nothing was done, so nothing is restarted
    image.mount()
    DiskFull(image).heal()  # never started: nothing to undo
    assert errno_of_write(image.mountpoint / "after.log") == 0


# -- torn tail ----------------------------------------------------------------------------------------


def segment(log_dir: Path, partition: str, base_offset: int, data: bytes) -> Path:
    directory = log_dir / partition
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{base_offset:020d}.log"
    path.write_bytes(data)
    (directory / f"{base_offset:020d}.index").write_bytes(b"\0" * 16)
    return path


@pytest.fixture
def log_dirs(tmp_path: Path) -> list[Path]:
    """Two log dirs: t-0 with an old and an active segment, t-1 active, u-0 active, t-2 with an empty one."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    segment(d1, "t-0", 0, os.urandom(1000))
    segment(d1, "t-0", 120, os.urandom(500))
    segment(d2, "t-1", 0, os.urandom(300))
    segment(d2, "u-0", 0, os.urandom(200))
    segment(d2, "t-2", 0, b"")
    (d2 / "meta.properties").write_text("version=0\n")
    return [d1, d2]


def snapshot(dirs: list[Path]) -> dict[Path, bytes]:
    return {p: p.read_bytes() for d in dirs for p in sorted(d.rglob("*")) if p.is_file()}


def test_torn_tail_cut_truncates_exactly_the_last_bytes_of_the_active_segment(log_dirs: list[Path]) -> None:
    node = FakeNode(log_dirs)
    before = snapshot(log_dirs)
    torn = TornTail(node, "cut", 64, rng=random.Random(3), topics=["t"], partitions=2)
    assert torn.name == "torn-tail" and torn.description
    torn.start()
    assert node.kills == 1 and not node.running
    active = {log_dirs[0] / "t-0" / f"{120:020d}.log", log_dirs[1] / "t-1" / f"{0:020d}.log"}
    assert {t.path for t in torn.torn} == active  # the two non-empty active segments of topic t
    after = snapshot(log_dirs)
    for path, data in before.items():
        if path in active:
            assert after[path] == data[:-64], path
        else:
            assert after[path] == data, path  # older segments, indexes, other topics untouched
    for t in torn.torn:
        assert (t.start, t.end, t.size) == (t.size - 64, t.size, len(before[t.path]))
        assert f"cut bytes {t.start}..{t.end} (the last 64 of {t.size}) of {t.path}" in torn.target
    torn.start()  # idempotent: nothing torn twice
    assert snapshot(log_dirs) == after and node.kills == 1
    torn.heal()
    assert node.starts == 1 and node.running
    torn.heal()
    assert node.starts == 1


def test_torn_tail_garble_changes_every_byte_of_the_tail_and_nothing_else(log_dirs: list[Path]) -> None:
    node = FakeNode(log_dirs)
    before = snapshot(log_dirs)
    with TornTail(node, "garble", 1000, rng=random.Random(7), partitions=1) as torn:
        (t,) = torn.torn
        assert node.kills == 1
    assert node.starts == 1
    data, after = before[t.path], t.path.read_bytes()
    assert len(after) == len(data) == t.size and t.end == t.size
    assert t.start == max(0, t.size - 1000)  # a segment shorter than nbytes is garbled whole
    assert after[: t.start] == data[: t.start]
    assert all(a != b for a, b in zip(after[t.start :], data[t.start :], strict=True))
    assert {p: d for p, d in snapshot(log_dirs).items() if p != t.path} == {
        p: d for p, d in before.items() if p != t.path
    }
    assert "garbled bytes" in torn.target


def test_torn_tail_without_a_segment_to_tear_fails_and_heal_restarts_the_node(log_dirs: list[Path]) -> None:
    node = FakeNode(log_dirs)
    torn = TornTail(node, rng=random.Random(1), topics=["absent"])
    with pytest.raises(NemesisError, match=r"no partition of \['absent'\] of east node 2"), torn:
        pass
    assert (node.kills, node.starts) == (1, 1) and node.running
    with pytest.raises(NemesisError, match="'sideways'"):
        TornTail(node, "sideways", rng=random.Random(1))  # type: ignore[arg-type]
    stopped = FakeNode(log_dirs)
    stopped.running = False
    with TornTail(stopped, rng=random.Random(1)):
        pass
    assert (stopped.kills, stopped.starts) == (0, 0)  # a node that was down stays down


# -- a real node: JBOD with one log dir on the image ----------------------------------------------------

TOPIC = "disk"
PARTITIONS = 4
#: What a produce to a partition on a failed log dir may get: the I/O error itself, or (once the
#: dir is offline and the partition has no leader) not the leader.
REFUSALS = {ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER}


class NodeUnderTest:
    """NodeControl over the test harness's NodeProcess (kill = kill -9 of its group)."""

    def __init__(self, process: NodeProcess) -> None:
        self.process = process

    @property
    def name(self) -> str:
        return self.process.name

    @property
    def log_dirs(self) -> tuple[Path, Path]:
        return self.process.log_dirs

    @property
    def running(self) -> bool:
        return self.process.running

    def kill(self) -> None:
        if self.process.child is not None:
            kill_9(self.process.child)

    def start(self) -> None:
        self.process.start()


def produce_one(node: NodeProcess, partition: int, value: bytes) -> tuple[int, int]:
    """(error code, offset) of one acks=all record produced to ``partition``."""
    response = produce_raw(node.bootstrap, TOPIC, partition, [value])
    return response.error_code, response.base_offset


@pytest.mark.integration
@pytest.mark.chaos
@pytest.mark.slow
@needs_xfs
def test_a_node_keeps_serving_its_plain_log_dir_while_the_xfs_one_is_full_then_failing(
    tmp_path: Path, zk_connect: str
) -> None:
    process = NodeProcess(1, tmp_path / "node1", zk_connect)
    node = NodeUnderTest(process)
    acked: set[tuple[int, int, bytes]] = set()

    def produce_ok(partition: int, value: bytes) -> None:
        code, offset = produce_one(process, partition, value)
        assert code == 0, (partition, code, process.log_tail())
        acked.add((partition, offset, value))

    def produce_until_refused(partition: int, label: str) -> int:
        """Produce 2 KB records until the node refuses one (a full disk still takes what fits in
        blocks it already has); the refusal's error code. Acknowledged ones join ``acked``."""
        for i in range(200):
            value = f"{label}-{partition}-{i}-".encode().ljust(2048, b".")
            code, offset = produce_one(process, partition, value)
            if code != 0:
                return code
            acked.add((partition, offset, value))
        raise AssertionError(f"the node took 200 records of 2 KB into {TOPIC}-{partition} during {label}")

    def all_acked_read_back() -> None:
        read = set(consume_all(process.bootstrap, TOPIC, PARTITIONS))
        assert acked <= read, sorted(acked - read)[:5]

    def dir_offline(partitions: set[int]) -> bool:
        states = partition_states(process, TOPIC)
        return all(not states[p]["online"] for p in partitions)

    def plain_dir_serves() -> None:
        states = partition_states(process, TOPIC)
        assert all(states[p]["online"] and states[p]["leader"] == 1 for p in on_plain), states
        for p in on_plain:
            produce_ok(p, f"served-{p}-{len(acked)}".encode())
        assert process.running

    with XfsImage(tmp_path / "d2.img", process.log_dirs[1]) as image:
        try:
            process.start()
            # rf 1 and an fsync per append: an acknowledged record is on the disk, so none may be lost.
            create_topic([process], TOPIC, partitions=PARTITIONS, rf=1, **{"flush.messages": "1"})
            states = partition_states(process, TOPIC)
            on_image = {p for p, s in states.items() if s["log_dir"] == str(image.mountpoint)}
            on_plain = {p for p, s in states.items() if s["log_dir"] == str(process.log_dirs[0])}
            assert on_image and on_plain and len(on_image | on_plain) == PARTITIONS, states
            for i in range(20):
                for p in range(PARTITIONS):
                    produce_ok(p, f"before-{p}-{i}".encode())

            with DiskFull(image):
                codes = {produce_until_refused(p, "full") for p in on_image}
                assert codes <= REFUSALS, codes
                wait_for("the full log dir's partitions to go offline", lambda: dir_offline(on_image))
                plain_dir_serves()
            assert dir_offline(on_image)  # freeing the space does not bring the dir back: a restart does
            node.kill()
            node.start()
            all_acked_read_back()
            for p in range(PARTITIONS):
                produce_ok(p, f"after-full-{p}".encode())

            with FailingDir(image, node):
                codes = {produce_until_refused(p, "failing") for p in on_image}
                assert codes <= REFUSALS, codes
                wait_for("the failing log dir's partitions to go offline", lambda: dir_offline(on_image))
                plain_dir_serves()
            # heal killed the node, remounted the image (XFS log recovery) and started the node
            assert process.running and not dir_offline(on_image)
            all_acked_read_back()
            for p in range(PARTITIONS):
                produce_ok(p, f"after-failing-{p}".encode())
            all_acked_read_back()
            assert "offline" in process.log_path.read_text()
        finally:
            process.stop()
