"""What TLS and SASL cost: one strait node's produce and consume throughput per listener protocol.

Run from the repository root::

    .venv/bin/python -m bench.security_bench --out bench/results
    .venv/bin/python -m bench.security_bench --quick --out /tmp/bench   # smoke test, ~20 s

One node serves three listeners at once: PLAINTEXT, SSL (TLS 1.3, a P-256 certificate made
with openssl for the run) and SASL_SSL (SCRAM-SHA-512; the user is created through
AlterUserScramCredentials). For each listener, in an order that rotates from one repeat to the
next, a confluent-kafka (librdkafka) producer writes ``--records`` 100-byte values (acks=1,
``bench._clients.PRODUCER_SETTINGS``) to a new one-partition topic, timed from the first
``produce()`` to the last delivery report; then a consumer reads them back from offset 0 with
``assign()``, timed until the last record. The node's CPU seconds (user + system) are read for
each phase. Each figure is the median of ``--repeat`` runs; the ratios divide SSL and
SASL_SSL by PLAINTEXT of the same run. Throughputs count value bytes, 1 MB = 10^6 bytes.

The consumer sets ``queued.min.messages`` to 1,000,000 (librdkafka's default is 100,000). With
the default, librdkafka 2.0.2 stops fetching once 100,000 records wait in its local queue and
fetches again only at its broker thread's next wake-up: 300,000 records of 100 bytes then read at
about 17 MB/s from any broker fast enough to fill the queue, strait's PLAINTEXT listener and the
Rust peer tansu alike (measured side by side: 18 MB/s with the default, 138 MB/s with the
setting), while the slower TLS path stayed under the threshold. That measured the client's
back-off, not the listener.

The Python consumer costs the client more per record than the node spends (about 40 MB/s on
2 cores whatever the listener), so a second consume figure comes from Debian's kcat (C, nothing
printed) reading a ``--bulk-records`` topic (2,000,000 records, 200 MB) to its end through each
listener: there the node's sendfile and TLS paths differ.

TLS cannot use ``sendfile``: a fetch over TLS reads the log in a worker thread and encrypts it
in the node's process, so the consume ratio is where TLS costs most.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from node.proc import Deadline, spawn, wait_ready_file

from ._cli import guarded, require_strait, scratch_dir
from ._clients import PRODUCER_SETTINGS, VALUE_BYTES, Deliveries, open_producer, produce_all
from ._procs import START_TIMEOUT_S, session_cpu_seconds, stop, wait_for_kafka, zookeeper
from ._report import (
    command_line,
    git_commit,
    machine_info,
    machine_lines,
    markdown_table,
    result_stem,
    run_fields,
    write_json,
    write_markdown,
)

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path) -> tuple[Path, Path]:
    """A CA and a node certificate for 127.0.0.1: (ca.pem, node.pem with key and certificate)."""
    ca_key, ca, key, csr, crt = (directory / n for n in ("ca.key", "ca.pem", "node.key", "node.csr", "node.crt"))
    ext = directory / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl("req", "-x509", *curve, "-keyout", str(ca_key), "-out", str(ca), "-days", "2", "-subj", "/CN=bench CA")
    _openssl("req", *curve, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(crt), "-days", "2", "-extfile", str(ext))  # fmt: skip
    pem = directory / "node.pem"
    pem.write_bytes(key.read_bytes() + crt.read_bytes())
    return ca, pem


@contextmanager
def secured_node(
    strait: Path, workdir: Path, zk: str, ca: Path, pem: Path, extra: dict[str, str]
) -> Iterator[tuple[dict[str, str], int]]:
    """A node with the three listeners; yields (protocol -> address, the node's process group)."""
    props = {
        "broker.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "log.dirs": str(workdir / "d1"),
        "zookeeper.connect": f"{zk}/bench-{uuid.uuid4().hex[:8]}",
        "strait.admin.listener": "127.0.0.1:0",
        "offsets.topic.replication.factor": "1",
        "ssl.keystore.location": str(pem),
        "ssl.truststore.location": str(ca),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    } | extra
    config = workdir / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    ready = workdir / "node.ready.json"
    argv = [str(strait), "node", "start", "--config", str(config), "--ready-file", str(ready)]
    child = spawn(argv, workdir / "node.log", name="strait", cwd=workdir)
    try:
        info = wait_ready_file(child, ready, Deadline(START_TIMEOUT_S, "the strait node to serve"))
        addresses = {name: str(address) for name, address in info["listeners"].items()}
        wait_for_kafka(child, addresses["PLAINTEXT"], Deadline(START_TIMEOUT_S, "the node to answer"))
        yield addresses, child.pid
    finally:
        stop(child)


def client_settings(protocol: str, ca: Path) -> dict[str, Any]:
    if protocol == "PLAINTEXT":
        return {}
    tls = {"security.protocol": protocol.lower(), "ssl.ca.location": str(ca)}
    if protocol == "SSL":
        return tls
    return tls | {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD}


def kcat_settings(protocol: str, ca: Path) -> list[str]:
    """kcat's ``-X`` arguments for ``protocol`` (the same settings as ``client_settings``)."""
    return [arg for key, value in client_settings(protocol, ca).items() for arg in ("-X", f"{key}={value}")]


def bulk_consume(address: str, kcat_args: list[str], topic: str, records: int, session: int) -> dict[str, float]:
    """kcat reads ``topic`` (``records`` records) from offset 0 to its end, printing nothing: the
    consume throughput of a C client that costs no Python per record, and the node's CPU seconds."""
    cpu0, started = session_cpu_seconds(session), time.perf_counter()
    argv = ["kcat", "-C", "-b", address, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "",
            "-X", "queued.min.messages=1000000", *kcat_args]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    elapsed, cpu = time.perf_counter() - started, session_cpu_seconds(session) - cpu0
    if done.returncode != 0:
        raise RuntimeError(f"{address}: kcat exited {done.returncode}: {done.stderr[-500:]}")
    return {"bulk_consume_mb_s": records * VALUE_BYTES / 1e6 / elapsed, "bulk_consume_cpu_s": cpu}


def fill_bulk_topic(address: str, records: int, admin: AdminClient) -> str:
    """A one-partition topic of ``records`` 100-byte values, written over PLAINTEXT (not timed)."""
    topic = f"bulk-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    deliveries = Deliveries()
    config = PRODUCER_SETTINGS | {"bootstrap.servers": address, "acks": "1", "on_delivery": deliveries.on_delivery}
    with open_producer(config) as producer:
        produce_all(producer, topic, b"x" * VALUE_BYTES, records)
        producer.flush(600)
    if deliveries.failed or deliveries.delivered != records:
        raise RuntimeError(f"{address}: {deliveries.delivered} of {records} bulk records delivered")
    return topic


RATIO_BULK = "bulk_consume_mb_s"
# See the module docstring: without it the consume figures measure librdkafka's fetch-queue back-off.
CONSUMER_SETTINGS = {"queued.min.messages": 1_000_000}


def measure(address: str, settings: dict[str, Any], records: int, session: int, admin: AdminClient) -> dict[str, float]:
    """Produce then consume ``records`` through one listener: MB/s and the node's CPU seconds of each."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    value = b"x" * VALUE_BYTES
    deliveries = Deliveries()
    config = PRODUCER_SETTINGS | {"bootstrap.servers": address, "acks": "1", "on_delivery": deliveries.on_delivery}
    with open_producer(config | settings) as producer:
        producer.produce(topic, value)  # connect and authenticate before the clock starts
        producer.flush(30)
        cpu0, started = session_cpu_seconds(session), time.perf_counter()
        produce_all(producer, topic, value, records)
        producer.flush(300)
        produce_s, produce_cpu = deliveries.last - started, session_cpu_seconds(session) - cpu0
    if deliveries.failed or deliveries.delivered != records + 1:
        raise RuntimeError(f"{address}: {deliveries.delivered} delivered, failed: {dict(deliveries.failed)}")
    consumer = Consumer({"bootstrap.servers": address, "group.id": "bench", "enable.partition.eof": False,
                         "fetch.max.bytes": 52428800, **CONSUMER_SETTINGS, **settings})  # fmt: skip
    try:
        seen, cpu0, started = 0, session_cpu_seconds(session), time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = started + 300
        while seen < records + 1 and time.perf_counter() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    seen += 1
                elif message.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"{address}: {message.error()}")
        consume_s, consume_cpu = time.perf_counter() - started, session_cpu_seconds(session) - cpu0
    finally:
        consumer.close()
    if seen < records + 1:
        raise RuntimeError(f"{address}: read {seen} of {records + 1} records")
    mb = records * VALUE_BYTES / 1e6
    return {"produce_mb_s": mb / produce_s, "consume_mb_s": mb / consume_s,
            "produce_cpu_s": produce_cpu, "consume_cpu_s": consume_cpu}  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.security_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bulk-records", type=int, default=2_000_000, help="records of the topic kcat reads")
    parser.add_argument("--quick", action="store_true", help="30,000 records (200,000 for kcat), one repeat")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--strait", type=Path, default=Path(sys.executable).parent / "strait")
    parser.add_argument(
        "--node-property", action="append", default=[], metavar="KEY=VALUE", help="add to the node's server.properties"
    )
    args = parser.parse_args(argv)
    records, repeat = (30_000, 1) if args.quick else (args.records, args.repeat)
    bulk_records = 200_000 if args.quick else args.bulk_records
    extra = dict(item.split("=", 1) for item in args.node_property)
    started_at = datetime.datetime.now(datetime.UTC)

    def body() -> int:
        require_strait(args.strait)
        t0 = time.perf_counter()
        runs: dict[str, list[dict[str, float]]] = {p: [] for p in PROTOCOLS}
        with scratch_dir(Path("/tmp"), "strait-security-bench-") as work:
            ca, pem = make_certificates(work)
            with (
                zookeeper(args.strait, work) as zk,
                secured_node(args.strait, work, zk, ca, pem, extra) as (
                    addresses,
                    pid,
                ),
            ):
                admin = AdminClient({"bootstrap.servers": addresses["PLAINTEXT"]})
                upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                                      PASSWORD.encode())  # fmt: skip
                for future in admin.alter_user_scram_credentials([upsert]).values():
                    future.result(30)
                bulk = fill_bulk_topic(addresses["PLAINTEXT"], bulk_records, admin)
                for i in range(repeat):
                    order = PROTOCOLS[i % 3 :] + PROTOCOLS[: i % 3]
                    for protocol in order:
                        result = measure(addresses[protocol], client_settings(protocol, ca), records, pid, admin)
                        kcat_args = kcat_settings(protocol, ca)
                        result |= bulk_consume(addresses[protocol], kcat_args, bulk, bulk_records, pid)
                        runs[protocol].append(result)
                        print(f"run {i + 1} {protocol}: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()))
            machine = machine_info(work)
        medians = {p: {k: statistics.median(r[k] for r in runs[p]) for k in runs[p][0]} for p in PROTOCOLS}
        ratios = {
            p: {k: medians[p][k] / medians["PLAINTEXT"][k] for k in ("produce_mb_s", "consume_mb_s", RATIO_BULK)}
            for p in PROTOCOLS[1:]
        }
        command = command_line("bench.security_bench", argv)
        stem = result_stem(args.out, "security", started_at)
        write_json(stem.with_suffix(".json"), {**run_fields(started_at, time.perf_counter() - t0, command),
                   "machine": machine, "records": records, "bulk_records": bulk_records, "repeat": repeat,
                   "runs": runs, "medians": medians,
                   "ratios": ratios, "commit": git_commit()})  # fmt: skip
        table = [
            [p, f"{medians[p]['produce_mb_s']:.1f}", f"{medians[p]['consume_mb_s']:.1f}",
             f"{medians[p]['produce_cpu_s']:.2f}", f"{medians[p]['consume_cpu_s']:.2f}",
             "1.00" if p == "PLAINTEXT" else f"{ratios[p]['produce_mb_s']:.2f}",
             "1.00" if p == "PLAINTEXT" else f"{ratios[p]['consume_mb_s']:.2f}",
             f"{medians[p]['bulk_consume_mb_s']:.1f}", f"{medians[p]['bulk_consume_cpu_s']:.2f}",
             "1.00" if p == "PLAINTEXT" else f"{ratios[p]['bulk_consume_mb_s']:.2f}"]
            for p in PROTOCOLS
        ]  # fmt: skip
        headers = ["listener", "produce MB/s", "consume MB/s", "node CPU s (produce)", "node CPU s (consume)",
                   "produce / PLAINTEXT", "consume / PLAINTEXT", "kcat consume MB/s", "node CPU s (kcat consume)",
                   "kcat consume / PLAINTEXT"]  # fmt: skip
        lines = [
            f"# Security benchmark, {started_at:%Y-%m-%d}",
            "",
            f"Command: `{command}` (commit {git_commit()})",
            "",
            *machine_lines(machine),
            "",
            f"{records:,} records of {VALUE_BYTES} bytes per listener and run, acks=1, one partition; "
            f"median of {repeat} run(s); the order of the listeners rotates between runs. kcat consume: "
            f"Debian's kcat reads one topic of {bulk_records:,} such records (written once over PLAINTEXT) "
            "to its end through each listener, printing nothing.",
            "",
            markdown_table(headers, table),
            "",
        ]
        write_markdown(stem.with_suffix(".md"), lines)
        print(json.dumps({"medians": medians, "ratios": ratios}, indent=2))
        print(f"wrote {stem}.md and .json")
        return 0

    return guarded(body, started="process")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
