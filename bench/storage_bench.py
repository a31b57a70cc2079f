"""Storage benchmark: strait's storage engine side by side with plain files, in one run.

Run from the repository root::

    .venv/bin/python -m bench.storage_bench --out bench/results

It measures, for batches of 16 KiB and of 1 MiB (built once with ``build_batch``; every
append is of the same bytes):

1. append: ``PartitionLog.append`` (a LogManager with one log dir, default LogConfig)
   against ``os.write`` of the same bytes to a plain file in the same directory;
2. read: the whole log through ``PartitionLog.read`` slices and ``os.sendfile`` into a sink
   (a socketpair drained by a thread, and ``/dev/null``), against a read/write copy loop
   and a raw ``os.sendfile`` loop over the same segment files into the same sink;
3. recovery: ``load_log(clean_shutdown=False, recovery_point=0)`` of that log, with a warm
   and a cold page cache, against a plain ``pread`` + CRC-32C pass over the same files;

then samples the 16 KiB append loop with py-spy (pyinstrument if py-spy cannot run) and
lists the hot spots. Each figure is the median of ``--repeats`` runs whose order alternates;
files are deleted and the page cache settled (``fsync`` + ``sync``, untimed) between runs.
It prints a table and writes ``storage-<date>.md`` and ``.json`` to ``--out``. Throughputs
are in MB/s, 1 MB = 10^6 bytes. The goals are in bench/README.md.

Why one long file: a benchmark script is read top to bottom as the record of one experiment
(its cases, their order, what each number means); the pieces every benchmark shares live in
``bench/_report.py``, ``bench/_profile.py``, ``bench/_clients.py`` and ``bench/_site.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import crc32c

from storage import FaultPoints, LogConfig, LogManager, PartitionLog, TopicPartition, load_log, wall_clock_ms
from storage.records import Compression, build_batch, recompress

from ._cli import scratch_dir, stepper
from ._profile import loop_shares, py_spy_path, py_spy_record, pyinstrument_stacks
from ._report import (
    MB,
    command_line,
    machine_info,
    machine_lines,
    markdown_table,
    report_head,
    result_stem,
    run_fields,
    settings_json,
    write_json,
    write_markdown,
)

KiB = 1024
MiB = 1024 * KiB
TP = TopicPartition("bench", 0)
BASE_TIMESTAMP = 1_700_000_000_000
VALUE_BYTES = 1000  # record value size; the last record of a batch is sized to hit the batch size exactly
SCAN_CHUNK = 8 * MiB  # the recovery baseline reads like storage._scan does
SOCKET_BUFFER = 4 * MiB
GOAL_APPEND_RATIO = {16 * 1024: 0.9, 1024 * 1024: 0.95}  # batch size -> strait / os.write, the goals
FSYNC_EVERY_BATCHES = 16  # the middle fsync policy: flush.messages = this many batches' records
FSYNC_FLUSH_MS = 100  # the time-based fsync policy: flush.ms
GOAL_RECOVERY_MBPS = 300.0
LOOP_FUNCTION = "_strait_append_loop"  # the profiler keeps only samples inside this function
TOP_N = 12


# -- settings and inputs -------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    out: Path
    base_dir: Path
    append_small_mib: int
    append_large_mib: int
    log_mib: int
    repeats: int
    fsync_mib: int
    recompress_mib: int
    fetch_bytes: int
    fsync: bool
    cold: bool
    profiler: str
    profile_seconds: float
    quick: bool


@dataclass(frozen=True)
class Batch:
    label: str  # "16 KiB"
    data: bytes
    records: int

    @property
    def size(self) -> int:
        return len(self.data)


def make_batch(size: int, label: str) -> Batch:
    """An uncompressed batch of exactly ``size`` bytes of ~1 KB random values, offsets from 0."""
    count = max(1, size // (VALUE_BYTES + 32))
    payload = os.urandom(size)
    last = VALUE_BYTES
    for _ in range(8):  # the varint lengths move by a byte or two; converge on the exact size
        records: list[tuple[int, bytes | None, bytes | None]] = [
            (BASE_TIMESTAMP + i, None, payload[i * VALUE_BYTES : (i + 1) * VALUE_BYTES]) for i in range(count - 1)
        ]
        start = (count - 1) * VALUE_BYTES
        records.append((BASE_TIMESTAMP + count - 1, None, payload[start : start + last]))
        data = build_batch(records)
        if len(data) == size:
            return Batch(label, data, count)
        last += size - len(data)
    raise ValueError(f"cannot build a batch of exactly {size} bytes")


# -- helpers -------------------------------------------------------------------------------


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / MB / seconds


def settle() -> None:
    """Write back everything dirty so that the next run starts from the same state."""
    os.sync()
    gc.collect()


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def sendfile_all(out_fd: int, in_fd: int, position: int, length: int) -> None:
    while length > 0:
        sent = os.sendfile(out_fd, in_fd, position, length)
        if sent == 0:
            raise OSError(f"sendfile made no progress at {position}")
        position += sent
        length -= sent


def evict(paths: list[Path]) -> None:
    """Drop the (clean) cached pages of ``paths``: the next read goes to the device."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def new_manager(log_dir: Path) -> tuple[LogManager, PartitionLog]:
    manager = LogManager([log_dir], broker_id=0)
    manager.startup()
    return manager, manager.create_log(TP)


