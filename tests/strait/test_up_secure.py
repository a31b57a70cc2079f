"""`strait up --secure`: the two-site appliance secured end to end, used by real clients.

One appliance for the module (one node per site): kcat, with nothing but the client.properties
the appliance wrote, produces on east and reads the same records on west at the same offsets
(the mirror over TLS + SCRAM with its ACLs); what must be refused is (plain text, a wrong
password, a user without ACLs, `app` changing ACLs, anonymous ZooKeeper writes); nothing of the
appliance listens beyond loopback; the secrets are private; a lost site comes back through
`strait site revive`; and a restart reuses every secret, credential and record.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import signal
import ssl
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoAuthError  # type: ignore[import-untyped]

from chaos.nemesis import kill_9_pid
from node.proc import Child, Deadline, spawn, wait_ready_file
from node.zkkit import kazoo_client, read_digest_file, stop_quietly
from tests.node.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # two sites and a mirror

SESSION_TIMEOUT_MS = 6000  # a revived node waits out its killed predecessor's session
KCAT_TIMEOUT_S = 30
LINK_NAME = "east-to-west"


@dataclass
class Appliance:
    directory: Path
    log: Path
    up: Child
    info: dict[str, Any]

    def site(self, name: str) -> dict[str, Any]:
        site: dict[str, Any] = self.info["sites"][name]
        return site

    @property
    def client_properties(self) -> Path:
        return self.directory / "client.properties"

    @property
    def secrets(self) -> Path:
        return self.directory / "secrets"


def start(directory: Path, log: Path) -> Appliance:
    argv = [sys.executable, "-m", "strait.cli", "up", "--secure", "--dir", str(directory), "--base-port", "0"]
    argv += ["--nodes", "1", "--set", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"]
    up = spawn(argv, log, name="strait up --secure")
    try:
        info = wait_ready_file(up, directory / "appliance.json", Deadline(180, "strait up --secure to be ready"))
        # appliance.json is written just before the banner is printed.
        wait_for("strait up's banner", lambda: "strait is up" in log.read_text(), 15)
    except BaseException:
        up.kill()
        raise
    return Appliance(directory, log, up, info)


def stop(appliance: Appliance) -> int | None:
    """Ctrl-C, as a terminal sends it; the exit code (None: still running after 120 s, then killed)."""
    appliance.up.signal(signal.SIGINT)
    code = appliance.up.wait(120)
    appliance.up.kill()  # reaps it (Child.wait never does)
    return code


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Appliance]:
    root = tmp_path_factory.mktemp("secure")
    running = start(root / "appliance", root / "up.log")
    try:
        yield running
    finally:
        running.up.kill()  # a no-op after a clean stop


def kcat(
    appliance: Appliance, *args: str, stdin: str = "", bootstrap: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Debian's kcat with the appliance's client.properties (and ``-b`` for another site)."""
    argv = ["kcat", "-F", str(appliance.client_properties), *(["-b", bootstrap] if bootstrap else []), *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=KCAT_TIMEOUT_S, check=False)


def consumed(appliance: Appliance, topic: str, bootstrap: str | None = None) -> list[str]:
    """Every record of ``topic`` as ``partition offset key value`` lines; [] while it is not there yet."""
    try:
        result = kcat(
            appliance,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-m",
            "10",
            "-f",
            "%p %o %k %s\\n",
            bootstrap=bootstrap,
        )
    except subprocess.TimeoutExpired:  # a partition without a leader yet: kcat waits for its end
        return []
    return sorted(result.stdout.splitlines()) if result.returncode == 0 else []


