"""The audit pipeline against secured sites: strait-kafka and the jobs over SASL_SSL + SCRAM-SHA-512.

Two real single-node sites, east and west, each with a SASL_SSL listener for the world (a
certificate from a test CA, SCRAM-SHA-512) and a PLAINTEXT one on loopback for the test's own
setup and checks; the users exist on both (AlterUserScramCredentials over PLAINTEXT). One pair
serves the module; each test has its own topics.

- **the source**: rows read over SASL_SSL equal those read over PLAINTEXT; a wrong password
  fails the read with SASL_AUTHENTICATION_FAILED and the password nowhere in the error; a CA
  that did not sign the node's certificate fails it with a certificate error; Spark's plan
  (``explain``) never shows a password;
- **the writer** over SASL_SSL: rows written, read back;
- **reconcile** across the sites after a real link mirrored ``orders`` over TLS + SCRAM: clean
  through ``--topology`` (each site's ``tls`` and ``sasl``), then, with one record of east's
  planted missing on west (MirrorAppend of the record after it), found through
  ``--command-config``; a wrong password is exit 3 naming SASL_AUTHENTICATION_FAILED;
- **ledger** through ``--topology FILE --site east``: clean, and a write the site never got is lost.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirror import LinkRunner, load_links
from node.client import NodeConnection, mirror_append
from spark_jobs.sources.kafka import KafkaSource
from storage.records import Offset, build_batch
from tests.chaos.checkers.builder import Builder, rec
from tests.mirror.test_link import RunningLink
from tests.mirror.test_secured_link import SecuredSite, add_user, secured_site_props
from tests.node.harness import NodeProcess, wait_for
from tests.spark_jobs.audit_run import audit
from tests.spark_jobs.ledger_agreement import write_history
from tests.tls import TestCa, subject

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

PASSWORD = "admin-Secret-7"  # the audit's user on both sites
MIRROR_PASSWORD = "mirror-Secret-8"
WRONG = "not-the-Password-9"
T0 = 1_700_000_000_000
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
Spark = Any  # pyspark.sql.SparkSession


@dataclass
class Sites:
    east: SecuredSite
    west: SecuredSite
    ca: TestCa
    root: Path

    def options(self, password: str = PASSWORD, ca: Path | None = None) -> dict[str, str]:
        """Spark's Kafka security options, as a Spark user writes them."""
        return {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(ca or self.ca.pem),
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": f'{SCRAM} required username="admin" password="{password}";',
        }


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[Sites]:
    root = tmp_path_factory.mktemp("secured-sites")
    ca = TestCa(root / "pki")
    server = ca.issue("node", subject(CN="node"), ip="127.0.0.1")
    props = secured_site_props(server.pem) | {"offsets.topic.replication.factor": "1"}
    nodes = [
        NodeProcess(1, root / name, f"{zookeeper}/{name}-{uuid.uuid4().hex}", dict(props)) for name in ("east", "west")
    ]
    try:
        for node in nodes:
            node.start()
        east, west = (SecuredSite(n) for n in nodes)
        for site in (east, west):
            add_user(site.plaintext, "admin", PASSWORD)
            add_user(site.plaintext, "mirror", MIRROR_PASSWORD)
        yield Sites(east, west, ca, root)
    finally:
        for node in nodes:
            node.stop()