@dataclass
class Comparison:
    """Timed runs of strait and of one baseline over the same bytes."""

    name: str
    nbytes: int
    batches: int  # batches appended, delivered or scanned per run
    baseline: str  # short name of the baseline
    baseline_detail: str
    goal: str = ""
    strait_s: list[float] = field(default_factory=list)
    baseline_s: list[float] = field(default_factory=list)
    passed: bool | None = None

    @property
    def strait_mbps(self) -> float:
        return mbps(self.nbytes, statistics.median(self.strait_s))

    @property
    def baseline_mbps(self) -> float:
        return mbps(self.nbytes, statistics.median(self.baseline_s))

    @property
    def strait_us_per_batch(self) -> float:
        return statistics.median(self.strait_s) / self.batches * 1e6

    @property
    def baseline_us_per_batch(self) -> float:
        return statistics.median(self.baseline_s) / self.batches * 1e6

    @property
    def ratio(self) -> float:
        """Of the median runs (the issue's rule: medians of at least 3 runs)."""
        return self.strait_mbps / self.baseline_mbps

    @property
    def best_ratio(self) -> float:
        return min(self.baseline_s) / min(self.strait_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bytes": self.nbytes,
            "batches": self.batches,
            "baseline": self.baseline,
            "baseline_detail": self.baseline_detail,
            "strait_seconds": self.strait_s,
            "baseline_seconds": self.baseline_s,
            "strait_mbps_median": self.strait_mbps,
            "baseline_mbps_median": self.baseline_mbps,
            "strait_mbps_best": mbps(self.nbytes, min(self.strait_s)),
            "baseline_mbps_best": mbps(self.nbytes, min(self.baseline_s)),
            "strait_mbps_all": [mbps(self.nbytes, s) for s in self.strait_s],
            "baseline_mbps_all": [mbps(self.nbytes, s) for s in self.baseline_s],
            "strait_us_per_batch_median": self.strait_us_per_batch,
            "baseline_us_per_batch_median": self.baseline_us_per_batch,
            "ratio_median": self.ratio,
            "ratio_best": self.best_ratio,
            "goal": self.goal,
            "passed": self.passed,
        }


def alternate(repeats: int, runs: list[Callable[[], None]]) -> None:
    """Call every run ``repeats`` times, rotating which goes first so cache effects even out."""
    for rep in range(repeats):
        shift = rep % len(runs)
        for run in runs[shift:] + runs[:shift]:
            run()


# -- 1. append -----------------------------------------------------------------------------


def _strait_append_loop(log: PartitionLog, data: bytes, count: int, fsync: bool) -> float:
    append = log.append
    start = time.perf_counter()
    for _ in range(count):
        append(data)
    if fsync:
        log.flush()
    return time.perf_counter() - start


def _plain_write_loop(fd: int, data: bytes, count: int, fsync: bool, crc: bool) -> float:
    write = os.write
    size = len(data)
    checksum = crc32c.crc32c
    body = memoryview(data)[21:]  # what a batch's CRC-32C covers
    start = time.perf_counter()
    for _ in range(count):
        if crc:
            checksum(body)
        written = write(fd, data)
        if written != size:
            write_all(fd, memoryview(data)[written:])
    if fsync:
        os.fsync(fd)
    return time.perf_counter() - start


def strait_append_run(workdir: Path, batch: Batch, count: int, fsync: bool) -> float:
    log_dir = workdir / "append-strait"
    manager, log = new_manager(log_dir)
    gc.collect()
    elapsed = _strait_append_loop(log, batch.data, count, fsync)
    if log.log_end_offset != count * batch.records:
        raise AssertionError(f"log ends at {log.log_end_offset}, expected {count * batch.records}")
    manager.shutdown()  # fsyncs, untimed
    shutil.rmtree(log_dir)
    settle()
    return elapsed


def plain_append_run(workdir: Path, batch: Batch, count: int, fsync: bool, *, crc: bool = False) -> float:
    path = workdir / "append-plain.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)  # as a segment's fd
    try:
        gc.collect()
        elapsed = _plain_write_loop(fd, batch.data, count, fsync, crc)
        os.fsync(fd)  # untimed, as strait's shutdown
    finally:
        os.close(fd)
    path.unlink()
    settle()
    return elapsed


def append_goal_met(batch_size: int, ratio: float) -> bool:
    return ratio >= GOAL_APPEND_RATIO[batch_size]


