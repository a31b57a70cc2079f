"""Log compaction: latest value per key, offsets kept, tombstones, codecs, producers, crashes, a model."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from storage import (
    FaultInjected,
    FaultPoints,
    LogConfig,
    LogDirOfflineError,
    PartitionLog,
    create_log,
    load_log,
    verify,
)
from storage.records import (
    BatchBuilder,
    Compression,
    RecordBatch,
    build_batch,
    build_control_batch,
    iter_batches,
)
from tests.storage.helpers import TP, FakeClock

MakeLog = Callable[..., PartitionLog]
Reopen = Callable[..., PartitionLog]
Row = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp

DAY_MS = 86_400_000
CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=700,
    index_interval_bytes=64,
    file_delete_delay_ms=0,
    min_cleanable_dirty_ratio=0.0,
)


class ScriptedFaults(FaultPoints):
    """Fault points that also count the steps of a compaction (each fsync and each rename) and can
    crash at the n-th one, or run a callback at each, while ``armed``."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.crash_at: int | None = None
        self.on_step: Callable[[str], None] | None = None
        self.steps: list[str] = []

    def hit(self, point: str) -> None:
        super().hit(point)
        if point == "fsync":
            self.step("fsync")

    def step(self, what: str) -> None:
        if not self.armed:
            return
        self.steps.append(what)
        if self.crash_at == len(self.steps):
            raise FaultInjected(f"crash at step {len(self.steps)}: {what}")
        if self.on_step is not None:
            self.on_step(what)


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> ScriptedFaults:
    """Overrides conftest's: the same object reaches make_log and reopen. Renames count as steps."""
    scripted = ScriptedFaults()
    real_rename, real_replace = os.rename, os.replace

    def counted_rename(src: str | Path, dst: str | Path) -> None:
        scripted.step(f"rename {Path(src).name} -> {Path(dst).name}")
        real_rename(src, dst)

    def counted_replace(src: str | Path, dst: str | Path) -> None:
        scripted.step(f"replace {Path(dst).name}")
        real_replace(src, dst)

    monkeypatch.setattr(os, "rename", counted_rename)
    monkeypatch.setattr(os, "replace", counted_replace)
    return scripted


# -- helpers ---------------------------------------------------------------------------------


def rows(log: PartitionLog, start: int | None = None) -> list[Row]:
    """Every data record the log serves from ``start`` (default: the log start), in offset order."""
    data = log.read_bytes(log.log_start_offset if start is None else start, 1 << 30)
    out: list[Row] = []
    for pos, header in iter_batches(data):
        if header.is_control:
            continue
        out += [(r.offset, r.key, r.value, r.timestamp) for r in RecordBatch(data[pos : pos + header.size]).records()]
    return out


def latest(records: list[Row]) -> dict[bytes, bytes]:
    """What a consumer replaying ``records`` ends up with: the last value per key, tombstones delete."""
    state: dict[bytes, bytes] = {}
    for _, key, value, _ in records:
        if key is None:
            continue
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def put(log: PartitionLog, *records: tuple[bytes | None, bytes | None], ts: int, **kw: object) -> None:
    log.append(build_batch([(ts + i, k, v) for i, (k, v) in enumerate(records)], **kw))  # type: ignore[arg-type]


def fill(log: PartitionLog, clock: FakeClock, *, batches: int = 30, keys: int = 6) -> list[Row]:
    """Values for ``keys`` keys overwritten many times, a few tombstones, over several segments."""
    for i in range(batches):
        key = b"k%d" % (i % keys)
        value = None if i % 7 == 6 else b"v%d-" % i + b"x" * 40
        put(log, (key, value), (b"k%d" % ((i + 1) % keys), b"w%d" % i), ts=clock.now + 10 * i)
    log.roll()
    log.high_watermark = log.log_end_offset
    return rows(log)


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- what survives -----------------------------------------------------------------------------


