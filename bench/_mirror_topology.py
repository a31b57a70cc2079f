"""The mirror benchmark's processes besides the sites: the WAN fault proxy and the mirror process.

- **the WAN** (:func:`wan_proxies`): ``python -m chaos.proxy`` in a process of its own (a Python
  proxy inside the mirror's process would share its GIL), one proxy per source broker created
  from ``--config``, then a ``latency`` toxic on each stream of each proxy, added with the
  toxiproxy-python client through the proxy's toxiproxy-compatible HTTP API. Half the round
  trip goes on each stream (``upstream``: mirror -> source broker, ``downstream``: back), each
  with half the jitter, so a request and its answer take ``rtt_ms`` +- ``jitter_ms`` more.
- **the mirror** (:func:`mirror_process`): ``python -m bench._mirror_runner`` running one link,
  its status in a JSON file; SIGUSR1 / SIGUSR2 pause and resume it.

Both are ``node.proc`` children (own session, killed by the kernel if the benchmark dies) and are
stopped by ``bench._procs.stop`` (SIGTERM, then SIGKILL of the group) when their ``with`` block
ends, also on errors and Ctrl-C.
"""

from __future__ import annotations

import functools
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toxiproxy

from node.proc import Child, ChildExited, Deadline, NotReady, spawn, spawn_ready, wait_until

from ._procs import POLL_S, START_TIMEOUT_S, BenchError, child_error, printed, split_host_port, stop
from ._report import REPO_ROOT
from ._site import SITE_PROPERTIES

PROXY_READY = "chaos proxy API on http://"  # what `python -m chaos.proxy` prints once it serves
PARTITIONS = 4  # of every benchmark topic, on both sites
# replication_bench's site, and no auto-created topics: a mirror topic must be made by the link.
PROPERTIES = SITE_PROPERTIES | {"auto.create.topics.enable": "false"}
WEST_POLL_S = 0.01  # how often west's high watermarks are read while timing a catch-up copy


@dataclass(frozen=True)
class Wan:
    """The running fault proxy: its API, and the route table source broker address -> proxy address."""

    api: str  # host:port of the toxiproxy-compatible API
    routes: dict[str, str]
    session: int  # the proxy process (its own session), for CPU accounting and py-spy
    rtt_ms: int
    jitter_ms: int

    @property
    def bootstrap(self) -> str:
        """The source site's bootstrap as the mirror sees it: through the proxies."""
        return ",".join(self.routes.values())


def _toxiproxy_client(api: str) -> toxiproxy.Toxiproxy:
    host, port = split_host_port(api)
    client = toxiproxy.Toxiproxy()
    client.update_api_consumer(host, port)  # class state of toxiproxy-python: one API per process
    return client


@contextmanager
def wan_proxies(brokers: list[str], workdir: Path, *, rtt_ms: int, jitter_ms: int, seed: int = 1) -> Iterator[Wan]:
    """A fault proxy process with one proxy per address in ``brokers`` (named ``east-<i>``) and
    ``rtt_ms`` +- ``jitter_ms`` of latency split over both streams; always stopped.

    Raises ``ChildExited`` or ``NotReady`` if it does not start, ``BenchError`` if the API does not
    list the proxies.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "proxies.json"
    names = {f"east-{i}": address for i, address in enumerate(brokers, start=1)}
    config.write_text(json.dumps([{"name": n, "upstream": a, "listen": "127.0.0.1:0"} for n, a in names.items()]))
    argv = [sys.executable, "-m", "chaos.proxy", "--api", "127.0.0.1:0", "--config", str(config)]
    argv += ["--seed", str(seed), "--log-level", "WARNING"]
    child = spawn(argv, workdir / "chaos-proxy.log", name="chaos-proxy", cwd=REPO_ROOT)
    try:
        started = Deadline(START_TIMEOUT_S, f"the chaos proxy to print {PROXY_READY!r}")
        line = wait_until(functools.partial(printed, child, PROXY_READY), started, watch=[child])
        api = line.split(PROXY_READY, 1)[1].strip()
        split_host_port(api)
        client = _toxiproxy_client(api)
        proxies = client.proxies()
        if set(proxies) != set(names):
            raise BenchError(f"the chaos proxy at {api} lists proxies {sorted(proxies)}, expected {sorted(names)}")
        wan = Wan(
            api, {names[name]: proxy.listen for name, proxy in sorted(proxies.items())}, child.pid, rtt_ms, jitter_ms
        )
        set_latency(wan, rtt_ms, jitter_ms)
        yield wan
    finally:
        stop(child)


def set_latency(wan: Wan, rtt_ms: int, jitter_ms: int) -> None:
    """Make every proxy of ``wan`` add ``rtt_ms`` +- ``jitter_ms`` per round trip (half on each stream);
    0 removes the latency toxics, the proxies still forwarding every byte. Connections already open
    see the change at their next chunk (the proxy looks at its toxics before each step)."""
    for proxy in _toxiproxy_client(wan.api).proxies().values():
        for stream in ("upstream", "downstream"):
            name = f"wan_{stream}"
            if name in proxy.toxics():
                proxy.destroy_toxic(name)
            if rtt_ms > 0:
                proxy.add_toxic(
                    type="latency",
                    name=name,
                    stream=stream,
                    attributes={"latency": rtt_ms // 2, "jitter": jitter_ms // 2},
                )


def link_table(
    name: str,
    source_bootstrap: str,
    target_bootstrap: str,
    topics: list[str],
    extra: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One ``[[link]]`` table (as JSON) copying exactly ``topics``, with no consumer group selected,
    plus ``extra`` link settings (e.g. ``fetch_max_bytes``; the mirror checks them).

    The sync pass runs every second, so that a new topic's mirror is created within about a second.
    """
    return (extra or {}) | {
        "name": name,
        "source": {"name": "east", "bootstrap": source_bootstrap},
        "target": {"name": "west", "bootstrap": target_bootstrap},
        "topics": {"include": [_literal(t) for t in topics]},
        "groups": {"include": []},  # group offset sync has nothing to do in this benchmark
        "sync_interval_s": 1,
    }


