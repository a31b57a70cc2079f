"""Ports a process must know before the server that binds them starts (a proxy forwarding to a
node, a ZooKeeper that restarts on its port), chosen where no other process can take them by
chance: below the kernel's ephemeral range.

Binding port 0 and closing the socket gives a port that was free a moment ago, but the kernel
hands the same range to every connect() and to every other process binding port 0, so on a busy
machine (other tests, Spark, clients) another socket may hold it by the time the server binds
it, or restarts on it after a kill. A port below ``ip_local_port_range`` is never handed out
that way; it can only be taken by another process that binds it by number.

Nor is a port handed out twice: a server may not have bound the first one yet (a node given a
LOCAL and a WAN port, both free a moment ago, got the same one once). This process remembers
the ports it handed out, and processes that reserve ports on one machine (two chaos runs side
by side) claim them in a shared directory, ``$TMPDIR/strait-ports/<port>`` holding the pid:
a port a live process claimed is skipped. A claim lapses when its process is gone.
"""

from __future__ import annotations

import collections
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20000  # below: ports services are configured on by number
ATTEMPTS = 200
REMEMBERED = 4096  # ports this process handed out that it will not hand out again
REGISTRY = Path(tempfile.gettempdir()) / "strait-ports"

_lock = threading.Lock()
_handed_out: collections.OrderedDict[int, None] = collections.OrderedDict()


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
    with _lock:
        for _ in range(ATTEMPTS if high > low else 0):
            port = rng.randint(low, high)
            if port in _handed_out or not _bindable(family, host, port) or not _claim(port):
                continue
            _remember(port)
            return port
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            return int(sock.getsockname()[1])


def _bindable(family: socket.AddressFamily, host: str, port: int) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _remember(port: int) -> None:
    _handed_out[port] = None
    while len(_handed_out) > REMEMBERED:
        _handed_out.popitem(last=False)


def _claim(port: int) -> bool:
    """Claim ``port`` for this process in :data:`REGISTRY`; False when a live process holds it.
    Without a usable registry (permissions) every port is claimable: the bind check remains."""
    path = REGISTRY / str(port)
    mine = str(os.getpid())
    try:
        REGISTRY.mkdir(mode=0o755, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                owner = int(path.read_text().strip() or "0")
            except (OSError, ValueError):
                owner = 0
            if owner and str(owner) != mine and _alive(owner):
                return False
            path.write_text(mine)  # a lapsed claim: take it over
            return True
        with os.fdopen(fd, "w") as out:
            out.write(mine)
        return True
    except OSError:
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
