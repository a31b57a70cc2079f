"""The toxiproxy HTTP API, driven by the real toxiproxy-python client and by raw HTTP for bad input.

The server runs in a background thread (``run_in_thread``), as plain synchronous tests use it.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from chaos.errors import ChaosError, InvalidRequestError, ProxyNotFoundError
from chaos.proxy import ProxyHandle, run_in_thread
from tests.chaos.echo import echo_in_thread

HTTP_TIMEOUT_S = 10.0


@pytest.fixture
def chaos(chaos_proxy: ProxyHandle) -> ProxyHandle:
    return chaos_proxy


@pytest.fixture
def echo() -> Iterator[str]:
    with echo_in_thread() as address:
        yield address


@pytest.fixture
def client(chaos: ProxyHandle) -> Iterator[toxiproxy.Toxiproxy]:
    """The toxiproxy-python client pointed at our API (its address is class state: restored after)."""
    saved = APIConsumer.host, APIConsumer.port
    host, port = chaos.api_url.removeprefix("http://").rsplit(":", 1)
    server = toxiproxy.Toxiproxy()
    server.update_api_consumer(host, int(port))
    yield server
    APIConsumer.host, APIConsumer.port = saved


def round_trip(listen: str, data: bytes = b"ping", timeout: float = 5.0) -> float:
    host, port = listen.rsplit(":", 1)
    start = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        conn.sendall(data)
        got = b""
        while len(got) < len(data):
            chunk = conn.recv(len(data) - len(got))
            assert chunk, f"EOF after {got!r}"
            got += chunk
    assert got == data
    return time.monotonic() - start


def refused(listen: str) -> bool:
    host, port = listen.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2.0).close()
    except ConnectionRefusedError:
        return True
    return False


# -- the real client ----------------------------------------------------------------------------


def test_toxiproxy_python_client_end_to_end(client: toxiproxy.Toxiproxy, echo: str) -> None:
    assert client.running()
    assert json.loads(client.version())["version"].startswith("2.")

    proxy = client.create(upstream=echo, name="echo", listen="127.0.0.1:0")
    assert proxy.name == "echo" and proxy.upstream == echo and proxy.enabled is True
    assert not proxy.listen.endswith(":0")
    assert set(client.proxies()) == {"echo"}
    assert round_trip(proxy.listen) < 1.0

    proxy.add_toxic(type="latency", attributes={"latency": 200, "jitter": 0})
    toxics = proxy.toxics()
    assert set(toxics) == {"latency_downstream"}
    toxic = toxics["latency_downstream"]
    assert (toxic.type, toxic.stream, toxic.toxicity, toxic.attributes) == (
        "latency",
        "downstream",
        1.0,
        {"latency": 200, "jitter": 0},
    )
    assert round_trip(proxy.listen) >= 0.2
    assert proxy.destroy_toxic("latency_downstream") is True
    assert proxy.get_toxic("latency_downstream") is None
    assert round_trip(proxy.listen) < 1.0

    with proxy.down():
        assert refused(proxy.listen)
        assert client.get_proxy("echo").enabled is False
    assert round_trip(proxy.listen) < 1.0

    proxy.add_toxic(type="timeout", name="hole", stream="upstream", toxicity=0.5, attributes={"timeout": 0})
    proxy.disable()
    client.reset()
    assert client.get_proxy("echo").enabled is True
    assert proxy.toxics() == {}

    with pytest.raises(ProxyExists):
        client.create(upstream=echo, name="echo")
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="no_such_toxic")
    with pytest.raises(NotFound):
        proxy.destroy_toxic("ghost")

    assert client.destroy(proxy) is True
    assert client.get_proxy("echo") is None
    assert refused(proxy.listen)


def test_client_populate_creates_and_replaces(client: toxiproxy.Toxiproxy, echo: str) -> None:
    created = client.populate([{"name": "a", "upstream": echo, "listen": "127.0.0.1:0"}])
    assert [p.name for p in created] == ["a"]
    assert round_trip(client.get_proxy("a").listen) < 1.0


# -- raw HTTP: shapes, codes and bad input --------------------------------------------------------


def call(chaos: ProxyHandle, method: str, path: str, body: object = None, **kwargs: Any) -> requests.Response:
    return requests.request(method, chaos.api_url + path, json=body, timeout=HTTP_TIMEOUT_S, **kwargs)


def expect_error(response: requests.Response, status: int, *fragments: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == status
    for fragment in fragments:
        assert fragment in body["error"], (fragment, body)


def test_http_shapes_and_status_codes(chaos: ProxyHandle, echo: str) -> None:
    created = call(chaos, "POST", "/proxies", {"name": "p", "upstream": echo})
    assert created.status_code == 201
    proxy = created.json()
    assert set(proxy) == {"name", "listen", "upstream", "enabled", "toxics"}
    assert proxy["listen"].startswith("127.0.0.1:") and proxy["toxics"] == []

    toxic = call(chaos, "POST", "/proxies/p/toxics", {"type": "bandwidth", "attributes": {"rate": 50}})
    assert toxic.status_code == 200
    assert toxic.json() == {
        "name": "bandwidth_downstream",
        "type": "bandwidth",
        "stream": "downstream",
        "toxicity": 1.0,
        "attributes": {"rate": 50},
    }
    updated = call(chaos, "POST", "/proxies/p/toxics/bandwidth_downstream", {"attributes": {"rate": 80}})
    assert updated.json()["attributes"] == {"rate": 80}
    patched = call(chaos, "PATCH", "/proxies/p/toxics/bandwidth_downstream", {"toxicity": 0.25})
    assert patched.json()["toxicity"] == 0.25 and patched.json()["attributes"] == {"rate": 80}
    assert call(chaos, "GET", "/proxies/p/toxics/bandwidth_downstream").json()["toxicity"] == 0.25
    assert [t["name"] for t in call(chaos, "GET", "/proxies/p/toxics").json()] == ["bandwidth_downstream"]
    assert call(chaos, "GET", "/proxies/p").json()["toxics"][0]["attributes"] == {"rate": 80}

    saved = call(chaos, "POST", "/proxies/p", call(chaos, "GET", "/proxies/p").json())  # a Go client's Save()
    assert saved.status_code == 200 and saved.json()["listen"] == proxy["listen"]
    disabled = call(chaos, "POST", "/proxies/p", {"enabled": False})
    assert disabled.status_code == 200 and disabled.json()["enabled"] is False
    assert call(chaos, "PATCH", "/proxies/p", {"enabled": True}).json()["enabled"] is True

    assert call(chaos, "DELETE", "/proxies/p/toxics/bandwidth_downstream").status_code == 204
    assert call(chaos, "POST", "/reset").status_code == 204
    assert call(chaos, "DELETE", "/proxies/p").status_code == 204
    assert call(chaos, "GET", "/proxies").json() == {}


def test_http_bad_input_is_named(chaos: ProxyHandle, echo: str) -> None:
    expect_error(call(chaos, "POST", "/proxies", {"name": "p"}), 400, "upstream")
    expect_error(call(chaos, "POST", "/proxies", {"name": "p", "upstream": "nope"}), 400, "'nope'")
    expect_error(call(chaos, "POST", "/proxies", {"name": "p", "upstream": echo, "listen": "x:99999"}), 400, "99999")
    expect_error(call(chaos, "POST", "/proxies", {"name": "p", "upstream": echo, "colour": "red"}), 400, "'colour'")
    expect_error(call(chaos, "POST", "/proxies", {"name": "a/b", "upstream": echo}), 400, "'a/b'")
    expect_error(call(chaos, "POST", "/proxies", [1, 2]), 400, "JSON object")
    expect_error(call(chaos, "POST", "/proxies", data=b"{not json"), 400, "not JSON")
    assert call(chaos, "POST", "/proxies", {"name": "p", "upstream": echo}).status_code == 201
    expect_error(call(chaos, "POST", "/proxies", {"name": "p", "upstream": echo}), 409, "'p'")
    taken = chaos.proxy("p").listen
    expect_error(call(chaos, "POST", "/proxies", {"name": "q", "upstream": echo, "listen": taken}), 400, taken)
    expect_error(call(chaos, "POST", "/proxies/p", {"enabled": "yes"}), 400, "'yes'")
    expect_error(call(chaos, "POST", "/proxies/p", {"name": "renamed"}), 400, "'renamed'")

    expect_error(call(chaos, "GET", "/proxies/ghost"), 404, "'ghost'")
    expect_error(call(chaos, "DELETE", "/proxies/ghost"), 404, "'ghost'")
    expect_error(call(chaos, "POST", "/proxies/ghost/toxics", {"type": "latency"}), 404, "'ghost'")
    expect_error(call(chaos, "GET", "/proxies/p/toxics/ghost"), 404, "'ghost'")
    expect_error(call(chaos, "POST", "/proxies/p/toxics/ghost", {"toxicity": 1}), 404, "'ghost'")

    expect_error(call(chaos, "POST", "/proxies/p/toxics", {"type": "gremlin"}), 400, "'gremlin'")
    expect_error(call(chaos, "POST", "/proxies/p/toxics", {"stream": "up"}), 400, "'type'")
    expect_error(call(chaos, "POST", "/proxies/p/toxics", {"type": "latency", "stream": "sideways"}), 400, "'sideways'")
    expect_error(call(chaos, "POST", "/proxies/p/toxics", {"type": "latency", "toxicity": 2}), 400, "toxicity: 2")
    bad_attribute = {"type": "latency", "attributes": {"latency": -5}}
    expect_error(call(chaos, "POST", "/proxies/p/toxics", bad_attribute), 400, "latency", "-5")
    wrong_attribute = {"type": "latency", "attributes": {"rate": 5}}
    expect_error(call(chaos, "POST", "/proxies/p/toxics", wrong_attribute), 400, "'rate'", "latency, jitter")
    assert call(chaos, "POST", "/proxies/p/toxics", {"type": "latency", "name": "l"}).status_code == 200
    expect_error(call(chaos, "POST", "/proxies/p/toxics", {"type": "latency", "name": "l"}), 409, "'l'")
    expect_error(call(chaos, "POST", "/proxies/p/toxics/l", {"type": "timeout"}), 400, "'timeout'")
    expect_error(call(chaos, "POST", "/proxies/p/toxics/l", {"attributes": {"latency": True}}), 400, "True")

    expect_error(call(chaos, "GET", "/nowhere"), 404, "'/nowhere'")
    expect_error(call(chaos, "PUT", "/proxies"), 405, "PUT")
    expect_error(call(chaos, "POST", "/proxies", data=b"x" * 70_000), 413, "too large")
    expect_error(call(chaos, "GET", "/proxies", headers={"User-Agent": "Mozilla/5.0"}), 403, "browsers")
    assert [t.name for t in chaos.toxics("p")] == ["l"]  # nothing above changed the toxics


def test_slicer_and_packet_loss_through_the_client_and_raw_http(
    client: toxiproxy.Toxiproxy, chaos: ProxyHandle, echo: str
) -> None:
    proxy = client.create(upstream=echo, name="p", listen="127.0.0.1:0")
    slicer = {"average_size": 100, "size_variation": 20, "delay": 1000}
    proxy.add_toxic(type="slicer", attributes=slicer)
    assert proxy.toxics()["slicer_downstream"].attributes == slicer
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="slicer", name="bad", attributes={"average_size": 0})
    loss = call(chaos, "POST", "/proxies/p/toxics", {"type": "packet_loss", "attributes": {"probability": 5}})
    assert loss.status_code == 200, loss.text
    assert loss.json() == {
        "name": "packet_loss_downstream",
        "type": "packet_loss",
        "stream": "downstream",
        "toxicity": 1.0,
        "attributes": {"probability": 5, "rto_ms": 200},  # the RTO defaults to Linux's minimum
    }
    payload = bytes(range(256)) * 20
    assert round_trip(proxy.listen, payload) < 5.0  # round_trip checks every byte came back, in order

    toxics = "/proxies/p/toxics"
    expect_error(call(chaos, "POST", toxics, {"type": "slicer", "name": "s"}), 400, "average_size: 0", "at least 1")
    too_varied = {"type": "slicer", "name": "s", "attributes": {"average_size": 10, "size_variation": 10}}
    expect_error(call(chaos, "POST", toxics, too_varied), 400, "size_variation: 10", "smaller than average_size (10)")
    negative = {"type": "slicer", "name": "s", "attributes": {"average_size": 10, "delay": -1}}
    expect_error(call(chaos, "POST", toxics, negative), 400, "slicer attribute delay", "-1")
    foreign = {"type": "slicer", "name": "s", "attributes": {"average_size": 10, "latency": 5}}
    expect_error(call(chaos, "POST", toxics, foreign), 400, "'latency'", "average_size, size_variation, delay")
    over = {"type": "packet_loss", "name": "l", "attributes": {"probability": 101}}
    expect_error(call(chaos, "POST", toxics, over), 400, "probability: 101", "percentage from 0 to 100")
    fraction = {"type": "packet_loss", "name": "l", "attributes": {"probability": 2.5}}
    expect_error(call(chaos, "POST", toxics, fraction), 400, "probability", "2.5")
    no_rto = {"type": "packet_loss", "name": "l", "attributes": {"rto_ms": 0}}
    expect_error(call(chaos, "POST", toxics, no_rto), 400, "rto_ms: 0", "at least 1 ms")
    # An update is checked with the attributes it keeps: variation 20 is not smaller than 20.
    shrink = call(chaos, "PATCH", f"{toxics}/slicer_downstream", {"attributes": {"average_size": 20}})
    expect_error(shrink, 400, "size_variation: 20", "smaller than average_size (20)")
    assert call(chaos, "GET", f"{toxics}/slicer_downstream").json()["attributes"] == slicer
    held = call(chaos, "PATCH", f"{toxics}/packet_loss_downstream", {"attributes": {"probability": 100}})
    assert held.json()["attributes"] == {"probability": 100, "rto_ms": 200}
    assert [t.name for t in chaos.toxics("p")] == ["slicer_downstream", "packet_loss_downstream"]


# -- the thread handle and the CLI ---------------------------------------------------------------


def test_handle_blackhole_and_errors(chaos: ProxyHandle, echo: str) -> None:
    info = chaos.add_proxy("p", echo)
    assert round_trip(info.listen) < 1.0
    with chaos.blackhole("p"):
        assert {t.name for t in chaos.toxics("p")} == {"blackhole_upstream", "blackhole_downstream"}
        with pytest.raises(TimeoutError):
            round_trip(info.listen, timeout=0.3)
    assert chaos.toxics("p") == []
    assert round_trip(info.listen) < 1.0
    toxic = chaos.add_toxic("p", "latency", latency=10, jitter=2)
    assert toxic.attributes == {"latency": 10, "jitter": 2}
    assert chaos.update_toxic("p", "latency_downstream", latency=20).attributes == {"latency": 20, "jitter": 2}
    with pytest.raises(InvalidRequestError, match="'rate'"):
        chaos.add_toxic("p", "latency", rate=3)
    with pytest.raises(ProxyNotFoundError):
        chaos.set_enabled("ghost", False)
    chaos.set_enabled("p", False)
    assert refused(info.listen)
    chaos.reset()
    assert chaos.proxy("p").enabled and chaos.toxics("p") == []
    chaos.remove_proxy("p")
    assert chaos.proxies() == {}


def test_handle_close_is_idempotent_and_final(echo: str) -> None:
    handle = run_in_thread(api=None)
    info = handle.add_proxy("p", echo)
    with pytest.raises(ChaosError, match="no HTTP API"):
        _ = handle.api_url
    handle.close()
    handle.close()
    assert refused(info.listen)
    with pytest.raises(ChaosError, match="stopped"):
        handle.add_proxy("q", echo)


def test_handle_bad_api_address() -> None:
    with pytest.raises(InvalidRequestError, match="'nonsense'"):
        run_in_thread(api="nonsense")


@pytest.mark.integration
def test_cli_serves_until_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "chaos.proxy", "--api", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()  # printed once the API listens
        assert line.startswith("chaos proxy API on http://"), line
        url = line.split(" on ", 1)[1].strip()
        assert requests.get(f"{url}/version", timeout=HTTP_TIMEOUT_S).json()["version"].startswith("2.")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.mark.integration
def test_cli_rejects_a_bad_api_address() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chaos.proxy", "--api", "nonsense"], capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 2
    assert b"'nonsense'" in done.stderr, done.stderr
