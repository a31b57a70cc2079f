"""What moving a replica between log dirs (AlterReplicaLogDirs) costs the partition's appends.

A log of ``--log-mib`` (16 KiB batches of ~1 KB records) is moved from one log dir to the other
by ``LogManager.alter_replica_dir`` while a thread appends one 16 KiB batch per millisecond, as
the node's event loop would; the move is unthrottled or held to ``--throttle-mib`` MiB/s
(``replica.alter.log.dirs.io.max.bytes.per.second``). Reported per run: the move's wall time
and rate, and the appends' latency (median, 99th percentile, maximum) during the move and, as
the baseline, during ``--idle-seconds`` without one. The maximum is the swap: appends wait for
the locked part (the last batches' copy, the fsync of what they add, two renames). Each figure
is the median of ``--repeats`` runs. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from storage import LogConfig, LogManager, PartitionLog, TopicPartition
from storage.records import build_batch

TP = TopicPartition("moving", 0)
BATCH = build_batch([(1_700_000_000_000 + i, f"k{i}".encode(), b"v" * 1000) for i in range(16)])


def appends_during(plog: PartitionLog, action: threading.Event, run: float | None) -> list[float]:
    """Append every millisecond until ``action`` is set (or for ``run`` seconds); the latencies."""
    latencies: list[float] = []
    deadline = None if run is None else time.perf_counter() + run
    while not action.is_set() and (deadline is None or time.perf_counter() < deadline):
        t0 = time.perf_counter()
        plog.append(BATCH)
        latencies.append(time.perf_counter() - t0)
        time.sleep(0.001)
    return latencies


def one_run(work: Path, log_mib: int, throttle_mib: float, idle_s: float) -> dict[str, float]:
    m = LogManager([work / "a", work / "b"], LogConfig(), broker_id=1, move_bytes_per_second=int(throttle_mib * 2**20))
    m.startup()
    m._preferred[TP] = work / "a"
    plog = m.create_log(TP)
    for _ in range((log_mib << 20) // len(BATCH)):
        plog.append(BATCH)
    plog.flush()
    idle = appends_during(plog, threading.Event(), idle_s)
    done = threading.Event()
    moving: list[float] = []
    appender = threading.Thread(target=lambda: moving.extend(appends_during(plog, done, None)))
    appender.start()
    size = plog.size_bytes
    t0 = time.perf_counter()
    m.alter_replica_dir(TP, work / "b")
    while m.moves():
        time.sleep(0.002)
    took = time.perf_counter() - t0
    done.set()
    appender.join()
    m.shutdown()
    q_idle, q_move = statistics.quantiles(idle, n=100), statistics.quantiles(moving, n=100)
    return {
        "move_s": took,
        "move_mib_s": size / 2**20 / took,
        "idle_p50_us": q_idle[49] * 1e6,
        "idle_p99_us": q_idle[98] * 1e6,
        "idle_max_us": max(idle) * 1e6,
        "move_p50_us": q_move[49] * 1e6,
        "move_p99_us": q_move[98] * 1e6,
        "move_max_us": max(moving) * 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log-mib", type=int, default=100)
    parser.add_argument("--throttle-mib", type=float, default=0.0, help="MiB/s; 0: unthrottled")
    parser.add_argument("--idle-seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the log dirs go (a temporary dir by default)")
    args = parser.parse_args(argv)
    runs = []
    for _ in range(args.repeats):
        work = Path(tempfile.mkdtemp(prefix="log-move-", dir=args.dir))
        try:
            runs.append(one_run(work, args.log_mib, args.throttle_mib, args.idle_seconds))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"| figure (median of {args.repeats}) | value |\n|---|---|")
    for key in runs[0]:
        print(f"| {key} | {statistics.median(r[key] for r in runs):.1f} |")


if __name__ == "__main__":
    main()
