"""The C clients of the node benchmark: kcat and librdkafka's rdkafka_performance, run as processes.

A Python client caps a broker benchmark at what one Python thread can hand to librdkafka. These
two programs are librdkafka with a thin C loop around it, so a broker that is faster than the
Python client still shows its speed:

- **kcat** (Debian's): ``kcat -C -b B -t T -p 0 -o 0 -c N -e`` with stdout to /dev/null, timed
  from spawning it to its exit;
- **rdkafka_performance** (``examples/`` of librdkafka's source, built by
  ``bench/build_rdkafka_performance.sh``): ``-C`` reads N records the same way, ``-P`` produces N
  records of 100 bytes; it prints its own summary line, which :func:`parse_perf_consume` and
  :func:`parse_perf_produce` read.

Which librdkafka they run is chosen by :func:`client_env`: ``system`` is Debian's (2.0.2, what
both are linked against), ``wheel`` puts the confluent-kafka wheel's librdkafka (the Python
client's, 2.16) first on ``LD_LIBRARY_PATH``. librdkafka 2.0.2 cannot parse tansu 0.6's
ApiVersions response ("Protocol read buffer underflow for ApiVersion v3"), so only ``wheel`` can
measure both brokers. :func:`loopback_mb_per_s` measures the machine's TCP loopback, the ceiling
of any consumer on 127.0.0.1. Every parser here is a pure function of the tool's text.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka

from ._procs import HOST, BenchError
from ._report import REPO_ROOT

KCAT = "kcat"
RDKAFKA_PERFORMANCE = "rdkafka_performance"
C_CLIENTS = (KCAT, RDKAFKA_PERFORMANCE)
DEFAULT_RDKAFKA_PERFORMANCE = REPO_ROOT / ".cache" / "rdkafka-perf" / "rdkafka_performance"
BUILD_HINT = "build it with `make rdkafka-perf` (bench/build_rdkafka_performance.sh, root on Debian)"
LIBRDKAFKA_CHOICES = ("wheel", "system")
LOOPBACK_CHUNK = 1 << 20  # bytes per send and per receive of the loopback measurement

_KCAT_VERSION = re.compile(r"librdkafka (\d+\.\d+\.\d+\S*)")
_PERF_VERSION = re.compile(r"librdkafka version (\d+\.\d+\.\d+\S*)")
_KCAT_EOF = re.compile(r"Reached end of topic (\S+) \[(\d+)\] at offset (\d+)")
_PERF_CONSUMED = re.compile(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms")
_PERF_PRODUCED = re.compile(
    r"% (\d+) messages produced \((\d+) bytes\), (\d+) delivered \(offset (-?\d+), (\d+) failed\) in (\d+)ms"
)


# -- parsing the tools' output (pure) --------------------------------------------------------


def parse_kcat_version(text: str) -> str | None:
    """The librdkafka version in ``kcat -V`` (``... librdkafka 2.0.2 builtin.features=...``), or None."""
    found = _KCAT_VERSION.search(text)
    return found.group(1) if found else None


def parse_perf_version(text: str) -> str | None:
    """The librdkafka version in rdkafka_performance's usage text (``librdkafka version 2.0.2 (0x...)``)."""
    found = _PERF_VERSION.search(text)
    return found.group(1) if found else None


def parse_kcat_eof(text: str) -> dict[int, int]:
    """Partition -> offset of every ``Reached end of topic T [p] at offset N`` line kcat printed."""
    return {int(m.group(2)): int(m.group(3)) for m in _KCAT_EOF.finditer(text)}


@dataclass(frozen=True)
class PerfConsumed:
    """rdkafka_performance -C's summary: its clock runs from the first record to the last."""

    messages: int
    bytes: int
    ms: int


@dataclass(frozen=True)
class PerfProduced:
    """rdkafka_performance -P's summary: its clock runs from the first produce to the last delivery report."""

    produced: int
    bytes: int
    delivered: int
    last_offset: int
    failed: int
    ms: int


def parse_perf_consume(text: str) -> PerfConsumed:
    """The last consumer summary line (the final one; progress lines come before it).

    Raises ``BenchError`` quoting the text's end if there is none.
    """
    found = list(_PERF_CONSUMED.finditer(text))
    if not found:
        raise BenchError(f"no consumer summary in rdkafka_performance's output: {text[-500:]!r}")
    messages, size, ms = (int(g) for g in found[-1].groups())
    return PerfConsumed(messages, size, ms)


def parse_perf_produce(text: str) -> PerfProduced:
    """The last producer summary line. Raises ``BenchError`` quoting the text's end if there is none."""
    found = list(_PERF_PRODUCED.finditer(text))
    if not found:
        raise BenchError(f"no producer summary in rdkafka_performance's output: {text[-500:]!r}")
    return PerfProduced(*(int(g) for g in found[-1].groups()))


