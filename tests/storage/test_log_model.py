"""The partition log behaves like a simple list of records under random operations.

The model is a list of batches ``(base offset, [values])`` and a log start offset.
Operations: append, read, truncate, roll, delete records, retention by size, reopen after a
clean stop, reopen after a crash (nothing lost: every append reached the page cache).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from storage import FaultPoints, LogConfig, PartitionLog, create_log, load_log
from storage.records import RecordBatch, build_batch, iter_batches
from tests.storage.helpers import TP, FakeClock

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=128, file_delete_delay_ms=0)


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.clock = FakeClock()
        self.log: PartitionLog = create_log(self.tmp / "t-0", TP, CONFIG, faults=FaultPoints(), clock=self.clock)
        self.batches: list[tuple[int, list[bytes]]] = []
        self.start = 0
        self.counter = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp)

    @property
    def end(self) -> int:
        return self.batches[-1][0] + len(self.batches[-1][1]) if self.batches else self.start

    def records_from(self, offset: int) -> list[tuple[int, bytes]]:
        out = []
        for base, values in self.batches:
            if base + len(values) > offset:
                out += [(base + i, v) for i, v in enumerate(values)]
        return out

    @rule(n=st.integers(1, 4), size=st.integers(0, 150))
    def append(self, n: int, size: int) -> None:
        values = [f"{self.counter}-{i}-".encode() + b"x" * size for i in range(n)]
        self.counter += 1
        info = self.log.append(build_batch([(self.clock.now, None, v) for v in values]))
        assert info.base_offset == self.end
        self.batches.append((info.base_offset, values))
        self.log.high_watermark = self.log.log_end_offset

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        raw = self.log.read_bytes(offset, 1 << 30)
        got = [
            (r.offset, r.value) for pos, h in iter_batches(raw) for r in RecordBatch(raw[pos : pos + h.size]).records()
        ]
        assert got == self.records_from(offset)

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        base = data.draw(st.sampled_from([b for b, _ in self.batches]))
        self.log.truncate_to(base)
        self.batches = [(b, v) for b, v in self.batches if b < base]
        self.start = min(self.start, base)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        self.log.delete_records_before(offset)
        self.start = max(self.start, offset)
        self.batches = [(b, v) for b, v in self.batches if b + len(v) > self.start]
        self.log.purge_deleted(self.clock.now)

    @rule(limit=st.integers(0, 3000))
    def retention(self, limit: int) -> None:
        self.log.update_config(
            LogConfig(
                segment_bytes=600,
                index_interval_bytes=128,
                retention_bytes=limit,
                retention_ms=-1,
                file_delete_delay_ms=0,
            )
        )
        self.log.apply_retention(self.clock.now)
        self.log.update_config(CONFIG)
        segments = self.log.segments  # Kafka's rule: delete the oldest while the rest still holds >= limit
        assert len(segments) == 1 or self.log.size_bytes - segments[0].size < limit
        self.start = max(self.start, self.log.log_start_offset)
        self.batches = [(b, v) for b, v in self.batches if b + len(v) > self.start]

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        start, hw = self.log.log_start_offset, self.log.high_watermark
        if clean:
            self.log.close()
        else:
            for seg in self.log.segments:  # a crash: files stay as they are, nothing is flushed
                seg.close()
        self.log, report = load_log(
            self.tmp / "t-0",
            TP,
            CONFIG,
            clean_shutdown=clean,
            log_start_offset=start,
            high_watermark=hw,
            faults=FaultPoints(),
            clock=self.clock,
        )
        assert report.bytes_dropped == 0

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