def test_the_latest_value_of_each_key_survives_across_segments(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(CONFIG)
    before = fill(log, clock)
    assert len(log.segments) > 3

    result = log.compact(clock.now)

    after = rows(log)
    assert result.cleaned and result.records_removed == len(before) - len(after) > 0
    assert latest(after) == latest(before)
    keyed = [key for _, key, _, _ in after]
    assert len(keyed) == len(set(keyed)), "one record per key below the active segment"
    assert set(after) <= set(before), "every record kept its offset, key, value and timestamp"
    assert log.log_end_offset == before[-1][0] + 1
    assert verify(log.dir)[0] == len(log.segments)


def test_reads_by_offset_see_the_next_surviving_record(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(CONFIG)
    before = fill(log, clock)
    log.compact(clock.now)
    after = rows(log)
    gone = sorted({o for o, *_ in before} - {o for o, *_ in after})
    assert gone
    for offset in gone:
        served = rows(log, offset)  # whole batches: from the one holding the offset, or the next one
        assert served and set(served) <= set(after)
        assert [r for r in served if r[0] >= offset] == [r for r in after if r[0] > offset]
    assert log.read(log.log_end_offset, 100) == []


def test_one_read_spans_a_segment_that_compaction_emptied(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(replace(CONFIG, segment_bytes=500))
    put(log, (b"a", b"kept"), ts=clock.now)
    for value in (b"1", b"2", b"3"):
        put(log, (b"b", value + b"." * 300), ts=clock.now)
        log.roll()  # segments too big to merge: [a, b=1] [b=2] [b=3]
    log.high_watermark = log.log_end_offset
    log.compact(clock.now)
    assert [(seg.base_offset, seg.next_offset) for seg in log.segments] == [(0, 1), (2, 2), (3, 4), (4, 4)]
    assert [(o, k) for o, k, _, _ in rows(log, 0)] == [(0, b"a"), (3, b"b")]  # one read, past the hole


def test_reads_by_timestamp_find_the_first_surviving_record_at_or_after_it(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(CONFIG)
    before = fill(log, clock)
    log.compact(clock.now)
    after = rows(log)
    for target in range(before[0][3] - 1, before[-1][3] + 2):
        expected = next(((o, ts) for o, _, _, ts in after if ts >= target), None)
        assert log.find_offset_by_timestamp(target) == expected, target


def test_the_active_segment_and_everything_above_the_high_watermark_are_untouched(
    make_log: MakeLog, clock: FakeClock
) -> None:
    log = make_log(CONFIG)
    fill(log, clock)
    for i in range(4):  # overwrite the same key in the active segment
        put(log, (b"k0", b"active-%d" % i), ts=clock.now)
    active = log.active_segment
    active_bytes = active.log_path.read_bytes()
    hw = log.high_watermark  # the roll in fill(): below the active segment's batches

    log.compact(clock.now)

    assert log.active_segment is active and active.log_path.read_bytes() == active_bytes
    assert [v for o, k, v, _ in rows(log) if o >= hw] == [b"active-%d" % i for i in range(4)]


def test_nothing_at_or_above_the_high_watermark_is_compacted(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(CONFIG)
    before = fill(log, clock)
    hw = log.segments[2].base_offset + 1  # inside the third segment
    log.high_watermark = hw

    result = log.compact(clock.now)

    assert result.end_offset == log.segments[2].base_offset
    assert [r for r in rows(log) if r[0] >= result.end_offset] == [r for r in before if r[0] >= result.end_offset]


def test_min_compaction_lag_keeps_recent_segments_uncompacted(make_log: MakeLog, clock: FakeClock) -> None:
    config = replace(CONFIG, min_compaction_lag_ms=1000)
    log = make_log(config)
    before = fill(log, clock)  # timestamps clock.now .. clock.now + 290

    assert log.compact(clock.now + 1000).skipped  # every segment holds a record younger than 1 s
    assert rows(log) == before

    result = log.compact(clock.now + 1000 + 10 * 12)  # the records of the first batches are old enough now
    assert result.cleaned and 0 < result.end_offset < before[-1][0]
    assert [r for r in rows(log) if r[0] >= result.end_offset] == [r for r in before if r[0] >= result.end_offset]


# -- tombstones ----------------------------------------------------------------------------------


def test_tombstones_are_removed_after_delete_retention_ms_and_not_before(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(replace(CONFIG, delete_retention_ms=5000))
    put(log, (b"gone", b"v1"), (b"kept", b"v1"), ts=clock.now)
    put(log, (b"gone", None), ts=clock.now)
    log.roll()
    log.high_watermark = log.log_end_offset

    first = log.compact(clock.now)  # drops gone=v1 and stamps the tombstone's delete horizon
    assert first.records_removed == 1 and first.tombstones_removed == 0
    assert [(k, v) for _, k, v, _ in rows(log)] == [(b"kept", b"v1"), (b"gone", None)]
    tombstone_batch = next(h for _, _, h in log.batch_headers() if h.base_offset == 2)
    assert tombstone_batch.attributes & 0x40 and tombstone_batch.base_timestamp == clock.now + 5000
    assert rows(log)[-1][3] == clock.now  # the record's own timestamp is unchanged

    just_before = log.compact(clock.now + 4999)
    assert just_before.skipped and (b"gone", None) in [(k, v) for _, k, v, _ in rows(log)]

    at_horizon = log.compact(clock.now + 5000)
    assert at_horizon.cleaned and at_horizon.tombstones_removed == 1
    assert [(k, v) for _, k, v, _ in rows(log)] == [(b"kept", b"v1")]


def test_a_tombstone_superseded_by_a_later_value_goes_at_once(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(CONFIG)
    put(log, (b"k", None), ts=clock.now)
    put(log, (b"k", b"back"), ts=clock.now)
    log.roll()
    log.high_watermark = log.log_end_offset
    log.compact(clock.now)
    assert [(o, k, v) for o, k, v, _ in rows(log)] == [(1, b"k", b"back")]


def test_a_tombstone_stays_while_an_earlier_transactional_batch_holds_its_key(
    make_log: MakeLog, clock: FakeClock
) -> None:
    log = make_log(replace(CONFIG, delete_retention_ms=0))
    txn = BatchBuilder(producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    txn.append(clock.now, b"k", b"in-a-transaction")
    log.append(txn.build())
    log.append(build_control_batch(commit=True, timestamp=clock.now, producer_id=9, producer_epoch=0))
    put(log, (b"k", None), ts=clock.now)
    log.roll()
    log.high_watermark = log.log_end_offset
    log.compact(clock.now)
    log.compact(clock.now + 1)  # past the horizon: a plain tombstone would go now
    assert [(k, v) for _, k, v, _ in rows(log)] == [(b"k", b"in-a-transaction"), (b"k", None)]


def test_an_aborted_transactional_record_never_supersedes_a_committed_value(
    make_log: MakeLog, clock: FakeClock
) -> None:
    log = make_log(CONFIG)
    put(log, (b"k", b"committed"), ts=clock.now)
    txn = BatchBuilder(producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    txn.append(clock.now, b"k", b"aborted")
    log.append(txn.build())
    log.append(build_control_batch(commit=False, timestamp=clock.now, producer_id=9, producer_epoch=0))
    log.roll()
    log.high_watermark = log.log_end_offset
    log.compact(clock.now)
    # strait keeps no aborted-transaction index: transactional batches stay whole and out of the map.
    assert [(k, v) for _, k, v, _ in rows(log)] == [(b"k", b"committed"), (b"k", b"aborted")]


# -- batches -------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_compressed_batches_are_cleaned_with_their_codec_and_stay_valid(
    make_log: MakeLog, clock: FakeClock, codec: Compression
) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    log = make_log(CONFIG)
    for i in range(6):
        records = [(clock.now + i, b"k%d" % j, b"value-%d-%d-" % (i, j) + b"z" * 30) for j in range(i % 3 + 1)]
        log.append(build_batch(records, compression=codec))
    log.roll()
    log.high_watermark = log.log_end_offset
    before = rows(log)

    assert log.compact(clock.now).cleaned
    data = log.read_bytes(0, 1 << 30)
    ours: list[Row] = []
    theirs: list[Row] = []
    for pos, header in iter_batches(data):  # validates each CRC-32C
        raw = data[pos : pos + header.size]
        assert header.compression == codec
        ours += [(r.offset, r.key, r.value, r.timestamp) for r in RecordBatch(raw).records()]
        kafka_batch = DefaultRecordBatch(raw)
        assert kafka_batch.validate_crc()
        theirs += [(r.offset, r.key, r.value, r.timestamp) for r in kafka_batch]
    assert ours == theirs == [r for r in before if r[0] in {o for o, *_ in ours}]
    assert latest(ours) == latest(before) and len(ours) < len(before)


def test_the_last_batch_of_each_producer_is_kept_even_when_emptied(make_log: MakeLog, clock: FakeClock) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    log = make_log(CONFIG)
    put(log, (b"a", b"1"), (b"b", b"1"), ts=clock.now, producer_id=7, producer_epoch=3, base_sequence=0)
    put(log, (b"a", b"2"), (b"b", b"2"), ts=clock.now + 5, producer_id=7, producer_epoch=3, base_sequence=2)
    put(log, (b"a", b"3"), (b"b", b"3"), ts=clock.now + 9)
    log.roll()
    log.high_watermark = log.log_end_offset
    original = next(h for _, _, h in log.batch_headers() if h.base_offset == 2)

    log.compact(clock.now)

    headers = [h for _, _, h in log.batch_headers()]
    assert [h.base_offset for h in headers] == [2, 4]  # the first batch of producer 7 went, its last stayed
    empty = headers[0]
    assert (empty.records_count, empty.last_offset, empty.producer_id, empty.producer_epoch) == (0, 3, 7, 3)
    assert (empty.base_sequence, empty.last_sequence) == (original.base_sequence, original.last_sequence)
    assert empty.max_timestamp == original.max_timestamp
    raw = log.read_bytes(2, 1 << 20)[: empty.size]
    assert list(RecordBatch(raw).records()) == [] and DefaultRecordBatch(raw).validate_crc()
    assert [(k, v) for _, k, v, _ in rows(log)] == [(b"a", b"3"), (b"b", b"3")]

    put(log, (b"c", b"1"), ts=clock.now, producer_id=7, producer_epoch=3, base_sequence=4)
    log.roll()
    log.high_watermark = log.log_end_offset
    log.compact(clock.now, force=True)
    assert [h.base_offset for _, _, h in log.batch_headers()] == [4, 6]  # no longer its last: the empty batch goes


def test_control_batches_and_null_keys_are_kept(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(CONFIG)
    put(log, (None, b"no key 1"), (b"k", b"old"), ts=clock.now)
    marker = build_control_batch(commit=False, timestamp=clock.now, producer_id=4, producer_epoch=1)
    log.append(marker)
    put(log, (None, b"no key 2"), (b"k", b"new"), ts=clock.now)
    log.roll()
    log.high_watermark = log.log_end_offset

    log.compact(clock.now)

    assert [(k, v) for _, k, v, _ in rows(log) if k is None or k == b"k"] == [
        (None, b"no key 1"),
        (None, b"no key 2"),
        (b"k", b"new"),
    ]
    control = [h for _, _, h in log.batch_headers() if h.is_control]
    assert len(control) == 1 and log.read_bytes(2, 1 << 20)[16 : control[0].size] == marker[16:]


def test_log_append_time_is_preserved(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(replace(CONFIG, message_timestamp_type="LogAppendTime"))
    stamps = []
    for i in range(4):
        clock.now += 100
        stamps.append(clock.now)
        put(log, (b"k", b"v%d" % i), (b"x%d" % i, b"w"), ts=1)
    log.roll()
    log.high_watermark = log.log_end_offset
    log.compact(clock.now)
    survivors = rows(log)
    assert (7, b"x3", b"w", stamps[3]) in survivors and (6, b"k", b"v3", stamps[3]) in survivors
    assert all(ts == stamps[(o // 2)] for o, _, _, ts in survivors)
    assert all(h.is_log_append_time for _, _, h in log.batch_headers())


def test_small_segments_are_merged_and_stay_within_segment_bytes(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(CONFIG)
    fill(log, clock, batches=60, keys=3)
    first = log.compact(clock.now)
    second = log.compact(clock.now, force=True)  # cleaned segments are small now: groups merge
    assert second.cleaned and second.segments_after < second.segments_before == first.segments_after
    assert all(seg.size <= CONFIG.segment_bytes for seg in log.segments)
    assert verify(log.dir)[0] == len(log.segments)
    assert log.segments[0].base_offset == 0  # the first segment keeps the log start


# -- policy, ratio and checkpoint ----------------------------------------------------------------


def test_only_compact_policies_compact_and_only_delete_policies_apply_retention(
    make_log: MakeLog, clock: FakeClock
) -> None:
    log = make_log(replace(CONFIG, cleanup_policy="delete"))
    fill(log, clock)
    assert log.compact(clock.now, force=True).skipped == "cleanup.policy=delete does not compact"

    log.update_config(replace(CONFIG, retention_ms=1))
    assert log.apply_retention(clock.now + DAY_MS) == 0  # compact only: retention never deletes

    log.update_config(replace(CONFIG, retention_ms=1, cleanup_policy="delete,compact"))
    assert log.config.cleanup_policy == "compact,delete"
    assert log.apply_retention(clock.now + DAY_MS) > 0


def test_the_dirty_ratio_decides_and_the_checkpoint_survives_a_restart(
    make_log: MakeLog, reopen: Reopen, clock: FakeClock
) -> None:
    config = replace(CONFIG, min_cleanable_dirty_ratio=0.5)
    log = make_log(config)
    fill(log, clock, batches=40)
    first = log.compact(clock.now)
    assert first.cleaned and first.dirty_ratio == 1.0
    assert log.cleaner_checkpoint == first.end_offset == log.active_segment.base_offset
    assert (log.dir / "cleaner.offset").read_text() == f"0\n{first.end_offset}\n"

    put(log, (b"k1", b"new"), ts=clock.now)
    log.roll()
    log.high_watermark = log.log_end_offset
    skipped = log.compact(clock.now)
    assert skipped.skipped is not None and "min.cleanable.dirty.ratio=0.5" in skipped.skipped
    assert 0 < skipped.dirty_ratio <= 0.5 and skipped.first_dirty_offset == first.end_offset
    log.close()

    log = reopen(config)
    assert log.cleaner_checkpoint == first.end_offset
    forced = log.compact(clock.now, force=True)
    assert forced.cleaned and forced.first_dirty_offset == first.end_offset
    assert latest(rows(log))[b"k1"] == b"new"
    log.close()


def test_truncation_below_the_checkpoint_lowers_it(make_log: MakeLog, clock: FakeClock) -> None:
    log = make_log(CONFIG)
    fill(log, clock)
    result = log.compact(clock.now)
    log.truncate_to(result.end_offset - 5)
    assert log.cleaner_checkpoint == log.log_end_offset < result.end_offset
    assert (log.dir / "cleaner.offset").read_text() == f"0\n{log.log_end_offset}\n"


def test_a_truncation_during_a_run_abandons_it(make_log: MakeLog, clock: FakeClock, faults: ScriptedFaults) -> None:
    log = make_log(CONFIG)
    before = fill(log, clock)
    put(log, (b"k", b"above the high watermark"), ts=clock.now)
    end = log.log_end_offset

    def truncate_once(step: str) -> None:
        faults.on_step = None
        log.truncate_to(end - 1)  # a follower dropping its unreplicated tail, while the cleaner writes

    faults.on_step = truncate_once
    faults.armed = True
    result = log.compact(clock.now)
    faults.armed = False

    assert result.skipped is not None and result.skipped.startswith("abandoned")
    assert rows(log) == before and log.cleaner_checkpoint is None
    assert not [name for name in files(log.dir) if name.endswith((".cleaned", ".swap", ".deleted"))]


def test_cleanup_policy_and_compaction_keys_are_validated() -> None:
    assert LogConfig(cleanup_policy=" delete , compact").cleanup_policy == "compact,delete"
    with pytest.raises(ValueError, match=r"cleanup.policy='compacted'"):
        LogConfig(cleanup_policy="compacted")
    with pytest.raises(ValueError, match=r"min.cleanable.dirty.ratio=1.5 must be between 0 and 1"):
        LogConfig().with_overrides({"min.cleanable.dirty.ratio": "1.5"})
    with pytest.raises(ValueError, match=r"min.cleanable.dirty.ratio='half' is not a number"):
        LogConfig().with_overrides({"min.cleanable.dirty.ratio": "half"})
    with pytest.raises(ValueError, match=r"delete.retention.ms=-1 must be at least 0"):
        LogConfig().with_overrides({"delete.retention.ms": "-1"})
    config = LogConfig().with_overrides(
        {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "60000"}
    )
    assert (config.compacts, config.deletes, config.min_cleanable_dirty_ratio) == (True, False, 0.25)
    described = config.to_topic_configs()
    assert [described[k] for k in ("cleanup.policy", "delete.retention.ms", "min.cleanable.dirty.ratio")] == [
        "compact",
        str(DAY_MS),
        "0.25",
    ]


# -- crashes -------------------------------------------------------------------------------------


def test_a_crash_at_any_step_of_a_run_recovers_to_a_valid_log_with_every_latest_value(
    make_log: MakeLog, reopen: Reopen, clock: FakeClock, faults: ScriptedFaults, tmp_path: Path
) -> None:
    crash_at = 1
    while True:
        shutil.rmtree(tmp_path / "t-0", ignore_errors=True)
        log = make_log(CONFIG)
        fill(log, clock)
        log.compact(clock.now)  # leaves small segments, which the run below merges
        before = fill(log, clock, batches=20)
        recovery_point = log.recovery_point
        faults.steps, faults.crash_at, faults.armed = [], crash_at, True
        try:
            result = log.compact(clock.now)
            crashed = False
        except LogDirOfflineError:
            crashed = True
        finally:
            faults.armed = False
        where = f"crash at step {crash_at} of {faults.steps}"
        log.close()  # offline after a crash: closes the files, flushes nothing

        log = reopen(CONFIG, clean=False, recovery_point=recovery_point)
        after = rows(log)
        assert set(after) <= set(before), where
        assert latest(after) == latest(before), where
        assert log.log_end_offset == before[-1][0] + 1, where
        assert verify(log.dir)[0] == len(log.segments), where
        assert not [n for n in files(log.dir) if n.endswith((".cleaned", ".swap", ".deleted", ".tmp"))], where
        log.high_watermark = log.log_end_offset
        assert log.compact(clock.now, force=True).cleaned, where  # and it compacts again
        assert latest(rows(log)) == latest(before), where
        log.close()
        if not crashed:
            break
        crash_at += 1
    assert result.cleaned and result.segments_after < result.segments_before  # groups were merged
    # Per group: fsync its .cleaned file; rename to .swap, 3 renames per old segment to .deleted,
    # rename in place, 4 fsyncs.
    assert crash_at > 9 * result.segments_after, faults.steps


def test_recovery_finishes_a_swap_and_rolls_back_a_damaged_one(
    make_log: MakeLog, reopen: Reopen, clock: FakeClock
) -> None:
    log = make_log(CONFIG)
    before = fill(log, clock)
    first, second = log.segments[0], log.segments[1]
    first_bytes, second_bytes = first.log_path.read_bytes(), second.log_path.read_bytes()
    log.close()
    directory = first.log_path.parent

    # A swap that merged the first two segments and kept only the second one's batches.
    (directory / (first.log_path.name + ".swap")).write_bytes(second_bytes)
    (directory / (first.index.path.name + ".swap")).write_bytes(b"junk")
    log = reopen(CONFIG, clean=False)
    assert rows(log) == [r for r in before if r[0] >= second.base_offset]
    assert log.segments[0].base_offset == 0
    log.close()

    # A torn swap next to its intact original: rolled back.
    (directory / (first.log_path.name + ".swap")).write_bytes(first_bytes[:-3])
    log, report = load_log(directory, TP, CONFIG, clean_shutdown=False, faults=FaultPoints(), clock=clock)
    assert report.swaps_finished == [first.log_path.name + ".swap"]
    assert rows(log) == [r for r in before if r[0] >= second.base_offset]
    log.close()


# -- the model -----------------------------------------------------------------------------------

MODEL_CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=500,
    index_interval_bytes=100,
    file_delete_delay_ms=0,
    delete_retention_ms=1000,
    min_cleanable_dirty_ratio=0.3,
)
record_strategy = st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", None]), st.booleans(), st.integers(0, 60))


class CompactionModel(RuleBasedStateMachine):
    """The log, compacted at random moments, always replays to the model's latest values.

    The model is every record appended (offset -> key, value, timestamp). Invariants: each
    record the log serves is one that was appended at that offset; replaying the log gives
    the latest value of each key; nothing at or above the high watermark, and no record
    with a null key, is ever removed. Runs may crash at any fsync and the log is reopened.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.clock = FakeClock()
        self.faults = ScriptedFaults()
        self.log: PartitionLog = create_log(self.tmp / "t-0", TP, MODEL_CONFIG, faults=self.faults, clock=self.clock)
        self.appended: dict[int, Row] = {}
        self.counter = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp)

    @rule(
        records=st.lists(record_strategy, min_size=1, max_size=4),
        codec=st.sampled_from(list(Compression)),
        idempotent=st.booleans(),
    )
    def append(self, records: list[tuple[bytes | None, bool, int]], codec: Compression, idempotent: bool) -> None:
        self.counter += 1
        values = [
            (k, b"%d-%d-" % (self.counter, i) + b"v" * size if live else None)
            for i, (k, live, size) in enumerate(records)
        ]
        pid, epoch, sequence = (5, 0, self.counter * 4) if idempotent else (-1, -1, -1)
        batch = build_batch(
            [(self.clock.now, k, v) for k, v in values],
            compression=codec,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=sequence,
        )
        info = self.log.append(batch)
        for i, (k, v) in enumerate(values):
            self.appended[info.base_offset + i] = (info.base_offset + i, k, v, self.clock.now)

    @rule()
    def advance_high_watermark(self) -> None:
        self.log.high_watermark = self.log.log_end_offset

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(ms=st.integers(0, 1500))
    def tick(self, ms: int) -> None:
        self.clock.now += ms

    @rule(force=st.booleans())
    def compact(self, force: bool) -> None:
        result = self.log.compact(self.clock.now, force=force)
        assert result.end_offset <= self.log.high_watermark or result.skipped

    @rule(step=st.integers(1, 10))
    def crash_while_compacting(self, step: int) -> None:
        self.faults.steps, self.faults.crash_at, self.faults.armed = [], step, True
        try:
            self.log.compact(self.clock.now, force=True)
            crashed = False
        except LogDirOfflineError:
            crashed = True
        finally:
            self.faults.armed = False
        event("crashed while compacting" if crashed else "compacted without a crash")
        if crashed:
            self.reopen(clean=False)

    @rule()
    def purge(self) -> None:
        self.log.purge_deleted(self.clock.now)

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        hw, recovery_point = self.log.high_watermark, self.log.recovery_point
        if not clean:
            self.log.mark_offline()  # a crash: close the files, flush nothing
        self.log.close()
        self.log, report = load_log(
            self.tmp / "t-0",
            TP,
            MODEL_CONFIG,
            clean_shutdown=clean,
            recovery_point=recovery_point,
            high_watermark=hw,
            faults=self.faults,
            clock=self.clock,
        )
        assert report.bytes_dropped == 0

    @invariant()
    def replays_to_the_latest_values(self) -> None:
        served = rows(self.log, 0)
        assert all(self.appended.get(r[0]) == r for r in served)
        assert latest(served) == latest(sorted(self.appended.values()))
        hw = self.log.high_watermark
        kept = {r[0] for r in served}
        assert all(o in kept for o, r in self.appended.items() if o >= hw or r[1] is None)
        assert self.log.log_end_offset == max(self.appended, default=-1) + 1


TestCompactionModel = CompactionModel.TestCase
TestCompactionModel.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