# -- the clients -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CClient:
    """A C client ready to run: its executable, the environment choosing its librdkafka, that version."""

    name: str
    executable: Path
    env: dict[str, str]
    librdkafka: str

    def describe(self) -> str:
        return f"{self.name} ({self.executable}, librdkafka {self.librdkafka})"


def client_env(librdkafka: str, scratch: Path) -> dict[str, str]:
    """The environment to run a C client with the chosen librdkafka (``system`` or ``wheel``).

    ``wheel``: a directory under ``scratch`` holding ``librdkafka.so.1`` -> the confluent-kafka
    wheel's library goes first on ``LD_LIBRARY_PATH`` (librdkafka keeps its ABI within 2.x).
    Raises ``BenchError`` if the wheel has no such library.
    """
    env = dict(os.environ)
    if librdkafka == "system":
        return env
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so.1"))
    if not found:
        raise BenchError(f"no librdkafka*.so.1 in {libs}: use --c-librdkafka system")
    lib_dir = scratch / "librdkafka-wheel"
    lib_dir.mkdir(parents=True, exist_ok=True)
    link = lib_dir / "librdkafka.so.1"
    link.unlink(missing_ok=True)
    link.symlink_to(found[0])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(lib_dir), env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def _version_output(argv: list[str], env: dict[str, str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return done.stdout + done.stderr


def find_c_clients(
    wanted: tuple[str, ...], perf_path: Path, librdkafka: str, scratch: Path
) -> tuple[list[CClient], list[str]]:
    """The wanted C clients that are present, and a note for each one that is not (why, and what to do)."""
    env = client_env(librdkafka, scratch) if wanted else dict(os.environ)
    clients: list[CClient] = []
    missing: list[str] = []
    for name in wanted:
        if name == KCAT:
            path = shutil.which(KCAT)
            if path is None:
                missing.append("kcat is not on PATH: its tests are skipped (apt-get install kcat, or .ci/ensure-kcat)")
                continue
            version = parse_kcat_version(_version_output([path, "-V"], env))
            clients.append(CClient(KCAT, Path(path), env, version or "unknown"))
        else:
            if not (perf_path.is_file() and os.access(perf_path, os.X_OK)):
                missing.append(f"rdkafka_performance not found at {perf_path}: its tests are skipped; {BUILD_HINT}")
                continue
            version = parse_perf_version(_version_output([str(perf_path), "-h"], env))
            clients.append(CClient(RDKAFKA_PERFORMANCE, perf_path, env, version or "unknown"))
    return clients, missing


@dataclass(frozen=True)
class CRun:
    """One run of a C client: records moved, seconds from spawn to exit, the tool's own seconds
    (rdkafka_performance only), the broker's CPU seconds in the run and the client's own
    (user + system, every thread, from its rusage)."""

    records: int
    seconds: float
    tool_seconds: float | None
    broker_cpu_s: float
    argv: list[str]
    client_cpu_s: float


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(
    client: CClient, argv: list[str], timeout: float, cpu: Callable[[], float], *, stdout: int
) -> tuple[subprocess.CompletedProcess[str], float, float, float]:
    """Run ``argv`` to its exit in a session of its own; (its result, seconds, broker CPU seconds,
    its own CPU seconds). The client's CPU is this process's waited-for children's over the run:
    the client is the only child that ends meanwhile (the brokers run on)."""
    cpu_start, children_start = cpu(), _children_cpu_s()
    start = time.perf_counter()
    try:
        done = subprocess.run(
            argv,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=client.env,
            timeout=timeout,
            start_new_session=True,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{client.name} did not finish within {timeout} s: {' '.join(argv)}") from exc
    seconds = time.perf_counter() - start
    return done, seconds, cpu() - cpu_start, _children_cpu_s() - children_start


def kcat_consume(
    client: CClient, bootstrap: str, topic: str, count: int, timeout: float, cpu: Callable[[], float]
) -> CRun:
    """kcat reads ``count`` records of ``topic`` partition 0 from offset 0, printing them to /dev/null.

    ``-c count`` ends it at the last record (``-e`` alone would wait one fetch.wait.max.ms, 500 ms,
    for the empty fetch that reports the end); ``-e`` still ends it if the partition holds fewer,
    and then its "Reached end" line (kept by leaving out ``-q``) says where: a ``BenchError``.
    Offset 0 rather than ``beginning``: librdkafka 2.16 waits 500 ms before the ListOffsets of a
    logical offset.
    """
    argv = [str(client.executable), "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "0"]
    argv += ["-c", str(count), "-e"]
    done, seconds, cpu_s, client_s = _timed(client, argv, timeout, cpu, stdout=subprocess.DEVNULL)
    ended = parse_kcat_eof(done.stderr)
    if done.returncode != 0 or ended:
        raise BenchError(
            f"kcat read {topic!r} short of {count} records (exit {done.returncode}, end offsets {ended}): "
            f"{done.stderr[-500:]}"
        )
    return CRun(count, seconds, None, cpu_s, argv, client_s)


def perf_consume(
    client: CClient, bootstrap: str, topic: str, count: int, timeout: float, cpu: Callable[[], float]
) -> CRun:
    """rdkafka_performance -C reads ``count`` records of ``topic`` partition 0 from offset 0.

    Raises ``BenchError`` if it exits non-zero or its summary counts another number of records.
    """
    argv = [str(client.executable), "-C", "-t", topic, "-p", "0", "-b", bootstrap, "-o", "0"]
    argv += ["-c", str(count), "-e", "-q"]
    done, seconds, cpu_s, client_s = _timed(client, argv, timeout, cpu, stdout=subprocess.PIPE)
    summary = parse_perf_consume(done.stdout)
    if done.returncode != 0 or summary.messages != count:
        raise BenchError(
            f"rdkafka_performance read {summary.messages} of {count} records of {topic!r} "
            f"(exit {done.returncode}): {done.stdout[-300:]} {done.stderr[-300:]}"
        )
    return CRun(count, seconds, summary.ms / 1e3, cpu_s, argv, client_s)


def perf_produce(
    client: CClient,
    bootstrap: str,
    topic: str,
    count: int,
    value_bytes: int,
    acks: str,
    settings: dict[str, str],
    timeout: float,
    cpu: Callable[[], float],
) -> CRun:
    """rdkafka_performance -P sends ``count`` records of ``value_bytes`` to ``topic`` partition 0 with
    ``acks`` (``1`` or ``all``) and ``settings`` as ``-X`` properties. The figure is its own clock.

    Raises ``BenchError`` unless it exits 0 with every record delivered and none failed.
    """
    argv = [str(client.executable), "-P", "-t", topic, "-p", "0", "-b", bootstrap, "-s", str(value_bytes)]
    argv += ["-c", str(count), "-a", "-1" if acks == "all" else acks]
    for key, value in settings.items():
        argv += ["-X", f"{key}={value}"]
    done, seconds, cpu_s, client_s = _timed(client, argv, timeout, cpu, stdout=subprocess.PIPE)
    summary = parse_perf_produce(done.stdout)
    if done.returncode != 0 or summary.delivered != count or summary.failed:
        raise BenchError(
            f"rdkafka_performance delivered {summary.delivered} of {count} records to {topic!r}, "
            f"{summary.failed} failed (exit {done.returncode}): {done.stdout[-300:]} {done.stderr[-300:]}"
        )
    return CRun(count, seconds, summary.ms / 1e3, cpu_s, argv, client_s)


# -- the loopback ceiling --------------------------------------------------------------------


def loopback_mb_per_s(total_bytes: int, chunk: int = LOOPBACK_CHUNK, timeout: float = 120.0) -> float:
    """MB/s (10^6 B) of one TCP connection over 127.0.0.1: a thread ``sendall``s ``chunk``-byte
    buffers until ``total_bytes`` are sent while this thread ``recv_into``s one reused buffer,
    timed from the connection until the last byte has arrived. Both calls release the GIL.

    Raises ``BenchError`` if the connection ends early or the transfer outlives ``timeout``.
    """
    with socket.create_server((HOST, 0)) as server:
        port = server.getsockname()[1]
        errors: list[BaseException] = []

        def send() -> None:
            data = memoryview(bytearray(os.urandom(1024) * (chunk // 1024)))
            try:
                with socket.create_connection((HOST, port), timeout=timeout) as out:
                    left = total_bytes
                    while left > 0:
                        out.sendall(data[: min(chunk, left)])
                        left -= min(chunk, left)
            except OSError as exc:
                errors.append(exc)

        start = time.perf_counter()
        sender = threading.Thread(target=send, name="loopback-sender", daemon=True)
        sender.start()
        server.settimeout(timeout)
        received = 0
        conn, _ = server.accept()
        with conn:
            conn.settimeout(timeout)
            buffer = memoryview(bytearray(chunk))
            while received < total_bytes:
                n = conn.recv_into(buffer)
                if n == 0:
                    break
                received += n
        seconds = time.perf_counter() - start
        sender.join(timeout)
    if received != total_bytes or errors:
        raise BenchError(f"loopback: {received} of {total_bytes} bytes arrived; sender errors: {errors}")
    return total_bytes / 1e6 / seconds
