"""The ZooKeeper kit over the in-memory kazoo stand-in (no ZooKeeper): connect strings, sessions,
ephemeral create-or-find, the quiet stop and the client's retry settings; and, on a real
ZooKeeper, the quiet stop of a client whose kazoo worker is stuck."""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from node.zkkit import Found, PollHandler, create_or_find, kazoo_client, session_of, split_connect, stop_quietly
from tests.node.coordination.fake_kazoo import FakeClient, FakeZooKeeper


@pytest.mark.parametrize(
    ("connect", "hosts", "chroot"),
    [
        ("127.0.0.1:2181", "127.0.0.1:2181", ""),
        ("127.0.0.1:2181/", "127.0.0.1:2181", ""),
        ("a:1,b:2/site/east/", "a:1,b:2", "/site/east"),
    ],
)
def test_split_connect(connect: str, hosts: str, chroot: str) -> None:
    assert split_connect(connect) == (hosts, chroot)


@pytest.mark.parametrize("connect", ["", "/chroot", "a:1,,b:2", "a:1/x//y"])
def test_split_connect_rejects(connect: str) -> None:
    with pytest.raises(ValueError, match=r"zookeeper\.connect"):
        split_connect(connect)


def test_split_connect_names_the_setting_it_was_given() -> None:
    with pytest.raises(ValueError, match=r"^zookeeper '/chroot-only' names no host"):
        split_connect("/chroot-only", "zookeeper")


def test_create_or_find_creates_then_finds_the_holder_whoever_asks() -> None:
    server = FakeZooKeeper()
    a, b = FakeClient(server), FakeClient(server)
    assert create_or_find(a, "/x/e", b"a", makepath=True) is True
    assert create_or_find(a, "/x/e", b"again") == Found(b"a", a.session, 0)  # ours, untouched
    assert create_or_find(b, "/x/e", b"b") == Found(b"a", a.session, 0)  # someone else's, untouched
    assert a.get("/x/e")[0] == b"a"
    a.expire()
    assert create_or_find(b, "/x/e", b"b") is True


def test_create_or_find_says_false_when_the_znode_vanishes_between_create_and_read() -> None:
    server = FakeZooKeeper()
    holder = FakeClient(server)
    create_or_find(holder, "/e", b"h")

    class HolderExpiresMeanwhile(FakeClient):
        def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False, makepath: bool = False) -> str:
            try:
                return super().create(path, value, ephemeral=ephemeral, makepath=makepath)
            except NodeExistsError:
                holder.expire()
                raise

    assert create_or_find(HolderExpiresMeanwhile(server), "/e", b"x") is False


def test_create_or_find_sets_the_watch_and_lets_a_missing_parent_raise() -> None:
    server = FakeZooKeeper()
    watches: list[Any] = []

    class Recording(FakeClient):
        def get(self, path: str, watch: object = None) -> Any:
            watches.append(watch)
            return super().get(path, watch)

    a, b = FakeClient(server), Recording(server)
    create_or_find(a, "/e", b"a")

    def on_watch(event: Any) -> None:
        pass

    assert isinstance(create_or_find(b, "/e", b"b", watch=on_watch), Found)
    assert watches == [on_watch]
    with pytest.raises(NoNodeError):
        create_or_find(a, "/missing/e", b"a")  # no makepath: the parent's absence is the caller's error


def test_session_of_and_the_quiet_stop() -> None:
    client = FakeClient(FakeZooKeeper())
    assert session_of(client) == client.session

    class NoSession:
        client_id = None

    assert session_of(NoSession()) is None

    class Failing:
        closed = False

        def stop(self) -> None:
            raise RuntimeError("stop failed")

        def close(self) -> None:
            self.closed = True

    failing = Failing()
    stop_quietly(failing)  # logs, never raises, and still closes
    assert failing.closed


def test_the_kazoo_client_reconnects_forever_and_retries_commands_as_asked() -> None:
    client = kazoo_client("127.0.0.1:1", 4.0, command_tries=3)
    assert (client._conn_retry.max_tries, client._retry.max_tries) == (-1, 3)
    assert kazoo_client("127.0.0.1:1", 4.0)._retry.max_tries == 5


def test_the_kazoo_client_selects_with_poll() -> None:
    assert isinstance(kazoo_client("127.0.0.1:1", 4.0).handler, PollHandler)


def test_poll_select_reports_what_is_readable_and_writable_as_kazoos_does() -> None:
    select = PollHandler().select
    a, b = socket.socketpair()
    with a, b:
        assert select([a, b], [], [], 0) == ([], [], [])  # nothing to read: a timeout
        assert select([], [a], [], 0) == ([], [a], [])  # an empty send buffer is writable
        b.sendall(b"x")
        assert select([a, b], [], [], 0) == ([a], [], [])
        assert select([a], [a], [], None) == ([a], [a], [])  # both on one descriptor
        b.close()
        a.recv(1)
        assert select([a], [], [], 0.5) == ([a], [], [])  # the peer's close reads as readable (EOF)
    c, d = socket.socketpair()
    with c, d:
        started = time.monotonic()
        assert select([c], [], [], 0.05) == ([], [], [])
        assert time.monotonic() - started >= 0.04  # the timeout is in seconds, as select's


def test_poll_select_takes_descriptors_above_select_selects_limit() -> None:
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] <= 1100:
        pytest.skip("the open-files limit is too low to hold descriptor 1100")
    a, b = socket.socketpair()
    high = socket.socket(fileno=os.dup2(a.fileno(), 1100))
    with a, b, high:
        b.sendall(b"x")
        assert PollHandler().select([high], [high], [], 0) == ([high], [high], [])


@pytest.mark.integration
def test_many_pipelined_reads_and_writes_over_the_poll_handler(zookeeper: str) -> None:
    root = f"/poll-{uuid.uuid4().hex}"
    client = kazoo_client(zookeeper, 10.0)
    client.start(timeout=10)
    try:
        client.create(root)
        writes = [client.create_async(f"{root}/n{i}", str(i).encode()) for i in range(2000)]
        assert [w.get(timeout=30) for w in writes][-1] == f"{root}/n1999"
        reads = [client.get_async(f"{root}/n{i}") for i in range(2000)]
        assert [r.get(timeout=30)[0] for r in reads] == [str(i).encode() for i in range(2000)]
    finally:
        client.delete(root, recursive=True)
        stop_quietly(client)


@pytest.mark.integration
def test_the_quiet_stop_ends_the_session_even_when_a_kazoo_worker_is_stuck_on_the_wake_up_socket(
    zookeeper: str,
) -> None:
    # What a watch callback re-arming its watch as the session closes can do: write wake-up bytes
    # to the client's internal socket pair when nobody reads it any more. kazoo's stop() joins
    # its workers, so it waited for this one forever.
    held = f"/held-{uuid.uuid4().hex}"
    client = kazoo_client(zookeeper, 10.0)
    client.start(timeout=10)
    client.create(held, b"x", ephemeral=True)
    flooding = threading.Event()

    def flood() -> None:
        flooding.set()
        client._connection._write_sock.sendall(b"\0" * 200_000_000)

    client.handler.dispatch_callback(SimpleNamespace(func=flood, args=()))
    assert flooding.wait(10)
    started = time.monotonic()
    stop_quietly(client, wait=1.0)
    took = time.monotonic() - started
    assert took < 5.0, f"stop_quietly took {took:.1f} s"
    observer = kazoo_client(zookeeper, 10.0)
    observer.start(timeout=10)
    try:
        assert observer.exists(held) is None  # the session ended: its ephemeral went with it
    finally:
        stop_quietly(observer)