@pytest.fixture(scope="module")
def sp(spark: Spark) -> Spark:
    spark.dataSource.register(KafkaSource)
    return spark


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> None:
    """``(partition, key, value)`` each, with CreateTime T0 + its index."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i, (partition, key, value) in enumerate(records):
        producer.produce(topic, key=key, value=value, partition=partition, timestamp=T0 + i, headers=[("i", b"%d" % i)])
    assert producer.flush(30) == 0


def load(sp: Spark, bootstrap: str, topic: str, **options: str) -> Any:
    reader = sp.read.format("strait-kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    return reader.options(**options).load()


def rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.orderBy("partition", "offset").collect()]


def failure(call: Any) -> str:
    """The text of what ``call`` raised (Spark's error carries the Python worker's traceback)."""
    with pytest.raises(Exception) as caught:  # Spark wraps the source's error in its own
        call()
    return f"{caught.value!s}\n{caught.value!r}"


# -- the source and the writer ------------------------------------------------------------------------


def test_a_sasl_ssl_read_equals_the_plaintext_read_and_the_plan_shows_no_password(
    sites: Sites, sp: Spark, capsys: pytest.CaptureFixture[str]
) -> None:
    create(sites.east.plaintext, "readable", 2)
    produce(sites.east.plaintext, "readable", [(i % 2, b"k%d" % i, b"v%d" % i) for i in range(40)])
    secured = load(sp, sites.east.secured, "readable", **sites.options())
    plain = rows(load(sp, sites.east.plaintext, "readable"))
    assert len(plain) == 40
    assert rows(secured) == plain
    batches = {"rows": "batches"}
    assert rows(load(sp, sites.east.secured, "readable", **sites.options(), **batches)) == rows(
        load(sp, sites.east.plaintext, "readable", **batches)
    )
    for mode in ("simple", "extended", "formatted", "cost"):
        secured.explain(mode=mode)
    shown = capsys.readouterr().out
    assert "BatchScan" in shown and PASSWORD not in shown


def test_a_wrong_password_fails_with_sasl_authentication_failed_and_is_never_shown(sites: Sites, sp: Spark) -> None:
    text = failure(lambda: load(sp, sites.east.secured, "readable", **sites.options(WRONG)).collect())
    assert "SASL_AUTHENTICATION_FAILED" in text, text[-3000:]
    assert f"kafka.bootstrap.servers={sites.east.secured}" in text
    assert WRONG not in text and PASSWORD not in text


def test_a_ca_that_did_not_sign_the_nodes_certificate_fails_with_a_certificate_error(
    sites: Sites, sp: Spark, tmp_path: Path
) -> None:
    other = TestCa(tmp_path / "other", name="another CA")
    text = failure(lambda: load(sp, sites.east.secured, "readable", **sites.options(ca=other.pem)).collect())
    assert "CERTIFICATE_VERIFY_FAILED" in text, text[-3000:]
    assert "TLS handshake with" in text and PASSWORD not in text


def test_the_writer_produces_over_sasl_ssl(sites: Sites, sp: Spark) -> None:
    create(sites.east.plaintext, "written", 1)
    df = sp.createDataFrame([(f"k{i}", f"value {i}") for i in range(5)], "key string, value string")
    writer = df.write.format("strait-kafka").option("kafka.bootstrap.servers", sites.east.secured)
    writer.option("topic", "written").options(**sites.options()).mode("append").save()
    back = rows(load(sp, sites.east.plaintext, "written"))  # two tasks wrote: in either order
    assert sorted((r["key"], r["value"]) for r in back) == [(f"k{i}".encode(), f"value {i}".encode()) for i in range(5)]
    refused = df.write.format("strait-kafka").option("kafka.bootstrap.servers", sites.east.secured)
    text = failure(lambda: refused.option("topic", "written").options(**sites.options(WRONG)).mode("append").save())
    assert "SASL_AUTHENTICATION_FAILED" in text and WRONG not in text, text[-3000:]
    assert len(rows(load(sp, sites.east.plaintext, "written"))) == 5


# -- the jobs -----------------------------------------------------------------------------------------


def secret_file(sites: Sites, name: str, password: str) -> Path:
    path = sites.root / f"{name}-{uuid.uuid4().hex[:6]}.pw"
    path.write_text(password + "\n")
    return path


def topology(sites: Sites) -> Path:
    """A failover topology naming both sites' secured listeners, their CA and the admin user."""
    password = secret_file(sites, "admin", PASSWORD)
    security = (
        f'tls = {{ ca = "{sites.ca.pem}" }}\n'
        f'sasl = {{ mechanism = "SCRAM-SHA-512", username = "admin", password_file = "{password}" }}\n'
    )
    path = sites.root / "topology.toml"
    path.write_text(
        f"""
[sites.east]
bootstrap = "{sites.east.secured}"
zookeeper = "{sites.east.node.zk_connect}"
{security}
[sites.west]
bootstrap = "{sites.west.secured}"
zookeeper = "{sites.west.node.zk_connect}"
{security}
[[link]]
name = "east-to-west"
source = "east"
target = "west"
mirror_admin = "http://127.0.0.1:9"
"""
    )
    return path


def command_config(sites: Sites, password: str) -> Path:
    """``admin.properties`` as strait acls takes it (Java-style keys)."""
    path = sites.root / f"admin-{uuid.uuid4().hex[:6]}.properties"
    path.write_text(
        f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={sites.ca.pem}\n"
        f'sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={SCRAM} required username="admin" password="{password}";\n'
    )
    return path


def mirror_orders(sites: Sites) -> int:
    """``orders`` (2 partitions, 30 records each) on east, mirrored to west by a link over TLS +
    SCRAM; returns partition 0's end offset."""
    create(sites.east.plaintext, "orders", 2)
    produce(sites.east.plaintext, "orders", [(i % 2, b"o%d" % i, b"order %d" % i) for i in range(60)])
    password = secret_file(sites, "mirror", MIRROR_PASSWORD)
    side = (
        f'tls = {{ ca = "{sites.ca.pem}" }}, '
        f'sasl = {{ mechanism = "SCRAM-SHA-512", username = "mirror", password_file = "{password}" }}'
    )
    links = sites.root / "links.toml"
    links.write_text(
        f"""
[[link]]
name = "east-to-west"
sync_interval_s = 0.5
topics = {{ include = ["orders"] }}
source = {{ name = "east", bootstrap = "{sites.east.secured}", {side} }}
target = {{ name = "west", bootstrap = "{sites.west.secured}", {side} }}
"""
    )
    (link,) = load_links(links)
    admin = AdminClient({"bootstrap.servers": sites.west.plaintext})

    def copied() -> bool:
        listed = admin.list_topics("orders", timeout=5).topics.get("orders")
        if listed is None or listed.error is not None:
            return False
        consumer = Consumer({"bootstrap.servers": sites.west.plaintext, "group.id": uuid.uuid4().hex})
        try:
            return sum(consumer.get_watermark_offsets(TopicPartition("orders", p), 5)[1] for p in (0, 1)) == 60
        finally:
            consumer.close()

    with RunningLink(LinkRunner(link)):
        wait_for("west to hold east's 60 orders", copied, 90)
    return 30