def strait(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "strait.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_kcat_produces_on_east_and_reads_the_same_records_on_west_through_the_mirror(appliance: Appliance) -> None:
    output = appliance.log.read_text()
    assert "strait is up, secured: two sites and a mirror" in output
    assert f"sasl.username=app\n    sasl.password={(appliance.secrets / 'app.password').read_text()}" in output
    assert appliance.info["security"]["client_properties"] == str(appliance.client_properties)

    records = "".join(f"k{i % 3}:v{i}\n" for i in range(20))
    produced = kcat(appliance, "-P", "-t", "orders", "-K:", stdin=records)
    assert produced.returncode == 0, produced.stderr
    on_east = consumed(appliance, "orders")
    assert len(on_east) == 20 and on_east[0].startswith("0 0 k0 v0"), on_east
    west = appliance.site("west")["bootstrap"]
    wait_for("orders on west", lambda: consumed(appliance, "orders", west) == on_east, 60)


def test_a_plain_text_client_is_refused(appliance: Appliance) -> None:
    east = appliance.site("east")["bootstrap"]
    plain = subprocess.run(
        ["kcat", "-b", east, "-L", "-m", "5"], capture_output=True, text=True, timeout=KCAT_TIMEOUT_S, check=False
    )
    assert plain.returncode != 0
    assert "Failed to acquire metadata" in plain.stderr, plain.stderr
    # And the admin API answers HTTPS only, with a certificate from the appliance's CA.
    admin = appliance.site("east")["admin"][0]
    assert admin.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=str(appliance.secrets / "ca.pem"))
    with urllib.request.urlopen(f"{admin}/health", timeout=10, context=context) as response:
        assert response.status == 200
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        urllib.request.urlopen(admin.replace("https://", "http://") + "/health", timeout=10)


def test_a_wrong_password_fails_authentication(appliance: Appliance) -> None:
    refused = kcat(appliance, "-X", "sasl.password=not-the-password", "-L", "-m", "5")
    assert refused.returncode != 0
    assert "Authentication failed" in refused.stderr and "invalid credentials" in refused.stderr, refused.stderr


