"""Ports a process must know before the server that binds them starts (a proxy forwarding to a
node, a ZooKeeper that restarts on its port), chosen where no other process can take them by
chance: below the kernel's ephemeral range.

Binding port 0 and closing the socket gives a port that was free a moment ago, but the kernel
hands the same range to every connect() and to every other process binding port 0, so on a busy
machine (other tests, Spark, clients) another socket may hold it by the time the server binds
it, or restarts on it after a kill. A port below ``ip_local_port_range`` is never handed out
that way; it can only be taken by another process that binds it by number.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20000  # below: ports services are configured on by number
ATTEMPTS = 200


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for port-0 binds and outgoing connections ((32768, 60999) if unknown)."""
    try:
        low, high = (int(part) for part in _RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def reserve_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now, below the ephemeral range, so that
    only a process binding it by number can take it before the caller's server binds it. Falls
    back to the kernel's choice (port 0) when no such port is free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low = LOWEST
    high = ephemeral_range()[0] - 1
    rng = random.SystemRandom()
    for _ in range(ATTEMPTS if high > low else 0):
        port = rng.randint(low, high)
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