def plant_missing(sites: Sites, end: int) -> None:
    """East gets two more records in orders-0 (offsets end, end + 1); west gets only the second,
    at its offset (MirrorAppend, as the link writes): west's log covers ``end`` and lacks it."""
    records = [(T0 + 100 + i, b"late%d" % i, b"late %d" % i) for i in range(2)]
    producer = Producer({"bootstrap.servers": sites.east.plaintext, "acks": "all"})
    for ts, key, value in records:
        producer.produce("orders", key=key, value=value, partition=0, timestamp=ts)
        assert producer.flush(30) == 0
    batch = build_batch([records[1]], base_offset=end + 1)

    async def run() -> None:
        async with await NodeConnection.open(sites.west.plaintext, client_id="test-plant") as conn:
            result = await mirror_append(conn, "east-to-west", "orders", 0, Offset(end), batch, timeout=10)
            assert result.error_code == 0, result.error_message

    trio.run(run)


def no_password_in(out: Path, output: str) -> None:
    for text in (output, (out / "summary.json").read_text(), (out / "report.html").read_text()):
        assert PASSWORD not in text and MIRROR_PASSWORD not in text


def test_reconcile_across_two_secured_sites_is_clean_then_finds_the_planted_missing_record(
    sites: Sites, sp: Spark
) -> None:
    end = mirror_orders(sites)
    clean = sites.root / "clean"
    code, output, summary = audit(
        "reconcile", "--topology", str(topology(sites)), "--link", "east-to-west", "--out", str(clean)
    )
    assert code == 0, output[-3000:]
    assert summary is not None and summary["verdict"] == "clean"
    assert summary["totals"]["matched"] == 60 and summary["discrepancies"]["total"] == 0
    assert summary["inputs"]["source"] == sites.east.secured and summary["inputs"]["target"] == sites.west.secured
    assert summary["inputs"]["source_security"] == {
        "protocol": "SASL_SSL",
        "truststore": str(sites.ca.pem),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "admin",
    }
    no_password_in(clean, output)

    plant_missing(sites, end)
    found = sites.root / "found"
    config = command_config(sites, PASSWORD)
    args = ["--source", sites.east.secured, "--target", sites.west.secured, "--command-config", str(config)]
    code, output, summary = audit("reconcile", *args, "--out", str(found))
    assert code == 1, output[-3000:]
    assert summary is not None and summary["discrepancies"]["by_kind"] == {"missing": 1}
    assert summary["totals"]["matched"] == 61
    discrepancies = pq.read_table(found / "discrepancies").to_pylist()
    assert [(r["kind"], r["topic"], r["partition"], r["offset"]) for r in discrepancies] == [
        ("missing", "orders", 0, end)
    ]
    no_password_in(found, output)

    wrong = command_config(sites, WRONG)
    refused = sites.root / "refused"
    code, output, summary = audit(
        "reconcile", "--source", sites.east.secured, "--target", sites.west.secured,
        "--command-config", str(wrong), "--out", str(refused), "--timeout", "10",
    )  # fmt: skip
    assert (code, summary) == (3, None), output[-3000:]
    assert re.search(
        rf"--source {re.escape(sites.east.secured)}: the site did not answer .*SASL_AUTHENTICATION_FAILED", output
    )
    assert WRONG not in output


def test_ledger_reads_a_site_of_the_topology_over_sasl_ssl(sites: Sites, sp: Spark) -> None:
    create(sites.east.plaintext, "ledgered", 1)
    produce(sites.east.plaintext, "ledgered", [(0, b"l%d" % i, b"l%d" % i) for i in range(10)])
    b = Builder()
    for offset in range(10):
        b.send("producer-0", f"l{offset}", offset, topic="ledgered")
    b.send("producer-0", "never-written", 10, topic="ledgered")
    b.read("east", [rec(o, f"l{o}", topic="ledgered") for o in range(10)])
    history = write_history(sites.root / "history.jsonl", b.ops)
    out = sites.root / "ledger"
    code, output, summary = audit(
        "ledger", "--history", str(history), "--topology", str(topology(sites)), "--site", "east", "--out", str(out)
    )
    assert code == 1, output[-3000:]
    assert summary is not None and summary["inputs"]["site"] == sites.east.secured
    assert summary["inputs"]["site_security"]["protocol"] == "SASL_SSL"
    assert summary["totals"]["site_records"] == 10
    found = pq.read_table(out / "discrepancies").to_pylist()
    assert [(r["kind"], r["offset"], r["value"]) for r in found] == [("lost", 10, "never-written")]
    no_password_in(out, output)
    assert json.loads((out / "summary.json").read_text())["verdict"] == "found"