def test_app_cannot_change_acls_and_a_user_without_acls_cannot_read(appliance: Appliance, tmp_path: Path) -> None:
    east = appliance.site("east")["bootstrap"]
    admin_properties = appliance.directory / "admin.properties"
    listed = strait("acls", "list", "-b", east, "--command-config", str(admin_properties))
    assert listed.returncode == 0, listed.stderr
    assert "User:mirror" in listed.stdout and "User:app" in listed.stdout

    # app, with its own credentials in the same Java-style form.
    app_properties = tmp_path / "app.properties"
    app_password = (appliance.secrets / "app.password").read_text()
    app_properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="app" password="{app_password}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={appliance.secrets / 'ca.pem'}\n"
    )
    denied = strait(
        "acls", "add", "-b", east, "--command-config", str(app_properties),
        "--allow-principal", "User:app", "--operation", "All", "--topic", "*",
    )  # fmt: skip
    assert denied.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in denied.stderr, denied.stderr

    # A user the admin made, with no ACL: it authenticates, then may read nothing.
    password = tmp_path / "nobody.pw"
    password.write_text("nobody-secret")
    made = strait(
        "users", "add-scram", "nobody", "--mechanism", "SCRAM-SHA-512", "--password-file", str(password),
        "-b", east, "--command-config", str(admin_properties),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr

    def refused_read() -> str | None:
        result = kcat(appliance, "-X", "sasl.username=nobody", "-X", "sasl.password=nobody-secret",
                      "-C", "-t", "orders", "-o", "beginning", "-e", "-m", "5")  # fmt: skip
        assert result.stdout == ""
        return result.stderr if "Topic authorization failed" in result.stderr else None

    wait_for("the user without ACLs to be refused (not unknown)", refused_read, 30)


def test_zookeeper_takes_no_anonymous_writes_and_hides_the_credentials(appliance: Appliance) -> None:
    connect = appliance.site("east")["zookeeper"] + "/east"
    anonymous = kazoo_client(connect, 10)
    anonymous.start(timeout=10)
    try:
        with pytest.raises(NoAuthError):
            anonymous.create("/intruder", b"")
        with pytest.raises(NoAuthError):
            anonymous.get("/config/users/app")
        assert anonymous.exists("/brokers/ids/1") is not None  # the layout stays readable
    finally:
        stop_quietly(anonymous)


def listening_sockets(pids: set[int]) -> list[tuple[int, str]]:
    """(pid, local address) of every listening TCP socket and bound UDP socket of ``pids``."""
    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue  # exited meanwhile
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if inode not in inodes or (table.startswith("tcp") and state != "0A"):  # 0A: LISTEN
                continue
            found.append((inodes[inode], _address(local)))
    return found


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # /proc/net prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return f"{ip}:{int(port, 16)}"


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def test_nothing_listens_beyond_loopback(appliance: Appliance) -> None:
    pids = descendants(appliance.up.pid)
    assert len(pids) >= 6  # strait up, two ZooKeepers, two nodes, the mirror
    sockets = listening_sockets(pids)
    addresses = {address for _, address in sockets}
    for name in ("east", "west"):
        site = appliance.site(name)
        assert {site["bootstrap"], site["zookeeper"], site["admin"][0].removeprefix("https://")} <= addresses
    assert appliance.info["links"][0]["admin"].removeprefix("http://") in addresses
    beyond = [
        (pid, address) for pid, address in sockets if not ipaddress.ip_address(address.rsplit(":", 1)[0]).is_loopback
    ]
    assert not beyond, beyond


def test_the_secrets_are_private(appliance: Appliance) -> None:
    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(appliance.secrets) == 0o700
    files = {path.name: mode(path) for path in appliance.secrets.iterdir()}
    assert files.pop("ca.pem") == 0o644
    assert set(files) == {
        "ca.key", "east-node-1.pem", "west-node-1.pem", "east-zookeeper.digest", "west-zookeeper.digest",
        "admin.password", "broker.password", "mirror.password", "app.password",
    }  # fmt: skip
    assert set(files.values()) == {0o600}
    for written in ("client.properties", "admin.properties", "east/node-1/server.properties"):
        assert mode(appliance.directory / written) == 0o600, written


def test_commands_on_the_running_appliance_revive_it_or_refuse_clearly(appliance: Appliance) -> None:
    site = json.loads((appliance.directory / "east" / "site.json").read_text())
    kill_9_pid(site["zookeeper_pid"], "east's ZooKeeper")
    kill_9_pid(site["nodes"][0]["pid"], "east's node 1")
    wait_for("strait up to report the loss", lambda: "site east is lost" in appliance.log.read_text(), 15)
    revive = strait("site", "revive", "east", "--dir", str(appliance.directory), "--timeout", "60")
    assert revive.returncode == 0, revive.stdout + revive.stderr
    produced = kcat(appliance, "-P", "-t", "orders", "-K:", stdin="k9:after-revive\n")
    assert produced.returncode == 0, produced.stderr
    on_east = wait_for(
        "the new record on east",
        lambda: [line for line in consumed(appliance, "orders") if line.endswith(" k9 after-revive")],
        30,
    )
    assert len(on_east) == 1, on_east  # "partition offset k9 after-revive": west must hold it at the same offset
    wait_for(
        "the new record on west",
        lambda: on_east[0] in consumed(appliance, "orders", appliance.site("west")["bootstrap"]),
        60,
    )


def user_znode_version(appliance: Appliance, site: str, user: str) -> int:
    digest = read_digest_file(appliance.secrets / f"{site}-zookeeper.digest")
    client = kazoo_client(appliance.site(site)["zookeeper"] + f"/{site}", 10, digest=digest)
    client.start(timeout=10)
    try:
        _, znode = client.get(f"/config/users/{user}")
        return int(znode.mzxid)
    finally:
        stop_quietly(client)


def test_users_and_acls_made_on_east_reach_west_through_the_link(appliance: Appliance, tmp_path: Path) -> None:
    east, west = appliance.site("east")["bootstrap"], appliance.site("west")["bootstrap"]
    admin_properties = str(appliance.directory / "admin.properties")
    password = tmp_path / "carol.pw"
    password.write_text("carol-secret")
    made = strait(
        "users", "add-scram", "carol", "--mechanism", "SCRAM-SHA-512", "--password-file", str(password),
        "-b", east, "--command-config", admin_properties,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    granted = strait(
        "acls", "add", "-b", east, "--command-config", admin_properties,
        "--allow-principal", "User:carol", "--consumer", "--topic", "carol-orders", "--group", "carol",
    )  # fmt: skip
    assert granted.returncode == 0, granted.stderr
    produced = kcat(appliance, "-P", "-t", "carol-orders", stdin="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr

    def carol_reads_west() -> list[str] | None:
        result = kcat(appliance, "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret",
                      "-C", "-G", "carol", "carol-orders", "-o", "beginning", "-e", "-c", "2",
                      bootstrap=west)  # fmt: skip
        return result.stdout.splitlines() if result.returncode == 0 and result.stdout else None

    # carol never existed on west: the link copied her credential (east's ZooKeeper to west's) and her ACLs.
    assert wait_for("carol reading carol-orders on west", carol_reads_west, 60) == ["one", "two"]

    (link,) = appliance.info["links"]
    with urllib.request.urlopen(f"{link['admin']}/v1/links/{link['name']}", timeout=10) as response:
        security = json.loads(response.read())["security_sync"]
    for part in ("acls", "users"):
        assert security[part]["last_error"] is None, security
        assert "conflicts" not in security[part], security  # both sites' own users are the same credentials
    assert security["users"]["owned"] >= 1 and security["acls"]["owned"] >= 2, security


def failover(appliance: Appliance, *args: str) -> tuple[int, dict[str, Any], str]:
    """``strait failover ARGS --json`` on the appliance's topology: (exit code, answer, stderr)."""
    topology = str(appliance.directory / "appliance.json")
    done = subprocess.run(
        [sys.executable, "-m", "strait.cli", "failover", *args, "--json", "--topology", topology],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


def test_failover_switches_over_to_west_and_back_over_tls_and_scram(appliance: Appliance, tmp_path: Path) -> None:
    west = appliance.site("west")["bootstrap"]
    produced = kcat(appliance, "-P", "-t", "dr-orders", stdin="".join(f"e{i}\n" for i in range(10)))
    assert produced.returncode == 0, produced.stderr
    on_east = consumed(appliance, "dr-orders")
    wait_for("dr-orders on west", lambda: consumed(appliance, "dr-orders", west) == on_east, 60)

    code, status, stderr = failover(appliance, "status", LINK_NAME)
    assert code == 0, stderr
    assert status["links"][0]["target"]["reachable"] and status["links"][0]["source"]["reachable"], status

    # Promote west (planned: east fenced, RPO 0), then app writes there with the same credentials.
    code, answer, stderr = failover(appliance, "promote", LINK_NAME, "--planned", "--timeout", "120")
    assert code == 0, stderr
    assert answer["primary"] == "west" and answer["rpo"]["records"] == 0, answer
    refused = kcat(appliance, "-P", "-t", "dr-orders", stdin="late\n")  # east is fenced now
    assert refused.returncode != 0 or consumed(appliance, "dr-orders") == on_east
    written = kcat(appliance, "-P", "-t", "dr-orders", stdin="w0\nw1\n", bootstrap=west)
    assert written.returncode == 0, written.stderr

    # Reverse (east mirrors west, the mirror still as its own user), then fail back to east.
    code, answer, stderr = failover(appliance, "reverse", LINK_NAME, "--export", str(tmp_path / "export"))
    assert code == 0, stderr
    on_west = consumed(appliance, "dr-orders", west)
    assert len(on_west) == 12, on_west
    wait_for("east to mirror west", lambda: consumed(appliance, "dr-orders") == on_west, 60)
    code, answer, stderr = failover(appliance, "failback", LINK_NAME, "--timeout", "120")
    assert code == 0, stderr
    assert answer["primary"] == "east" and answer["state"] == "mirroring", answer
    assert consumed(appliance, "dr-orders") == consumed(appliance, "dr-orders", west) == on_west
    again = kcat(appliance, "-P", "-t", "dr-orders", stdin="e10\n")
    assert again.returncode == 0, again.stderr
    wait_for("west to mirror east again", lambda: len(consumed(appliance, "dr-orders", west)) == 13, 60)


def test_a_restart_reuses_every_secret_credential_and_record(appliance: Appliance) -> None:
    before = {path.name: path.read_bytes() for path in appliance.secrets.iterdir()}
    credentials = {site: user_znode_version(appliance, site, "app") for site in ("east", "west")}
    records = consumed(appliance, "orders")
    assert stop(appliance) == 0, appliance.log.read_text()
    for node_log in appliance.directory.glob("*/node-1/node.log"):
        assert "stopped cleanly" in node_log.read_text()

    plain = strait("up", "--dir", str(appliance.directory))
    assert plain.returncode == 2 and "made with --secure" in plain.stderr, plain.stderr

    restarted = start(appliance.directory, appliance.log)
    appliance.up, appliance.info = restarted.up, restarted.info
    assert "secrets: reused in" in appliance.log.read_text()
    assert {path.name: path.read_bytes() for path in appliance.secrets.iterdir()} == before
    assert {site: user_znode_version(appliance, site, "app") for site in ("east", "west")} == credentials
    assert consumed(appliance, "orders") == records  # the same password, on the new ports
    assert stop(appliance) == 0