def bench_append(settings: Settings, workdir: Path, batch: Batch, total_mib: int) -> list[Comparison]:
    count = max(1, total_mib * MiB // batch.size)
    name = f"append {batch.label}"
    result = Comparison(
        name,
        count * batch.size,
        count,
        "os.write",
        "os.write (O_APPEND) of the same bytes to a file in the same directory",
        goal=f"ratio >= {GOAL_APPEND_RATIO[batch.size]}",
    )
    floor = Comparison(
        name,
        count * batch.size,
        count,
        "os.write+CRC",
        "os.write of the same bytes plus a CRC-32C of each batch (the check a validating broker makes)",
    )

    def strait() -> None:
        elapsed = strait_append_run(workdir, batch, count, settings.fsync)
        result.strait_s.append(elapsed)
        floor.strait_s.append(elapsed)

    def plain() -> None:
        result.baseline_s.append(plain_append_run(workdir, batch, count, settings.fsync))

    def plain_crc() -> None:
        floor.baseline_s.append(plain_append_run(workdir, batch, count, settings.fsync, crc=True))

    alternate(settings.repeats, [plain, strait, plain_crc])
    result.passed = append_goal_met(batch.size, result.ratio)
    return [result, floor]


# -- 1b. fsync policies ---------------------------------------------------------------------


@dataclass(frozen=True)
class FsyncPolicy:
    """A topic's flush settings and where os.write's baseline fsyncs to match them."""

    label: str  # "flush.messages=1"
    config: LogConfig
    every_batches: int  # the baseline fsyncs after this many writes; 0: by time, as flush.ms
    flush_ms: int = 0


def fsync_policies(batch: Batch) -> list[FsyncPolicy]:
    per = FSYNC_EVERY_BATCHES * batch.records
    return [
        FsyncPolicy("flush.messages=1", LogConfig(flush_messages=1), 1),
        FsyncPolicy(f"flush.messages={per}", LogConfig(flush_messages=per), FSYNC_EVERY_BATCHES),
        FsyncPolicy(f"flush.ms={FSYNC_FLUSH_MS}", LogConfig(flush_ms=FSYNC_FLUSH_MS), 0, FSYNC_FLUSH_MS),
    ]


def strait_fsync_run(workdir: Path, batch: Batch, count: int, policy: FsyncPolicy) -> float:
    """Appends under ``policy``; for flush.ms the loop asks ``maybe_flush`` after every append,
    as a flush scheduler with no delay of its own would."""
    log_dir = workdir / "fsync-strait"
    manager = LogManager([log_dir], broker_id=0, config=policy.config)
    manager.startup()
    log = manager.create_log(TP)
    append, data, by_time = log.append, batch.data, policy.flush_ms > 0
    gc.collect()
    start = time.perf_counter()
    for _ in range(count):
        append(data)
        if by_time:
            log.maybe_flush(wall_clock_ms())
    elapsed = time.perf_counter() - start
    manager.shutdown()
    shutil.rmtree(log_dir)
    settle()
    return elapsed


def plain_fsync_run(workdir: Path, batch: Batch, count: int, policy: FsyncPolicy) -> float:
    """os.write of the same bytes, os.fsync after every ``every_batches`` writes, or once the
    oldest unsynced write is ``flush_ms`` old (checked after each write)."""
    path = workdir / "fsync-plain.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    data, every, flush_s = batch.data, policy.every_batches, policy.flush_ms / 1000
    try:
        gc.collect()
        start = time.perf_counter()
        first_unsynced: float | None = None
        for n in range(1, count + 1):
            write_all(fd, data)
            if every:
                if n % every == 0:
                    os.fsync(fd)
                continue
            now = time.perf_counter()
            if first_unsynced is None:
                first_unsynced = now
            elif now - first_unsynced >= flush_s:
                os.fsync(fd)
                first_unsynced = None
        elapsed = time.perf_counter() - start
        os.fsync(fd)  # untimed, as strait's shutdown
    finally:
        os.close(fd)
    path.unlink()
    settle()
    return elapsed


def bench_fsync_policies(settings: Settings, workdir: Path, batch: Batch) -> list[Comparison]:
    """Each topic fsync policy against os.write + os.fsync at the same points (no goal: measured)."""
    count = max(1, settings.fsync_mib * MiB // batch.size)
    results = []
    for policy in fsync_policies(batch):
        result = Comparison(
            f"fsync {batch.label}, {policy.label}",
            count * batch.size,
            count,
            f"os.write+fsync ({policy.label})",
            f"os.write of the same bytes, os.fsync where {policy.label} has strait flush "
            "(strait's flush also writes and fsyncs the two indexes unless flush.messages=1, as Kafka's does)",
        )

        def strait(policy: FsyncPolicy = policy, result: Comparison = result) -> None:
            result.strait_s.append(strait_fsync_run(workdir, batch, count, policy))

        def plain(policy: FsyncPolicy = policy, result: Comparison = result) -> None:
            result.baseline_s.append(plain_fsync_run(workdir, batch, count, policy))

        alternate(settings.repeats, [plain, strait])
        results.append(result)
    return results


# -- 1c. a topic codec: recompression -----------------------------------------------------------

RECOMPRESS_CASES = (("none", "lz4"), ("gzip", "lz4"), ("lz4", "zstd"))  # produced codec -> topic codec


def _recompress_append_loop(log: PartitionLog, data: bytes, codec: Compression, count: int) -> float:
    """What a topic whose compression.type is ``codec`` does per produced batch: recompress, append."""
    append = log.append
    start = time.perf_counter()
    for _ in range(count):
        append(recompress(data, codec))
    return time.perf_counter() - start


def recompress_run(workdir: Path, data: bytes, codec: Compression, count: int) -> float:
    log_dir = workdir / "recompress-strait"
    manager, log = new_manager(log_dir)
    gc.collect()
    elapsed = _recompress_append_loop(log, data, codec, count)
    manager.shutdown()
    shutil.rmtree(log_dir)
    settle()
    return elapsed


def bench_recompression(settings: Settings, workdir: Path) -> list[Comparison]:
    """Appends with a topic codec (the slow path) against the same batches kept as produced."""
    results = []
    batch = make_batch(16 * KiB, "16 KiB")
    count = max(1, settings.recompress_mib * MiB // batch.size)  # counted in uncompressed bytes
    for source, target in RECOMPRESS_CASES:
        data = batch.data if source == "none" else recompress(batch.data, Compression.from_name(source))
        codec = Compression.from_name(target)
        result = Comparison(
            f"recompress 16 KiB, {source} -> {target}",
            count * batch.size,
            count,
            f"as produced ({source})",
            "PartitionLog.append of the produced batch as it is (compression.type=producer, the fast path); "
            "MB/s count the uncompressed batch bytes",
        )

        def slow(data: bytes = data, codec: Compression = codec, result: Comparison = result) -> None:
            result.strait_s.append(recompress_run(workdir, data, codec, count))

        as_produced = Batch(batch.label, data, batch.records)

        def fast(as_produced: Batch = as_produced, result: Comparison = result) -> None:
            result.baseline_s.append(strait_append_run(workdir, as_produced, count, False))

        alternate(settings.repeats, [fast, slow])
        results.append(result)
    return results


# -- shared log for reads and recovery -----------------------------------------------------


def build_log(log_dir: Path, batch: Batch, total_mib: int) -> Path:
    """Write a log of ``total_mib`` with strait, stop it cleanly; returns the partition dir."""
    manager, log = new_manager(log_dir)
    for _ in range(max(1, total_mib * MiB // batch.size)):
        log.append(batch.data)
    manager.shutdown()
    return log_dir / TP.dir_name


def segment_logs(partition_dir: Path) -> list[Path]:
    return sorted(partition_dir.glob("*.log"))


def open_log(partition_dir: Path, *, clean: bool) -> tuple[PartitionLog, float, int]:
    """``load_log`` the partition; returns the log, the seconds it took and segments recovered."""
    start = time.perf_counter()
    log, report = load_log(
        partition_dir,
        TP,
        LogConfig(),
        clean_shutdown=clean,
        recovery_point=0,
        faults=FaultPoints(),
        clock=wall_clock_ms,
    )
    elapsed = time.perf_counter() - start
    if report.bytes_dropped or report.first_error:
        raise AssertionError(f"recovery dropped {report.bytes_dropped} bytes: {report.first_error}")
    return log, elapsed, report.segments_recovered


# -- 2. read -------------------------------------------------------------------------------


class Sink(Protocol):
    name: str

    @property
    def fd(self) -> int: ...

    def start(self, total: int) -> None: ...

    def finish(self) -> None: ...

    def close(self) -> None: ...


class SocketSink:
    """A socketpair; a thread drains the far end. ``finish`` waits until every byte arrived."""

    name = "socketpair"

    def __init__(self) -> None:
        self._near, self._far = socket.socketpair()
        self._near.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        self._far.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        self._thread: threading.Thread | None = None
        self._received = 0
        self._expected = 0

    @property
    def fd(self) -> int:
        return self._near.fileno()

    def start(self, total: int) -> None:
        self._expected, self._received = total, 0
        self._thread = threading.Thread(target=self._drain, args=(total,), daemon=True)
        self._thread.start()

    def _drain(self, total: int) -> None:
        buf = memoryview(bytearray(MiB))
        while self._received < total:
            n = self._far.recv_into(buf, min(len(buf), total - self._received))
            if n == 0:
                return
            self._received += n

    def finish(self) -> None:
        assert self._thread is not None
        self._thread.join()
        if self._received != self._expected:
            raise AssertionError(f"sink got {self._received} bytes, expected {self._expected}")

    def close(self) -> None:
        self._near.close()
        self._far.close()


class NullSink:
    """``/dev/null``: sendfile into it moves no data, so this isolates the per-fetch bookkeeping."""

    name = "/dev/null"

    def __init__(self) -> None:
        self._fd = os.open(os.devnull, os.O_WRONLY)

    @property
    def fd(self) -> int:
        return self._fd

    def start(self, total: int) -> None:
        pass

    def finish(self) -> None:
        pass

    def close(self) -> None:
        os.close(self._fd)


def strait_read_run(log: PartitionLog, batch: Batch, sink: Sink, fetch_bytes: int) -> float:
    """Fetch the whole log as a consumer would: ``read`` from the next offset, sendfile the slices."""
    sink.start(log.size_bytes)
    start = time.perf_counter()
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        slices = log.read(offset, fetch_bytes)
        if not slices:
            raise AssertionError(f"read({offset}) returned nothing before the log end {end}")
        for piece in slices:
            sendfile_all(sink.fd, piece.fd, piece.position, piece.length)
            # Every batch is the same size, so the consumer's next offset follows from the length.
            offset += piece.length // batch.size * batch.records
    sink.finish()
    return time.perf_counter() - start


def copy_read_run(paths: list[Path], sink: Sink, fetch_bytes: int) -> float:
    """The same files through user space: read into one reused buffer, written to the sink."""
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    buf = memoryview(bytearray(fetch_bytes))
    try:
        sink.start(sum(os.fstat(fd).st_size for fd in fds))
        start = time.perf_counter()
        for fd in fds:
            while n := os.readv(fd, [buf]):
                write_all(sink.fd, buf[:n])
        sink.finish()
        return time.perf_counter() - start
    finally:
        for fd in fds:
            os.close(fd)


def sendfile_read_run(paths: list[Path], sink: Sink, fetch_bytes: int) -> float:
    """The same files with ``os.sendfile`` in fetch-sized pieces and no bookkeeping: the ceiling."""
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    try:
        sizes = [os.fstat(fd).st_size for fd in fds]
        sink.start(sum(sizes))
        start = time.perf_counter()
        for fd, size in zip(fds, sizes, strict=True):
            for pos in range(0, size, fetch_bytes):
                sendfile_all(sink.fd, fd, pos, min(fetch_bytes, size - pos))
        sink.finish()
        return time.perf_counter() - start
    finally:
        for fd in fds:
            os.close(fd)


def bench_read(settings: Settings, partition_dir: Path, batch: Batch) -> list[Comparison]:
    log, _, _ = open_log(partition_dir, clean=True)
    paths = segment_logs(partition_dir)
    results: list[Comparison] = []
    try:
        for sink in (SocketSink(), NullSink()):
            try:
                name = f"read {batch.label} -> {sink.name}"
                vs_copy = Comparison(
                    name,
                    log.size_bytes,
                    log.size_bytes // batch.size,
                    "read/write copy",
                    f"os.readv of the segment files into a {settings.fetch_bytes} B buffer, written to the same sink",
                )
                vs_sendfile = Comparison(
                    name,
                    log.size_bytes,
                    log.size_bytes // batch.size,
                    "raw sendfile",
                    f"os.sendfile of the segment files in {settings.fetch_bytes} B pieces, no offset bookkeeping",
                )

                def strait(sink: Sink = sink, a: Comparison = vs_copy, b: Comparison = vs_sendfile) -> None:
                    elapsed = strait_read_run(log, batch, sink, settings.fetch_bytes)
                    a.strait_s.append(elapsed)
                    b.strait_s.append(elapsed)

                def copy(sink: Sink = sink, c: Comparison = vs_copy) -> None:
                    c.baseline_s.append(copy_read_run(paths, sink, settings.fetch_bytes))

                def raw(sink: Sink = sink, c: Comparison = vs_sendfile) -> None:
                    c.baseline_s.append(sendfile_read_run(paths, sink, settings.fetch_bytes))

                alternate(settings.repeats, [copy, strait, raw])
                results += [vs_copy, vs_sendfile]
            finally:
                sink.close()
    finally:
        log.close()
    return results


# -- 3. recovery ---------------------------------------------------------------------------


def strait_recovery_run(partition_dir: Path, cold: bool) -> float:
    if cold:
        evict(list(partition_dir.iterdir()))
    gc.collect()
    log, elapsed, recovered = open_log(partition_dir, clean=False)
    expected = len(segment_logs(partition_dir))
    log.close()  # fsyncs the rebuilt indexes, untimed
    if recovered != expected:
        raise AssertionError(f"{recovered} segments recovered, expected {expected}")
    return elapsed


def scan_run(paths: list[Path], cold: bool) -> float:
    """The floor of a recovery scan: read the files in 8 MiB chunks and CRC-32C each chunk."""
    if cold:
        evict(paths)
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    try:
        start = time.perf_counter()
        for fd in fds:
            pos = 0
            while chunk := os.pread(fd, SCAN_CHUNK, pos):
                crc32c.crc32c(chunk)
                pos += len(chunk)
        return time.perf_counter() - start
    finally:
        for fd in fds:
            os.close(fd)


def bench_recovery(settings: Settings, partition_dir: Path, batch: Batch) -> list[Comparison]:
    paths = segment_logs(partition_dir)
    nbytes = sum(p.stat().st_size for p in paths)
    results = []
    for cold in (False, True) if settings.cold else (False,):
        cache = "cold" if cold else "warm"
        result = Comparison(
            f"recovery {batch.label} {cache}",
            nbytes,
            nbytes // batch.size,
            "pread+CRC",
            "pread of the segment files in 8 MiB chunks + CRC-32C of each chunk",
            goal=f">= {GOAL_RECOVERY_MBPS:.0f} MB/s",
        )

        def strait(cold: bool = cold, r: Comparison = result) -> None:
            r.strait_s.append(strait_recovery_run(partition_dir, cold))

        def scan(cold: bool = cold, r: Comparison = result) -> None:
            r.baseline_s.append(scan_run(paths, cold))

        alternate(settings.repeats, [scan, strait])
        result.passed = result.strait_mbps >= GOAL_RECOVERY_MBPS
        results.append(result)
    return results


# -- profile of the 16 KiB append path -----------------------------------------------------


@dataclass
class Profile:
    tool: str
    samples: int  # samples inside the append loop
    rate_hz: int
    seconds: float
    functions: list[dict[str, Any]]  # {"function", "file", "self_pct", "total_pct"}
    lines: list[dict[str, Any]]  # {"function", "file", "line", "code", "self_pct"}
    note: str = ""  # why a fallback was used


def profile_child(workdir: Path, seconds: float, total_mib: int) -> None:
    """The process py-spy samples: fresh 16 KiB append runs for about ``seconds``."""
    batch = make_batch(16 * KiB, "16 KiB")
    count = max(1, total_mib * MiB // batch.size)
    spent = 0.0
    while spent < seconds:
        spent += strait_append_run(workdir, batch, count, fsync=False)


def profile_with_py_spy(settings: Settings, workdir: Path) -> Profile:
    py_spy = shutil.which("py-spy") or str(py_spy_path())
    rate = 1000
    child = [
        sys.executable,
        "-m",
        "bench.storage_bench",
        "--profile-child",
        "--dir",
        str(workdir),
        "--profile-seconds",
        str(settings.profile_seconds),
        "--append-16k-mib",
        str(settings.append_small_mib),
    ]
    # --nonblocking: pausing the process for each sample (the default) inflates the share of
    # the line in a system call (os.write: ~58 % instead of the ~43 % a direct measurement gives).
    flags = ["--idle", "--nonblocking"]
    stacks, elapsed = py_spy_record(py_spy, child, rate=rate, flags=flags, output=workdir / "py-spy.txt")
    samples, functions, lines = loop_shares(stacks, LOOP_FUNCTION, TOP_N)
    return Profile("py-spy record --idle --nonblocking", samples, rate, elapsed, functions, lines)


def profile_with_pyinstrument(settings: Settings, workdir: Path) -> Profile:
    interval = 0.001
    stacks, elapsed = pyinstrument_stacks(
        lambda: profile_child(workdir, settings.profile_seconds, settings.append_small_mib), interval
    )
    samples, functions, lines = loop_shares(stacks, LOOP_FUNCTION, TOP_N)
    note = "pyinstrument records a function's first line, not the sampled line: read the line table as functions."
    return Profile("pyinstrument", samples, round(1 / interval), elapsed, functions, lines, note)


def run_profile(settings: Settings, workdir: Path) -> Profile | None:
    if settings.profiler == "none":
        return None
    if settings.profiler == "py-spy":
        try:
            return profile_with_py_spy(settings, workdir)
        except (OSError, RuntimeError) as exc:
            note = f"py-spy could not run ({exc}); pyinstrument was used instead."
            print(note, file=sys.stderr)
            return dataclasses.replace(profile_with_pyinstrument(settings, workdir), note=note)
    return profile_with_pyinstrument(settings, workdir)


# -- output --------------------------------------------------------------------------------


def rows(results: list[Comparison]) -> list[list[str]]:
    table = []
    for r in results:
        verdict = "" if r.passed is None else ("PASS" if r.passed else "FAIL")
        goal = f"{r.goal} {verdict}".strip()
        table.append(
            [
                r.name,
                r.baseline,
                f"{r.strait_mbps:,.0f}",
                f"{r.baseline_mbps:,.0f}",
                f"{r.ratio:.2f}",
                f"{r.strait_us_per_batch:,.1f}",
                f"{r.baseline_us_per_batch:,.1f}",
                goal or "-",
            ]
        )
    return table


HEADERS = ["benchmark", "baseline", "strait MB/s", "base MB/s", "ratio", "strait us/batch", "base us/batch", "goal"]


def text_table(table: list[list[str]]) -> str:
    shown = [HEADERS, *table]
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]))]
    out = []
    for n, row in enumerate(shown):
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        out.append("  ".join(cells))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _display(function: str) -> str:
    return "__init__ of a dataclass (AppendInfo)" if function.startswith("__create_fn__") else function


def goal_summary(results: list[Comparison]) -> str:
    parts = []
    goals = " / ".join(f"{r:g}" for r in GOAL_APPEND_RATIO.values())
    for kind, goal in (("append", f"ratio >= {goals}"), ("recovery", f">= {GOAL_RECOVERY_MBPS:.0f} MB/s")):
        gated = [r for r in results if r.passed is not None and r.name.startswith(kind)]
        if not gated:
            continue
        figures = ", ".join(
            f"{r.name.removeprefix(kind).strip()}: {r.ratio:.3f}"
            if kind == "append"
            else f"{r.name.removeprefix(kind).strip()}: {r.strait_mbps:,.0f} MB/s"
            for r in gated
        )
        verdict = "met" if all(r.passed for r in gated) else "NOT met"
        parts.append(f"{kind} goal ({goal}) {verdict} ({figures})")
    return "; ".join(parts) + "."


def profile_markdown(profile: Profile | None) -> str:
    if profile is None:
        return "Not run (`--profiler none`).\n"
    if not profile.samples:
        return f"{profile.tool}: no samples inside the append loop.\n"
    if profile.tool.startswith("py-spy"):
        where = "a child process"
        c_calls = "C calls such as `os.write` or `crc32c` count as their caller's self time (see the line table)"
    else:
        where = "the benchmark process"
        c_calls = "built-in calls are rows of their own; the profiling hook slows Python code, overstating its share"
    head = (
        (f"{profile.note}\n\n" if profile.note else "")
        + f"`{profile.tool}` at {profile.rate_hz} Hz on {where} repeating 16 KiB append runs "
        f"({profile.seconds:.1f} s in all, setup included); {profile.samples} samples inside "
        f"`{LOOP_FUNCTION}` (= 100 %). *Self* is time with the function on top of the stack; "
        f"{c_calls}; *total* includes callees.\n\n"
    )
    fn_rows = [
        [f"`{_display(f['function'])}`", f["file"], f"{f['self_pct']:.1f}", f"{f['total_pct']:.1f}"]
        for f in profile.functions[:TOP_N]
    ]
    line_rows = [
        [f"{x['file']}:{x['line']}", f"`{x['function']}`", f"`{x['code']}`", f"{x['self_pct']:.1f}"]
        for x in profile.lines
    ]
    return (
        head
        + "By function (self time):\n\n"
        + markdown_table(["function", "file", "self %", "total %"], fn_rows)
        + "\n\nBy line (self time):\n\n"
        + markdown_table(["line", "function", "code", "self %"], line_rows)
        + "\n"
    )


def write_report(
    settings: Settings,
    machine: dict[str, Any],
    batches: list[Batch],
    results: list[Comparison],
    profile: Profile | None,
    started: datetime.datetime,
    elapsed: float,
) -> tuple[Path, Path]:
    stem = result_stem(settings.out, "storage", started)
    data = run_fields(started, elapsed, command_line("bench.storage_bench", sys.argv[1:])) | {
        "settings": settings_json(settings),
        "machine": machine,
        "batches": [{"label": b.label, "bytes": b.size, "records": b.records} for b in batches],
        "results": [r.to_json() for r in results],
        "profile": None if profile is None else asdict(profile),
    }
    json_path = stem.with_suffix(".json")
    write_json(json_path, data)
    m = machine
    mount = m["mount"]
    md = [
        *report_head(
            f"# Storage benchmark, {started.date().isoformat()}",
            data,
            json_path,
            figures="Raw numbers",
            measures="What each line measures",
        ),
        "",
        "## Machine",
        "",
        *machine_lines(m),
        f"- Target dir: `{m['target_dir']}`, filesystem `{m['fs_type_stat']}` by `stat -f -c %T` (one name for "
        "the ext2/3/4 magic), "
        f"`{m['fs_type_mounts']}` in /proc/mounts (`{mount.get('device', '?')}` on `{mount.get('mount', '?')}`, "
        f"`{mount.get('options', '?')}`)",
        f"- Python: {m['python']} ({m['python_build']})",
        "",
        "## Settings",
        "",
        f"- Batches: {', '.join(f'{b.label} = {b.size} B, {b.records} records' for b in batches)}; "
        "uncompressed, ~1 KB random values, built once, every append of the same bytes",
        f"- Append: {settings.append_small_mib} MiB of 16 KiB batches and {settings.append_large_mib} MiB of "
        f"1 MiB batches per run; fsync in the timed part: {'yes' if settings.fsync else 'no (page cache)'}",
        f"- Read and recovery: a log of {settings.log_mib} MiB per batch size; fetches of {settings.fetch_bytes} bytes",
        f"- Medians of {settings.repeats} runs each, alternating order; MB/s with 1 MB = 10^6 bytes",
        f"- fsync policies: {settings.fsync_mib} MiB of 16 KiB batches per run, each policy against os.write "
        "plus os.fsync at the same points",
        f"- Topic codecs: {settings.recompress_mib} MiB (uncompressed bytes) of 16 KiB batches per run, recompressed "
        "with `storage.records.recompress` then appended, against appending them as produced",
        "- Recovery *warm*: the log is in the page cache; *cold*: its pages were dropped first "
        "(`posix_fadvise(DONTNEED)` after fsync)",
        "",
        "## Results",
        "",
        goal_summary(results),
        "",
        markdown_table(HEADERS, rows(results)),
        "",
        "Ratio = strait MB/s / baseline MB/s, of the median runs (best-run ratios are in the JSON, "
        "`ratio_best`); us/batch = microseconds per batch appended, delivered or scanned. Baselines:",
        "",
        *sorted({f"- {r.baseline}: {r.baseline_detail}" for r in results}),
        "",
        "## Hot spots of the 16 KiB append path",
        "",
        profile_markdown(profile),
    ]
    md_path = stem.with_suffix(".md")
    write_markdown(md_path, md)
    return md_path, json_path


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> tuple[Settings, argparse.Namespace]:
    p = argparse.ArgumentParser(prog="python -m bench.storage_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("bench/results"), help="where the .md and .json go")
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="scratch files go under this dir")
    p.add_argument("--append-16k-mib", type=int, default=256, help="data appended per run, 16 KiB batches")
    p.add_argument("--append-1m-mib", type=int, default=512, help="data appended per run, 1 MiB batches")
    p.add_argument("--log-mib", type=int, default=512, help="size of the log read and recovered, per batch size")
    p.add_argument("--repeats", type=int, default=5, help="runs per measurement (at least 3); the median counts")
    p.add_argument("--fsync-mib", type=int, default=16, help="data appended per run of each fsync policy")
    p.add_argument("--recompress-mib", type=int, default=32, help="data appended per run of each recompression case")
    p.add_argument("--fetch-bytes", type=int, default=MiB, help="max bytes per PartitionLog.read (a fetch)")
    p.add_argument("--fsync", action="store_true", help="include an fsync at the end of each append run")
    p.add_argument("--no-cold", action="store_true", help="skip the cold-cache recovery runs")
    p.add_argument("--profiler", choices=["py-spy", "pyinstrument", "none"], default="py-spy")
    p.add_argument("--profile-seconds", type=float, default=5.0, help="seconds of 16 KiB appends to sample")
    p.add_argument("--quick", action="store_true", help="small sizes and 3 repeats: a smoke test, not a result")
    p.add_argument("--profile-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.append_16k_mib, args.append_1m_mib, args.log_mib, args.fsync_mib, args.recompress_mib = 16, 32, 32, 1, 2
        args.repeats, args.profile_seconds = 3, 1.0
    sizes = (args.append_16k_mib, args.append_1m_mib, args.log_mib, args.fsync_mib, args.recompress_mib)
    if min(*sizes, args.fetch_bytes) < 1:
        p.error("sizes, --fsync-mib, --recompress-mib and --fetch-bytes must be positive")
    if args.repeats < 3:
        p.error(f"--repeats {args.repeats}: a median needs at least 3 runs")
    settings = Settings(
        out=args.out,
        base_dir=args.dir,
        append_small_mib=args.append_16k_mib,
        append_large_mib=args.append_1m_mib,
        log_mib=args.log_mib,
        repeats=args.repeats,
        fsync_mib=args.fsync_mib,
        recompress_mib=args.recompress_mib,
        fetch_bytes=args.fetch_bytes,
        fsync=args.fsync,
        cold=not args.no_cold,
        profiler=args.profiler,
        profile_seconds=args.profile_seconds,
        quick=args.quick,
    )
    return settings, args


def main(argv: list[str] | None = None) -> int:
    settings, args = parse_args(argv)
    if args.profile_child:
        profile_child(settings.base_dir, settings.profile_seconds, settings.append_small_mib)
        return 0
    started = datetime.datetime.now().astimezone()
    t0 = time.perf_counter()
    small, large = make_batch(16 * KiB, "16 KiB"), make_batch(MiB, "1 MiB")
    results: list[Comparison] = []
    step = stepper(t0)
    with scratch_dir(settings.base_dir, "strait-bench-") as workdir:
        machine = machine_info(workdir)
        for batch, mib in ((small, settings.append_small_mib), (large, settings.append_large_mib)):
            step(f"append, {batch.label} batches, {mib} MiB x {settings.repeats} x 3")
            results += bench_append(settings, workdir, batch, mib)
        step(f"fsync policies, 16 KiB batches, {settings.fsync_mib} MiB x {settings.repeats} x 2 per policy")
        results += bench_fsync_policies(settings, workdir, small)
        step(f"topic codecs (recompression), 16 KiB batches, {settings.recompress_mib} MiB x {settings.repeats} x 2")
        results += bench_recompression(settings, workdir)
        for batch in (small, large):
            step(f"writing a {settings.log_mib} MiB log of {batch.label} batches")
            partition_dir = build_log(workdir / f"log-{batch.size}", batch, settings.log_mib)
            settle()
            step(f"read, {batch.label} batches")
            results += bench_read(settings, partition_dir, batch)
            step(f"recovery, {batch.label} batches")
            results += bench_recovery(settings, partition_dir, batch)
            shutil.rmtree(partition_dir.parent)
            settle()
        step(f"profiling the 16 KiB append path with {settings.profiler}")
        profile = run_profile(settings, workdir)
    elapsed = time.perf_counter() - t0
    order = ["append", "fsync", "recompress", "read", "recovery"]
    results.sort(key=lambda r: order.index(r.name.split()[0]))  # stable: batch sizes stay in order
    md_path, json_path = write_report(settings, machine, [small, large], results, profile, started, elapsed)
    print(text_table(rows(results)))
    if profile is not None and profile.samples:
        print(f"\nHot spots, 16 KiB appends ({profile.tool}, {profile.samples} samples), self % / total %:")
        for f in profile.functions[:TOP_N]:
            print(f"  {f['self_pct']:5.1f} / {f['total_pct']:5.1f}  {f['function']} ({f['file']})")
    print(f"\nwrote {md_path} and {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
