"""node.client's SASL: SaslCredentials, NodeConnection's authentication and KIP-368 re-authentication.

Unit tests drive a NodeConnection against a fake node on a memory stream (strait's own SASL
servers answer, trio's mock clock runs the sessions). Integration tests run one real node with
SASL_PLAINTEXT and SASL_SSL listeners: PLAIN and both SCRAM mechanisms through ``SiteClient``'s
verbs, the broker's refusals as ClientError codes, and a connection kept for several sessions.
"""

from __future__ import annotations

import json
import ssl
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from node.client import (
    ClientError,
    NodeConnection,
    ProduceRecord,
    SaslCredentials,
    SiteClient,
    complete_batches,
    ensure_topic,
    fetch_partition,
    produce_records,
)
from node.protocol import ApiKey, ErrorCode, decode_request, encode_response, read_request_header
from node.security._sasl import SaslFailure, SaslServer
from node.security._scram import ScramCredential, ScramMechanism, make_credential
from node.security._servers import new_server
from storage.records import Offset
from tests.node.harness import NodeProcess
from tests.tls import TestCa, subject

PLAIN_USERS = {"alice": "alice-secret"}
SCRAM_PASSWORD = "carol-secret"


# -- a fake node on a memory stream ----------------------------------------------------------------


class FakeNode:
    """Answers ApiVersions (advertising ``handshake`` and ``authenticate`` version ranges),
    SaslHandshake and SaslAuthenticate with strait's SASL servers, like strait's server: after a
    session of ``lifetime_ms`` any request but SaslHandshake closes the connection. ``seen``
    lists (API key, version) of every request in arrival order.
    """

    def __init__(
        self,
        *,
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        lifetime_ms: int = 0,
        handshake: tuple[int, int] = (0, 1),
        authenticate: tuple[int, int] = (0, 1),
        scram: Callable[[str, str], ScramCredential | None] | None = None,
    ) -> None:
        self.mechanisms = mechanisms
        self.lifetime_ms = lifetime_ms
        self.ranges = {
            ApiKey.API_VERSIONS: (0, 3),
            ApiKey.SASL_HANDSHAKE: handshake,
            ApiKey.SASL_AUTHENTICATE: authenticate,
        }
        credentials = {
            m: make_credential(ScramMechanism.from_name(m), SCRAM_PASSWORD) for m in mechanisms if "SCRAM" in m
        }
        self.scram = scram or (lambda mechanism, user: credentials.get(mechanism) if user == "carol" else None)
        self.plain_users = dict(PLAIN_USERS)
        self.seen: list[tuple[ApiKey, int]] = []
        self.expires_at: float | None = None
        self.closed = False

    async def serve(self, stream: trio.abc.Stream) -> None:
        buffer = bytearray()
        exchange: SaslServer | None = None
        try:
            while True:
                while len(buffer) < 4 or len(buffer) < 4 + struct.unpack_from(">i", buffer)[0]:
                    data = await stream.receive_some()
                    if not data:
                        return
                    buffer += data
                size = struct.unpack_from(">i", buffer)[0]
                frame, buffer = bytes(buffer[4 : 4 + size]), buffer[4 + size :]
                header, at = read_request_header(frame)
                body = decode_request(header, frame, at)
                key = ApiKey(header.api_key)
                self.seen.append((key, header.api_version))
                expired = self.expires_at is not None and trio.current_time() >= self.expires_at
                if key == ApiKey.SASL_HANDSHAKE:
                    ok = body.mechanism in self.mechanisms
                    exchange = self._server(body.mechanism) if ok else None
                    code = ErrorCode.NONE if ok else ErrorCode.UNSUPPORTED_SASL_MECHANISM
                    answer: dict[str, Any] = {"error_code": code, "mechanisms": list(self.mechanisms)}
                elif key == ApiKey.SASL_AUTHENTICATE:
                    assert exchange is not None
                    try:
                        token = exchange.step(bytes(body.auth_bytes))
                    except SaslFailure as exc:
                        answer = {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc)}
                    else:
                        answer = {"error_code": 0, "auth_bytes": token, "session_lifetime_ms": self.lifetime_ms}
                        if exchange.complete and self.lifetime_ms:
                            self.expires_at = trio.current_time() + self.lifetime_ms / 1000
                elif expired:
                    return  # strait closes a connection whose session ended
                else:
                    ranges = [
                        {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in self.ranges.items()
                    ]
                    answer = {"error_code": 0, "api_keys": ranges}
                await stream.send_all(b"".join(bytes(p) for p in encode_response(header, answer).parts))
        finally:
            self.closed = True
            await stream.aclose()

    def _server(self, mechanism: str) -> SaslServer:
        return new_server(mechanism, plain_users=self.plain_users, scram_lookup=self.scram)


async def connected(
    nursery: trio.Nursery, node: FakeNode, sasl: SaslCredentials | None
) -> tuple[NodeConnection, trio.abc.Stream]:
    client_end, node_end = trio.testing.memory_stream_pair()
    nursery.start_soon(node.serve, node_end)
    return NodeConnection(client_end, "fake:9092", "test", sasl=sasl), client_end


async def ping(conn: NodeConnection) -> None:
    assert (await conn.request(ApiKey.API_VERSIONS, 0, {}, timeout=5)).error_code == 0


SCRAM_256 = SaslCredentials("SCRAM-SHA-256", "carol", SCRAM_PASSWORD)
HANDSHAKE, AUTHENTICATE, VERSIONS = ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.API_VERSIONS


def test_credentials_hide_the_password_and_refuse_unknown_mechanisms() -> None:
    credentials = SaslCredentials("SCRAM-SHA-512", "carol", "hunter2")
    assert "hunter2" not in repr(credentials) and "carol" in repr(credentials)
    with pytest.raises(ValueError, match="'GSSAPI' is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        SaslCredentials("GSSAPI", "carol", "hunter2")


def test_authenticates_after_api_versions_and_again_at_85_to_95_percent_of_the_session() -> None:
    async def main() -> None:
        node = FakeNode(lifetime_ms=10_000)
        async with trio.open_nursery() as nursery:
            conn, _ = await connected(nursery, node, SCRAM_256)
            await conn.start(timeout=5)
            assert node.seen == [(VERSIONS, 0), (HANDSHAKE, 1), (AUTHENTICATE, 1), (AUTHENTICATE, 1)]
            assert conn.authentications == 1
            await trio.sleep(8.4)
            await ping(conn)  # before 85%: no re-authentication
            assert conn.authentications == 1 and len(node.seen) == 5
            await trio.sleep(1.2)  # 9.6 s: past 95%, before the session ends
            await ping(conn)
            assert node.seen[5:] == [(HANDSHAKE, 1), (AUTHENTICATE, 1), (AUTHENTICATE, 1), (VERSIONS, 0)]
            assert conn.authentications == 2
            await trio.sleep(25)  # idle past the session's end: re-authentication is still accepted
            await ping(conn)
            assert conn.authentications == 3 and not node.closed
            await conn.aclose()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_requests_waiting_for_the_connection_never_interleave_with_a_re_authentication() -> None:
    async def main() -> None:
        node = FakeNode(lifetime_ms=2_000)
        async with trio.open_nursery() as nursery:
            conn, _ = await connected(nursery, node, SaslCredentials("PLAIN", "alice", "alice-secret"))
            await conn.start(timeout=5)
            await trio.sleep(1.95)
            async with trio.open_nursery() as requests:
                for _ in range(4):
                    requests.start_soon(ping, conn)
            assert [key for key, _ in node.seen[3:]] == [
                HANDSHAKE,
                AUTHENTICATE,
                VERSIONS,
                VERSIONS,
                VERSIONS,
                VERSIONS,
            ]
            await conn.aclose()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_sasl_authenticate_v0_carries_no_session_lifetime() -> None:
    async def main() -> None:
        node = FakeNode(lifetime_ms=0, authenticate=(0, 0))
        async with trio.open_nursery() as nursery:
            conn, _ = await connected(nursery, node, SaslCredentials("SCRAM-SHA-512", "carol", SCRAM_PASSWORD))
            await conn.start(timeout=5)
            assert node.seen == [(VERSIONS, 0), (HANDSHAKE, 1), (AUTHENTICATE, 0), (AUTHENTICATE, 0)]
            await trio.sleep(3600)
            await ping(conn)
            assert conn.authentications == 1
            await conn.aclose()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def refused(node: FakeNode, sasl: SaslCredentials) -> ClientError:
    """The ClientError ``start`` raises, after checking the connection was closed."""

    async def main() -> ClientError:
        async with trio.open_nursery() as nursery:
            conn, client_end = await connected(nursery, node, sasl)
            with pytest.raises(ClientError) as failure:
                await conn.start(timeout=5)
            with pytest.raises(trio.ClosedResourceError):
                await client_end.send_all(b"x")
        return failure.value

    return trio.run(main)


def test_the_broker_s_refusals_are_client_errors_with_its_code_and_message() -> None:
    error = refused(FakeNode(mechanisms=("PLAIN",)), SCRAM_256)
    assert error.code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "UNSUPPORTED_SASL_MECHANISM: the node's mechanisms are PLAIN" in str(error)
    error = refused(FakeNode(), SaslCredentials("PLAIN", "alice", "wrong"))
    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED and "invalid credentials" in str(error)
    assert "wrong" not in str(error).replace("'alice'", "")
    error = refused(FakeNode(handshake=(0, 0)), SCRAM_256)
    assert error.code == ErrorCode.UNSUPPORTED_VERSION and "only at v0" in str(error)


def test_a_scram_server_that_cannot_sign_is_refused() -> None:
    # The node checks the proof with the right StoredKey but signs with a ServerKey it does not have.
    real = make_credential(ScramMechanism.SCRAM_SHA_256, SCRAM_PASSWORD)
    forged = ScramCredential(real.salt, real.stored_key, bytes(32), real.iterations)
    error = refused(FakeNode(scram=lambda _m, _u: forged), SCRAM_256)
    assert error.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "signature does not verify" in str(error)


def test_a_failed_re_authentication_closes_the_connection() -> None:
    async def main() -> None:
        node = FakeNode(lifetime_ms=1_000)
        async with trio.open_nursery() as nursery:
            conn, _ = await connected(nursery, node, SaslCredentials("PLAIN", "alice", "alice-secret"))
            await conn.start(timeout=5)
            node.plain_users["alice"] = "changed"
            await trio.sleep(1)
            with pytest.raises(ClientError) as failure:
                await ping(conn)
            assert failure.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
            with pytest.raises(ClientError, match="failed"):
                await ping(conn)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- one real node ---------------------------------------------------------------------------------

NodeFactory = Callable[..., NodeProcess]
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


def listeners(node: NodeProcess) -> dict[str, str]:
    return {k: str(v) for k, v in json.loads(node.ready_path.read_text())["listeners"].items()}


def add_scram_user(bootstrap: str, user: str, password: str, mechanism: str) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, UserScramCredentialUpsertion
    from confluent_kafka.admin import ScramMechanism as Mechanism

    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(Mechanism[mechanism.replace("-", "_")], 4096)
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode())]
    ).values():
        future.result(30)


