"""Crash recovery: torn tails, flipped bytes, lost indexes and leftovers, at random positions."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import FaultPoints, LogConfig, create_log, load_log
from storage.records import Compression, build_batch
from tests.storage.helpers import TP, FakeClock, batch

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=300)


def write_log(directory: Path, sizes: list[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """Append batches of ``(records, value size)``; return ``(segment base, position, size, next offset)`` each."""
    log = create_log(directory, TP, CONFIG, faults=FaultPoints(), clock=FakeClock())
    layout = []
    codecs = list(Compression)
    for i, (n, size) in enumerate(sizes):
        data = build_batch(
            [(1000 + i, b"k%d" % j, bytes([i % 250]) * size) for j in range(n)], compression=codecs[i % len(codecs)]
        )
        info = log.append(data)
        seg = log.active_segment
        layout.append((seg.base_offset, seg.size - len(data), len(data), info.last_offset + 1))
    log.close()
    return layout


batches_strategy = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 400)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches_strategy, st.data())
def test_a_cut_at_any_byte_keeps_exactly_the_complete_batches_before_it(sizes: list, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        layout = write_log(directory, sizes)
        victim = data.draw(st.sampled_from(sorted({b for b, *_ in layout})), label="segment")
        log_path = directory / f"{victim:020d}.log"
        cut = data.draw(st.integers(0, log_path.stat().st_size), label="cut")
        os.truncate(log_path, cut)

        log, report = load_log(directory, TP, CONFIG, clean_shutdown=False, faults=FaultPoints(), clock=FakeClock())

        in_victim = [b for b in layout if b[0] == victim]
        kept_in_victim = sum(size for _, pos, size, _ in in_victim if pos + size <= cut)
        torn = cut != kept_in_victim  # the cut falls inside a batch
        kept = [
            b
            for b in layout
            if b[0] < victim or (b[0] == victim and b[1] + b[2] <= cut) or (b[0] > victim and not torn)
        ]
        later_bytes = sum(size for base, _, size, _ in layout if base > victim) if torn else 0
        assert log.log_end_offset == (kept[-1][3] if kept else 0)
        assert report.bytes_dropped == (cut - kept_in_victim) + later_bytes
        if torn:  # everything after the torn batch follows a hole: deleted
            assert all(s.base_offset <= victim for s in log.segments)
        elif victim != layout[-1][0] and cut < sum(size for *_, size, _ in in_victim):
            # a clean cut at a batch boundary before later segments leaves a gap: kept, and reported
            victim_end = max((n for _, pos, size, n in in_victim if pos + size <= cut), default=victim)
            assert report.gaps[0][0] == victim_end
        assert log.read_bytes(log.log_start_offset, 1 << 30) == b"".join(
            (directory / f"{b:020d}.log").read_bytes()[p : p + s] for b, p, s, _ in kept
        )
        log.append(batch(1))  # the log is writable after recovery
        log.close()


@settings(max_examples=40, deadline=None)
@given(batches_strategy, st.data())
def test_a_flipped_byte_drops_its_batch_and_everything_after(sizes: list, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        layout = write_log(directory, sizes)
        index = data.draw(st.integers(0, len(layout) - 1), label="batch")
        base, pos, size, _ = layout[index]
        offset_in_batch = data.draw(st.integers(17, size - 1), label="byte")  # under the CRC (or the CRC itself)
        log_path = directory / f"{base:020d}.log"
        raw = bytearray(log_path.read_bytes())
        raw[pos + offset_in_batch] ^= 0x5A
        log_path.write_bytes(raw)

        log, report = load_log(directory, TP, CONFIG, clean_shutdown=False, faults=FaultPoints(), clock=FakeClock())
        assert log.log_end_offset == (layout[index - 1][3] if index else 0)
        assert report.first_error is not None and f"at byte {pos}" in report.first_error
        log.close()


def test_after_a_clean_stop_only_a_damaged_tail_is_scanned(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    layout = write_log(directory, [(2, 100)] * 20)
    log, report = load_log(directory, TP, CONFIG, clean_shutdown=True, faults=FaultPoints(), clock=FakeClock())
    assert (report.segments_recovered, report.indexes_rebuilt, report.bytes_dropped) == (0, 0, 0)
    assert log.log_end_offset == layout[-1][3] == log.recovery_point
    log.close()


def test_unclean_recovery_starts_at_the_segment_holding_the_recovery_point(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    layout = write_log(directory, [(2, 100)] * 80)
    bases = sorted({b for b, *_ in layout})
    assert len(bases) >= 3
    log, report = load_log(
        directory,
        TP,
        CONFIG,
        clean_shutdown=False,
        recovery_point=bases[-2] + 1,
        faults=FaultPoints(),
        clock=FakeClock(),
    )
    assert report.segments_recovered == 2
    log.close()


def test_missing_or_corrupt_indexes_are_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    write_log(directory, [(2, 100)] * 20)
    first = directory / f"{0:020d}.index"
    expected = first.read_bytes()
    assert expected, "the test needs index entries"
    first.unlink()
    (directory / f"{0:020d}.timeindex").write_bytes(b"\x00" * 5)
    log, report = load_log(directory, TP, CONFIG, clean_shutdown=True, faults=FaultPoints(), clock=FakeClock())
    assert report.indexes_rebuilt == 1 and report.bytes_dropped == 0
    log.close()
    assert first.read_bytes() == expected


def test_leftovers_of_interrupted_work_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    write_log(directory, [(1, 10)])
    for name in ["00000000000000000007.log.deleted", "x.tmp", "00000000000000000009.index", "y.cleaned"]:
        (directory / name).write_bytes(b"junk")
    log, report = load_log(directory, TP, CONFIG, clean_shutdown=True, faults=FaultPoints(), clock=FakeClock())
    assert sorted(report.leftovers_removed) == [
        "00000000000000000007.log.deleted",
        "00000000000000000009.index",
        "x.tmp",
        "y.cleaned",
    ]
    assert sorted(p.name for p in directory.iterdir()) == [f"{0:020d}.index", f"{0:020d}.log", f"{0:020d}.timeindex"]
    log.close()
