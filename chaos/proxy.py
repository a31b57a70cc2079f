"""A toxiproxy-compatible TCP fault proxy on trio: named proxies, toxics per direction, toxiproxy's HTTP API.

Each proxy listens on an address (loopback by default) and forwards every connection to its
upstream, applying *toxics* to the bytes in each direction: ``latency``, ``bandwidth``,
``timeout`` (with 0: a black hole), ``slow_close``, ``reset_peer``, ``limit_data`` and
``slicer``, with toxiproxy's names, attributes and semantics, and ``packet_loss``, which
toxiproxy lacks: lost packets as TCP shows them, retransmission delays (see ``chaos._toxic``,
which also says why it never drops a byte). Toxics take effect on live connections at once.
Any toxiproxy client drives it over HTTP (``chaos._proxy_http`` lists the routes); in-process
there are three ways in:

- :class:`ProxyServer` -- the model, for trio code: ``nursery.start(server.run)``, then its methods;
- :func:`serve_api` -- the HTTP API for a ProxyServer, on hypercorn;
- :func:`run_in_thread` -- both in a background thread, with blocking methods for plain pytest.

From a shell: ``python -m chaos.proxy --api 127.0.0.1:8474 [--config proxies.json]`` serves until
SIGTERM or SIGINT; it prints ``chaos proxy API on http://HOST:PORT`` once it listens (so port 0
works). ``--config`` is a JSON array of proxies (``name``, ``upstream``, ``listen``, ``enabled``)
created at start, like toxiproxy's ``-config``.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from chaos._proxies import DEFAULT_LISTEN, ProxyInfo, ProxyServer
from chaos._proxy_http import MAX_BODY_BYTES, TOXIPROXY_API_VERSION, create_api, serve_api
from chaos._proxy_thread import ProxyHandle, run_in_thread
from chaos._toxic import STREAMS, TOXIC_TYPES, Toxic, make_toxic, toxic_from_json
from chaos.errors import ChaosError

__all__ = [
    "DEFAULT_LISTEN",
    "MAX_BODY_BYTES",
    "STREAMS",
    "TOXIC_TYPES",
    "TOXIPROXY_API_VERSION",
    "ProxyHandle",
    "ProxyInfo",
    "ProxyServer",
    "Toxic",
    "create_api",
    "main",
    "make_toxic",
    "run_in_thread",
    "serve_api",
    "toxic_from_json",
]

_log = logging.getLogger("chaos.proxy")


async def _serve_until_signalled(api: str, proxies: list[object], seed: int | None) -> None:
    server = ProxyServer(seed=seed)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            address = await nursery.start(serve_api, server, api)
            if proxies:
                for info in await server.populate(proxies):  # type: ignore[arg-type]  # checked by populate
                    _log.info("proxy %s: %s -> %s", info.name, info.listen, info.upstream)
            print(f"chaos proxy API on http://{address}", flush=True)
            async for signum in signals:
                _log.info("%s: stopping", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def main(argv: Sequence[str] | None = None) -> int:
    """Run the proxy server with its HTTP API until SIGTERM/SIGINT. Returns the exit code (2: bad arguments)."""
    parser = argparse.ArgumentParser(prog="python -m chaos.proxy", description=__doc__.splitlines()[0])
    parser.add_argument("--api", default="127.0.0.1:8474", help="HTTP API address host:port (default %(default)s)")
    parser.add_argument("--config", type=Path, help="JSON array of proxies to create at start")
    parser.add_argument("--seed", type=int, help="seed for toxicity draws and jitter")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    proxies: list[object] = []
    if args.config is not None:
        try:
            loaded = json.loads(args.config.read_text())
        except (OSError, ValueError) as exc:
            print(f"error: cannot read --config {args.config}: {exc}", file=sys.stderr)
            return 2
        if not isinstance(loaded, list):
            print(f"error: --config {args.config} must hold a JSON array of proxies", file=sys.stderr)
            return 2
        proxies = loaded
    try:
        trio.run(_serve_until_signalled, args.api, proxies, args.seed)
    except BaseExceptionGroup as group:  # trio's nurseries wrap what fails inside them
        ours, rest = group.split(ChaosError)
        if rest is not None or ours is None:
            raise
        for failure in _leaves(ours):
            print(f"error: {failure}", file=sys.stderr)
        return 2
    return 0


def _leaves(group: BaseExceptionGroup[ChaosError]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


if __name__ == "__main__":
    sys.exit(main())
