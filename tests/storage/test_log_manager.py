"""JBOD log dirs: placement, meta.properties, checkpoints, clean shutdown, and one failing dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import (
    FaultPoints,
    InconsistentMetaPropertiesError,
    LogConfig,
    LogDirOfflineError,
    LogManager,
    StorageError,
    TopicPartition,
    _log_manager,
    read_offsets,
)
from tests.storage.helpers import FakeClock, batch


def manager(tmp_path: Path, n: int = 2, **kw: object) -> LogManager:
    m = LogManager([tmp_path / f"d{i}" for i in range(n)], broker_id=1, clock=FakeClock(), **kw)  # type: ignore[arg-type]
    m.startup()
    return m


def test_new_partitions_go_to_the_dir_with_the_fewest(tmp_path: Path) -> None:
    m = manager(tmp_path, 3)
    placed = [m.create_log(TopicPartition("t", p)).dir.parent.name for p in range(6)]
    assert sorted(placed) == ["d0", "d0", "d1", "d1", "d2", "d2"]


def test_ties_go_to_the_dir_with_the_most_free_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = manager(tmp_path, 2)
    free = {tmp_path / "d0": 10, tmp_path / "d1": 20}
    monkeypatch.setattr(_log_manager.LogDir, "free_bytes", lambda self: free[self.path])
    assert m.create_log(TopicPartition("t", 0)).dir.parent.name == "d1"
    assert m.create_log(TopicPartition("t", 1)).dir.parent.name == "d0"  # fewer partitions wins first


def test_meta_properties_are_written_and_checked(tmp_path: Path) -> None:
    manager(tmp_path, 1).shutdown()
    meta = (tmp_path / "d0" / "meta.properties").read_text()
    assert "broker.id=1" in meta and "version=0" in meta
    other = LogManager([tmp_path / "d0"], broker_id=2)
    with pytest.raises(
        InconsistentMetaPropertiesError, match=r"broker.id=1 but this node is configured with broker.id=2"
    ):
        other.startup()


def test_shutdown_writes_checkpoints_and_the_clean_marker(tmp_path: Path) -> None:
    m = manager(tmp_path, 1)
    log = m.create_log(TopicPartition("t", 0))
    log.append(batch(3))
    log.high_watermark = 2
    m.shutdown()
    d = tmp_path / "d0"
    assert (d / ".kafka_cleanshutdown").exists()
    assert read_offsets(d / "recovery-point-offset-checkpoint") == {TopicPartition("t", 0): 3}
    assert read_offsets(d / "replication-offset-checkpoint") == {TopicPartition("t", 0): 2}
    assert (d / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"
    again = LogManager([d], broker_id=1)
    (report,) = again.startup()
    assert report.clean and not (d / ".kafka_cleanshutdown").exists()  # a crash from now on is unclean
    reloaded = again.get_log(TopicPartition("t", 0))
    assert reloaded is not None and (reloaded.log_end_offset, reloaded.high_watermark) == (3, 2)


def test_an_io_error_takes_one_dir_offline_and_the_others_keep_working(tmp_path: Path) -> None:
    faults = FaultPoints()
    m = manager(tmp_path, 2, faults=faults)
    a = m.create_log(TopicPartition("a", 0))
    b = m.create_log(TopicPartition("b", 0))
    assert a.dir.parent != b.dir.parent
    a.append(batch(1))
    b.append(batch(1))
    # a real disk error on a's dir: make its active segment's fd invalid
    os.close(a.active_segment.fd)
    with pytest.raises(LogDirOfflineError, match=str(a.dir.parent)):
        a.append(batch(1))
    assert m.offline_dirs() == [a.dir.parent]
    assert m.offline_partitions() == {TopicPartition("a", 0)}
    assert b.append(batch(1)).base_offset == 1  # the other dir is untouched
    assert m.create_log(TopicPartition("c", 0)).dir.parent == b.dir.parent  # new partitions avoid the dead dir
    m.checkpoint()
    assert not (a.dir.parent / "recovery-point-offset-checkpoint").exists()
    assert (b.dir.parent / "recovery-point-offset-checkpoint").exists()


def test_a_dir_that_cannot_load_goes_offline_at_startup(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("not a directory")
    m = LogManager([good, bad], broker_id=1)
    m.startup()
    assert m.offline_dirs() == [bad.absolute()]
    assert m.create_log(TopicPartition("t", 0)).dir.parent == good.absolute()


def test_every_dir_offline_means_no_new_partitions(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("x")
    m = LogManager([bad], broker_id=1)
    m.startup()
    with pytest.raises(LogDirOfflineError, match="every log dir is offline"):
        m.create_log(TopicPartition("t", 0))


def test_duplicate_and_existing_partitions_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="twice"):
        LogManager([tmp_path / "a", tmp_path / "a"], broker_id=1)
    m = manager(tmp_path, 1)
    m.create_log(TopicPartition("t", 0))
    with pytest.raises(StorageError, match="already exists"):
        m.create_log(TopicPartition("t", 0))


def test_delete_log_removes_the_partition(tmp_path: Path) -> None:
    m = manager(tmp_path, 1)
    log = m.create_log(TopicPartition("t", 0))
    log.append(batch(2))
    m.delete_log(TopicPartition("t", 0))
    assert m.get_log(TopicPartition("t", 0)) is None
    assert not any(p.is_dir() for p in (tmp_path / "d0").iterdir())


def test_maintenance_applies_retention_and_checkpoints(tmp_path: Path) -> None:
    clock = FakeClock()
    m = LogManager(
        [tmp_path / "d"],
        LogConfig(
            segment_bytes=len(batch(1)) * 2, retention_bytes=len(batch(1)) * 2, retention_ms=-1, file_delete_delay_ms=0
        ),
        broker_id=1,
        clock=clock,
    )
    m.startup()
    log = m.create_log(TopicPartition("t", 0))
    for _ in range(8):
        log.append(batch(1))
    log.high_watermark = 8
    m.maintenance()
    # four segments of two batches; keeping at most two batches' worth leaves the active one
    assert log.log_start_offset == 6 and len(log.segments) == 1
    assert read_offsets(tmp_path / "d" / "log-start-offset-checkpoint") == {TopicPartition("t", 0): 6}
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())


def test_describe_dirs_reports_replicas_and_the_volume_of_each_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = manager(tmp_path, 2)
    log = m.create_log(TopicPartition("t", 0))
    log.append(batch(3))
    online = {usage.path: usage for usage in m.describe_dirs()}
    holding = online[log.dir.parent]
    assert [(r.tp, r.log_end_offset) for r in holding.replicas] == [(TopicPartition("t", 0), 3)]
    st = os.statvfs(holding.path)
    assert holding.total_bytes == st.f_blocks * st.f_frsize > 0
    assert 0 < holding.usable_bytes <= holding.total_bytes

    # A volume that cannot be asked reports -1 and keeps the dir online (only appends and reads
    # decide that).
    def no_statvfs(path: object) -> os.statvfs_result:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_log_manager.os, "statvfs", no_statvfs)
    unknown = m.describe_dirs()
    assert [(u.error, u.total_bytes, u.usable_bytes) for u in unknown] == [(None, -1, -1), (None, -1, -1)]
    assert [len(u.replicas) for u in unknown] == [len(online[u.path].replicas) for u in unknown]