async def round_trip(address: str, sasl: SaslCredentials, context: ssl.SSLContext | None, topic: str) -> None:
    """Create ``topic``, produce three records and fetch them back, all through one SiteClient."""
    site = SiteClient("sasl", address, client_id="test-sasl-client", ssl_context=context, sasl=sasl)
    try:
        assert await ensure_topic(site, topic)
        values = [f"{topic}-{i}-{uuid.uuid4().hex[:6]}".encode() for i in range(3)]
        await produce_records(site, topic, 0, [ProduceRecord(None, v) for v in values])
        fetched = await site.on_leader(topic, 0, lambda conn: fetch_partition(conn, topic, 0, Offset(0)))
        assert fetched.error_code == 0 and fetched.high_watermark == 3
        assert [h.last_offset_delta for _, h in complete_batches(fetched.records)] == [2]
        assert all(v in bytes(fetched.records) for v in values)
    finally:
        await site.aclose()


async def refusal(address: str, sasl: SaslCredentials, context: ssl.SSLContext | None = None) -> ClientError:
    with pytest.raises(ClientError) as failure:
        await NodeConnection.open(address, ssl_context=context, sasl=sasl)
    return failure.value


@pytest.mark.integration
def test_site_client_speaks_plain_and_both_scram_mechanisms_over_sasl_plaintext_and_sasl_ssl(
    node_factory: NodeFactory, tmp_path: Path
) -> None:
    ca = TestCa(tmp_path / "pki")
    server = ca.issue("node", subject(CN="node-1"), ip="127.0.0.1")
    node = node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        ssl_keystore_location=str(server.pem),
        sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        sasl_jaas_config=JAAS,
        connection_failed_authentication_delay_ms="50",
    )
    add_scram_user(node.bootstrap, "carol", "carol-256", "SCRAM-SHA-256")
    add_scram_user(node.bootstrap, "dave", "dave-512", "SCRAM-SHA-512")
    addresses = listeners(node)
    context = ssl.create_default_context(cafile=str(ca.pem))
    users = {
        "PLAIN": ("alice", "alice-secret"),
        "SCRAM-SHA-256": ("carol", "carol-256"),
        "SCRAM-SHA-512": ("dave", "dave-512"),
    }

    async def main() -> None:
        for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            tls = context if protocol == "SASL_SSL" else None
            for mechanism, (user, password) in users.items():
                topic = f"{protocol}-{mechanism}".lower()
                await round_trip(addresses[protocol], SaslCredentials(mechanism, user, password), tls, topic)
        wrong = await refusal(addresses["SASL_PLAINTEXT"], SaslCredentials("PLAIN", "alice", "wrong"))
        assert wrong.code == ErrorCode.SASL_AUTHENTICATION_FAILED and "invalid credentials" in str(wrong)
        wrong = await refusal(addresses["SASL_SSL"], SaslCredentials("SCRAM-SHA-512", "dave", "wrong"), context)
        assert wrong.code == ErrorCode.SASL_AUTHENTICATION_FAILED and "invalid credentials" in str(wrong)
        # carol has no SCRAM-SHA-512 credential; through a SiteClient the code survives.
        site = SiteClient(
            "sasl",
            addresses["SASL_SSL"],
            client_id="t",
            ssl_context=context,
            sasl=SaslCredentials("SCRAM-SHA-512", "carol", "carol-256"),
        )
        with pytest.raises(ClientError) as failure:
            await site.refresh()
        assert failure.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED

    trio.run(main)


@pytest.mark.integration
def test_a_connection_re_authenticates_through_sessions_of_1500_ms(node_factory: NodeFactory) -> None:
    node = node_factory(
        1,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        sasl_enabled_mechanisms="PLAIN",
        sasl_jaas_config=JAAS,
        connections_max_reauth_ms="1500",
    )
    address = listeners(node)["SASL_PLAINTEXT"]

    async def main() -> None:
        unsupported = await refusal(address, SCRAM_256)
        assert unsupported.code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and "mechanisms are PLAIN" in str(unsupported)
        async with await NodeConnection.open(address, sasl=SaslCredentials("PLAIN", "alice", "alice-secret")) as conn:
            started = time.monotonic()
            answered = 0
            while time.monotonic() - started < 4.0:  # about 2.7 sessions
                body = await conn.request(ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False})
                assert body.brokers
                answered += 1
                await trio.sleep(0.2)
            # The node closes a connection whose session ended: this one was re-authenticated in time.
            assert answered >= 15 and conn.authentications >= 3

    trio.run(main)
