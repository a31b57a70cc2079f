"""The mirror benchmark's mirror process: one ``mirror.LinkRunner`` under trio, with its status in a file.

Run by ``bench.mirror_bench`` (never by hand, though it works)::

    python -m bench._mirror_runner CONFIG.json

``CONFIG.json`` is an object:

- ``link``: one ``[[link]]`` table as a JSON object (``mirror.parse_links`` checks it);
- ``routes``: ``{"host:port": "host:port"}``, the *WAN route table* (below);
- ``status_file``: where ``status()`` is written, ``status_interval_s`` how often (rewritten
  whole with ``node.proc.atomic_write``, so a reader never sees half a file);
- ``ready_file``: written once the runner's first sync pass is done;
- ``start_paused``: pause the runner before it starts (its sync passes still create the
  mirror topics; no record is copied until SIGUSR2).

Signals: SIGUSR1 pauses the link, SIGUSR2 resumes it (each writes the status at once, with
the time it was handled); SIGTERM or SIGINT stops it, closing every connection.

**WAN routes.** A mirror learns the source's broker addresses from the source's Metadata, and a
strait node advertises a single listener, used by its own site's followers and producers too.
Making the fault proxies the source's advertised listeners would put the WAN latency on the
source site's own replication and producers. Instead this process translates the destination
of every connection it opens (``node.client.NodeConnection.open``, through which the mirror
opens all of them) with ``routes``: each source broker's address maps to its fault proxy, as a
NAT or VPN on a real mirror host would. The status counts the connections opened per route
(``routes.via_proxy`` and ``routes.direct`` by address), so the benchmark can check that no
connection reached the source directly.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from mirror import LinkRunner, parse_links
from node.client import NodeConnection
from node.proc import atomic_write

log = logging.getLogger("strait.bench.mirror_runner")


class Routes:
    """The WAN route table and how many connections took each way."""

    def __init__(self, routes: dict[str, str]) -> None:
        self.routes = dict(routes)
        self.via_proxy: Counter[str] = Counter()  # broker address -> connections opened through its proxy
        self.direct: Counter[str] = Counter()  # address -> connections opened without a route

    def install(self) -> None:
        """Wrap ``NodeConnection.open`` so that every connection of this process follows the table."""
        original = NodeConnection.open.__func__  # type: ignore[attr-defined]  # the classmethod's function
        table = self

        async def open_routed(cls: type[NodeConnection], /, address: str, **kwargs: Any) -> NodeConnection:
            via = table.routes.get(address)
            if via is None:
                table.direct[address] += 1
                return await original(cls, address, **kwargs)  # type: ignore[no-any-return]
            table.via_proxy[address] += 1
            return await original(cls, via, **kwargs)  # type: ignore[no-any-return]

        NodeConnection.open = classmethod(open_routed)  # type: ignore[method-assign,assignment]

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.routes, "via_proxy": dict(self.via_proxy), "direct": dict(self.direct)}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def serve(config: dict[str, Any]) -> None:
    """Run the link until SIGTERM/SIGINT, writing its status every ``status_interval_s``."""
    (link,) = parse_links({"link": [config["link"]]}, origin="mirror runner config")
    routes = Routes(config.get("routes", {}))
    routes.install()
    status_file = Path(config["status_file"])
    interval = float(config.get("status_interval_s", 0.25))
    runner = LinkRunner(link)
    events: list[dict[str, Any]] = []  # pause/resume as handled, with their times
    writing = trio.Lock()  # one write at a time (FIFO), so the statuses land in the order they were taken

    async def write_status() -> None:
        text = json.dumps(
            {
                "time": time.time(),
                "monotonic": time.monotonic(),
                "pid": os.getpid(),
                "cpu_s": _cpu_seconds(),
                "paused": runner.paused,
                "events": events,
                "routes": routes.to_dict(),
                "link": runner.status(),
            }
        )
        async with writing:
            # atomic_write fsyncs: while the sites write, that took up to ~45 ms, which must not stall the link.
            await trio.to_thread.run_sync(atomic_write, status_file, text)

    if config.get("start_paused"):
        runner.pause()
    with trio.open_signal_receiver(signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(runner.run)
            await write_status()
            atomic_write(Path(config["ready_file"]), json.dumps({"pid": os.getpid(), "link": link.name}))

            async def status_loop() -> None:
                while True:
                    await trio.sleep(interval)
                    await write_status()

            nursery.start_soon(status_loop)
            async for signum in signals:
                if signum == signal.SIGUSR1:
                    runner.pause()
                    events.append({"event": "pause", "monotonic": time.monotonic()})
                elif signum == signal.SIGUSR2:
                    runner.resume()
                    events.append({"event": "resume", "monotonic": time.monotonic()})
                else:
                    log.info("%s: stopping", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    break
                await write_status()
    await write_status()  # the final counters, after every copier stopped


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench._mirror_runner CONFIG.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = json.loads(Path(args[0]).read_text())
    trio.run(serve, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
