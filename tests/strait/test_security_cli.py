"""``strait acls`` and ``strait users`` as an operator runs them.

Bad input is refused before any connection, naming the value (click's exit code 2 for usage,
1 for the rest). The integration tests run the real ``strait`` command against a node with Kafka's
authorizer on: its PLAINTEXT listener is the operator's (``super.users`` holds ``User:ANONYMOUS``),
clients authenticate on a SASL_PLAINTEXT listener (PLAIN users from ``sasl.jaas.config``, SCRAM
users from ``strait users``), and an SSL listener is reached through ``--command-config``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strait._command_config import load_command_config
from strait.cli import main
from tests.node.harness import NodeProcess, wait_for
from tests.tls import TestCa, subject

STRAIT = [sys.executable, "-m", "strait.cli"]
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
PLAIN_PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def invoke(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=stdin)


# -- refused before connecting (no processes) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--allow-principal", "User:alice", "--operation", "Frobnicate", "--topic", "t"], "'Frobnicate' is not an op"),
        (["--allow-principal", "alice", "--operation", "Read", "--topic", "t"], "'alice' is not a principal User:name"),
        (["--allow-principal", "Group:ops", "--operation", "Read", "--topic", "t"], "'Group:ops' is not a principal"),
        (["--allow-principal", "User:alice", "--operation", "Read"], "name a resource: --topic"),
        (["--allow-principal", "User:alice", "--topic", "t"], "name the operations"),
        (["--operation", "Read", "--topic", "t"], "name a principal"),
        (
            ["--allow-principal", "User:a", "--allow-host", "db.example", "--operation", "Read", "--topic", "t"],
            "db.exam",
        ),
        (["--allow-principal", "User:alice", "--operation", "Read", "--cluster"], "operation Read does not apply to"),
        (["--allow-principal", "User:alice", "--consumer", "--topic", "t"], "--consumer needs --group"),
        (
            ["--allow-principal", "User:alice", "--producer", "--operation", "Read", "--topic", "t"],
            "cannot be combined",
        ),
    ],
)
def test_acls_add_refuses_bad_input_naming_it(args: list[str], named: str) -> None:
    result = invoke("acls", "add", *args)
    assert result.exit_code == 2 and named in result.output, result.output


def test_operations_are_kafkas_names_in_any_case_and_producer_consumer_expand_as_kafka_acls() -> None:
    from strait._security_commands import AclOptions

    def options(**given: Any) -> AclOptions:
        empty: dict[str, Any] = dict.fromkeys(AclOptions.__dataclass_fields__, ())
        return AclOptions(**(empty | {"producer": False, "consumer": False, "idempotent": False, "cluster": False}
                                   | {"pattern_type": "literal"} | given))  # fmt: skip

    both = options(producer=True, consumer=True, topics=("t",), groups=("g",), transactional_ids=("x",))
    assert both.targets() == [
        ("TOPIC", "t", "Write"), ("TOPIC", "t", "Describe"), ("TOPIC", "t", "Create"),
        ("TRANSACTIONAL_ID", "x", "Write"), ("TRANSACTIONAL_ID", "x", "Describe"),
        ("TOPIC", "t", "Read"), ("GROUP", "g", "Read"),
    ]  # fmt: skip
    result = invoke("acls", "add", "--allow-principal", "User:a", "--operation", "clusteraction", "--topic", "t")
    assert result.exit_code == 2 and "operation ClusterAction does not apply to TOPIC 't'" in result.output


def test_users_commands_refuse_a_password_on_no_or_two_sources_and_bad_iterations(tmp_path: Path) -> None:
    password_file = tmp_path / "pw"
    password_file.write_text("\n")
    cases = [
        (["carol", "--mechanism", "SCRAM-SHA-256"], 2, "exactly one of --password-file PATH or --password-stdin"),
        (["carol", "--mechanism", "SCRAM-SHA-256", "--password-stdin", "--password-file", str(password_file)], 2, ""),
        (["carol", "--mechanism", "SCRAM-SHA-1", "--password-stdin"], 2, "'SCRAM-SHA-1' is not one of"),
        (["carol", "--mechanism", "SCRAM-SHA-256", "--iterations", "100", "--password-stdin"], 2, "100"),
        (["carol", "--mechanism", "SCRAM-SHA-256", "--password-file", str(password_file)], 1, "the password is empty"),
        (["carol", "--mechanism", "SCRAM-SHA-256", "--password", "x"], 2, "No such option '--password'"),
    ]
    for args, code, named in cases:
        result = invoke("users", "add-scram", *args, stdin="pw\n")
        assert result.exit_code == code and named in result.output, (args, result.output)


def test_command_config_is_read_as_kafka_acls_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=sasl_plaintext\nsasl.mechanism=SCRAM-SHA-512\nclient.id=ops\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="ops" password="ops-secret";\n'
    )
    security = load_command_config(str(path))
    assert (security.protocol, security.sasl_mechanism, security.sasl_username) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "ops",
    )
    assert security.sasl_password == "ops-secret" and "ops-secret" not in repr(security)
    refusals = [
        ("security.protocol=TLS\n", "security.protocol 'TLS' is not one of"),
        ("security.protocol=SSL\nssl.truststore.type=JKS\n", "ssl.truststore.type 'JKS': strait reads PEM files only"),
        (f"security.protocol=SSL\nssl.truststore.location={tmp_path}/missing.pem\n", "ssl.truststore.location"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", "sasl.mechanism is 'GSSAPI'"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "sasl.jaas.config is missing"),
        ('security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=x.Login required username="u";\n',
         "needs both username and password"),
    ]  # fmt: skip
    for text, named in refusals:
        path.write_text(text)
        result = invoke("acls", "list", "--command-config", str(path))
        assert result.exit_code == 1 and named in result.output, (text, result.output)


# -- against a node ---------------------------------------------------------------------------------------------------


def strait(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STRAIT, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False)


def ok(*args: str, stdin: str | None = None) -> str:
    done = strait(*args, stdin=stdin)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


class SecuredNode:
    def __init__(self, node: NodeProcess, ca: TestCa) -> None:
        listeners = json.loads(node.ready_path.read_text())["listeners"]
        self.plaintext = node.bootstrap
        self.sasl = str(listeners["SASL_PLAINTEXT"])
        self.ssl = str(listeners["SSL"])
        self.ca = ca

    def client(self, mechanism: str, user: str, password: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.sasl,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }


@pytest.fixture
def secured(node_factory: Callable[..., NodeProcess], tmp_path: Path) -> SecuredNode:
    ca = TestCa(tmp_path / "pki")
    server = ca.issue("node", subject(CN="node-1"), ip="127.0.0.1")
    node = node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        ssl_keystore_location=str(server.pem),
        sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        sasl_jaas_config=JAAS,
        connection_failed_authentication_delay_ms="50",
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        super_users="User:ANONYMOUS;User:admin",
    )
    return SecuredNode(node, ca)


def produce_one(config: dict[str, Any], topic: str) -> KafkaError | None:
    """The delivery error of one record (None: delivered)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10_000})
    producer.produce(topic, b"x", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def refused(error: KafkaError | None) -> bool:
    return error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def authenticates(config: dict[str, Any]) -> bool:
    """True when the client's SASL login succeeds, False when the node refuses it (as soon as it says so)."""
    errors: list[KafkaError] = []
    admin = AdminClient({**config, "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
        except KafkaException:
            admin.poll(0.1)  # serves error_cb
            if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
                return False
            continue
        return True
    raise AssertionError(f"neither authenticated nor refused within 15 s: {errors}")


@pytest.mark.integration
def test_acls_add_list_remove_govern_what_a_sasl_user_may_do(secured: SecuredNode, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": secured.plaintext})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    alice = secured.client("PLAIN", "alice", PLAIN_PASSWORDS["alice"])
    bob = secured.client("PLAIN", "bob", PLAIN_PASSWORDS["bob"])
    assert refused(produce_one(alice, "orders"))

    added = ok(
        "acls", "add", "--allow-principal", "User:alice", "--producer", "--topic", "orders", "-b", secured.plaintext
    )
    assert added.startswith("added 3 ACL(s):"), added
    wait_for("alice may produce to orders", lambda: produce_one(alice, "orders") is None, 20)
    assert refused(produce_one(bob, "orders"))

    listed = json.loads(ok("acls", "list", "--json", "--topic", "orders", "-b", secured.plaintext))
    assert sorted((row["principal"], row["operation"], row["permission"]) for row in listed) == [
        ("User:alice", op, "ALLOW") for op in ("CREATE", "DESCRIBE", "WRITE")
    ]
    assert {(row["resource_type"], row["name"], row["pattern_type"], row["host"]) for row in listed} == {
        ("TOPIC", "orders", "LITERAL", "*")
    }
    # Over TLS with a Kafka client properties file: the table names the same three ACLs.
    ssl_config = tmp_path / "ssl.properties"
    ssl_config.write_text(f"security.protocol=SSL\nssl.truststore.location={secured.ca.pem}\n")
    table = ok("acls", "list", "--command-config", str(ssl_config), "-b", secured.ssl).splitlines()
    assert table[0].split() == ["TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
    assert sorted(line.split()[5] for line in table[1:]) == ["CREATE", "DESCRIBE", "WRITE"]
    # Over SASL with the admin's PLAIN credentials.
    sasl_config = tmp_path / "sasl.properties"
    sasl_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";\n'
    )
    over_sasl = ok("acls", "list", "--json", "--command-config", str(sasl_config), "-b", secured.sasl)
    assert json.loads(over_sasl) == listed

    removed = ok("acls", "remove", "--allow-principal", "User:alice", "--producer", "--topic", "orders",
                 "-b", secured.plaintext)  # fmt: skip
    assert removed.startswith("removed 3 ACL(s):") and removed.count("User:alice") == 3, removed
    wait_for("alice refused again", lambda: refused(produce_one(alice, "orders")), 20)
    assert ok("acls", "list", "-b", secured.plaintext).strip() == "no ACLs match"
    assert ok("acls", "remove", "--topic", "orders", "-b", secured.plaintext).startswith("no ACLs matched")


@pytest.mark.integration
def test_users_add_scram_list_remove_decide_who_authenticates(secured: SecuredNode, tmp_path: Path) -> None:
    carol = secured.client("SCRAM-SHA-256", "carol", "carol-secret")
    assert not authenticates(carol)
    added = ok("users", "add-scram", "carol", "--mechanism", "SCRAM-SHA-256", "--password-stdin",
               "-b", secured.plaintext, stdin="carol-secret\n")  # fmt: skip
    assert added.strip() == "set the SCRAM-SHA-256 credential of user carol (4096 iterations)"
    wait_for("carol authenticates with SCRAM-SHA-256", lambda: authenticates(carol), 20)
    assert not authenticates(secured.client("SCRAM-SHA-256", "carol", "carol-secret\n"))

    password_file = tmp_path / "dave.password"
    password_file.write_text("dave-secret\n")
    ok("users", "add-scram", "dave", "--mechanism", "scram-sha-512", "--iterations", "8192",
       "--password-file", str(password_file), "-b", secured.plaintext)  # fmt: skip
    wait_for("dave authenticates", lambda: authenticates(secured.client("SCRAM-SHA-512", "dave", "dave-secret")), 20)
    listed = json.loads(ok("users", "list", "--json", "-b", secured.plaintext))
    assert listed == {"carol": {"SCRAM-SHA-256": 4096}, "dave": {"SCRAM-SHA-512": 8192}}
    table = ok("users", "list", "-b", secured.plaintext).splitlines()
    assert [line.split() for line in table] == [
        ["USER", "MECHANISM", "ITERATIONS"], ["carol", "SCRAM-SHA-256", "4096"], ["dave", "SCRAM-SHA-512", "8192"]
    ]  # fmt: skip

    removed = ok("users", "remove", "carol", "--mechanism", "SCRAM-SHA-256", "-b", secured.plaintext)
    assert removed.strip() == "removed the SCRAM-SHA-256 credential of user carol"
    wait_for("carol refused", lambda: not authenticates(carol), 20)
    again = strait("users", "remove", "carol", "--mechanism", "SCRAM-SHA-256", "-b", secured.plaintext)
    assert again.returncode == 1 and "user 'carol'" in again.stderr and "RESOURCE_NOT_FOUND" in again.stderr
    assert json.loads(ok("users", "list", "--json", "-b", secured.plaintext)) == {"dave": {"SCRAM-SHA-512": 8192}}