def _literal(name: str) -> str:
    return "".join("\\" + c if c in ".^$*+?{}[]\\|()" else c for c in name)


class MirrorProcess:
    """A running ``bench._mirror_runner``: pause, resume, and its latest status."""

    def __init__(self, child: Child, status_file: Path) -> None:
        self.child = child
        self.status_file = status_file

    @property
    def pid(self) -> int:
        return self.child.pid

    def pause(self) -> None:
        self.child.signal(signal.SIGUSR1)

    def resume(self) -> float:
        """Resume copying; returns ``time.monotonic()`` just before the signal was sent."""
        sent = time.monotonic()
        self.child.signal(signal.SIGUSR2)
        return sent

    def status(self) -> dict[str, Any]:
        """The last status written; raises ``ChildExited`` if the process has exited, ``BenchError``
        if its status file cannot be read."""
        if self.child.poll() is not None:
            raise ChildExited(self.child, f"its status in {self.status_file}")
        try:
            data: dict[str, Any] = json.loads(self.status_file.read_text())
        except (OSError, ValueError) as exc:
            raise child_error(self.child, f"has no readable status file {self.status_file}: {exc}") from exc
        return data

    def wait_for(self, what: str, check: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        """Poll the status until ``check(status)``; returns it. Raises ``ChildExited`` if the process
        exits first, ``BenchError`` at the deadline, naming ``what`` and the link's last sync error."""
        last: dict[str, Any] = {}

        def reached() -> dict[str, Any] | None:
            nonlocal last
            last = self.status()
            return last if check(last) else None

        try:
            return wait_until(reached, Deadline(timeout, what), watch=[self.child], interval=POLL_S)
        except NotReady:
            link = last.get("link", {})
            raise BenchError(
                f"mirror: not {what} within {timeout} s (link state {link.get('state')!r}, last sync error "
                f"{link.get('last_sync_error')!r}, topics {json.dumps(link.get('topics', {}))[:2000]})"
            ) from None


def partitions_copying(topic: str, partitions: int) -> Callable[[dict[str, Any]], bool]:
    """A status check: every partition of ``topic`` has a copier that knows where the mirror ends."""

    def check(status: dict[str, Any]) -> bool:
        parts = status["link"].get("topics", {}).get(topic, {}).get("partitions", [])
        return len(parts) == partitions and all(p["state"] == "copying" and p["mirrored_offset"] >= 0 for p in parts)

    return check


def mirror_topic_created(topic: str, partitions: int) -> Callable[[dict[str, Any]], bool]:
    """A status check: the link has made ``topic``'s mirror with ``partitions`` partitions on the target."""

    def check(status: dict[str, Any]) -> bool:
        found = status["link"].get("topics", {}).get(topic)
        return found is not None and found["target_partitions"] == partitions and found["problem"] is None

    return check


@contextmanager
def mirror_process(
    workdir: Path, link: dict[str, Any], routes: dict[str, str], *, start_paused: bool, timeout: float
) -> Iterator[MirrorProcess]:
    """Start ``bench._mirror_runner`` for ``link``; yields once its first sync pass is done; always stops it.

    Raises ``ChildExited`` or ``NotReady`` if it exits or is not ready within ``timeout``.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    status_file, ready_file = workdir / "mirror.status.json", workdir / "mirror.ready.json"
    config = {
        "link": link,
        "routes": routes,
        "status_file": str(status_file),
        "status_interval_s": 0.5,
        "ready_file": str(ready_file),
        "start_paused": start_paused,
    }
    (workdir / "mirror.config.json").write_text(json.dumps(config, indent=2))
    argv = [sys.executable, "-m", "bench._mirror_runner", str(workdir / "mirror.config.json")]
    child, _ = spawn_ready(argv, workdir / "mirror.log", ready_file, timeout, name="mirror", cwd=REPO_ROOT)
    try:
        yield MirrorProcess(child, status_file)
    finally:
        stop(child)
