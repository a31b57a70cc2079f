"""Listeners: ``NAME://host:port`` endpoints (``listeners``, ``advertised.listeners``) and host:port.

strait speaks only PLAINTEXT, so a listener's name is its security protocol; the parser
refuses the others by name. :func:`parse_host_port` is shared with the other address keys.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from ._errors import ConfigError
from ._keys import Value

__all__ = [
    "SECURITY_PROTOCOLS",
    "WILDCARD_HOSTS",
    "Listener",
    "check_advertised",
    "check_listeners",
    "parse_host_port",
    "parse_listeners",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
_HOSTNAME = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` endpoint. ``host`` is kept without IPv6 brackets."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"

    @property
    def is_wildcard(self) -> bool:
        """True when the host means "every interface" (empty, ``0.0.0.0`` or ``::``)."""
        return self.host in WILDCARD_HOSTS


def parse_listeners(value: str, key: str) -> tuple[Listener, ...]:
    """Parse a comma list of ``NAME://host:port`` for ``key`` (``listeners`` or ``advertised.listeners``).

    Only the PLAINTEXT security protocol is supported, so the listener name must be PLAINTEXT
    (strait has no ``listener.security.protocol.map``). ``listeners`` may use port 0 (bind any
    free port) and an unspecified host (empty, ``0.0.0.0``, ``::``); ``advertised.listeners`` may
    not, since clients connect to what it says. Names must be unique.

    Raises ConfigError naming the key, the whole value and the offending listener.
    """
    try:
        return _parse_listeners(value, advertised=key == "advertised.listeners")
    except ValueError as exc:
        raise ConfigError(str(exc), key=key, value=value) from None


def _parse_listeners(value: str, *, advertised: bool) -> tuple[Listener, ...]:
    listeners: list[Listener] = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        scheme, sep, address = item.partition("://")
        if not sep:
            raise ValueError(f"listener {item!r} is not NAME://host:port")
        name = scheme.strip().upper()
        if name in SECURITY_PROTOCOLS[1:]:
            raise ValueError(f"listener {item!r}: security protocol {name} is not supported yet (only PLAINTEXT)")
        if name != "PLAINTEXT":
            raise ValueError(
                f"listener {item!r}: listener name {name!r} would need listener.security.protocol.map, "
                "which strait does not support; name it PLAINTEXT"
            )
        host, port = parse_host_port(address, what=f"listener {item!r}")
        if advertised and host in WILDCARD_HOSTS:
            raise ValueError(f"listener {item!r}: clients cannot connect to {host or 'an empty host'}; name a host")
        if advertised and port == 0:
            raise ValueError(f"listener {item!r}: port 0 cannot be advertised; give the real port")
        if any(existing.name == name for existing in listeners):
            raise ValueError(f"listener {item!r}: listener name {name} is used twice")
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ValueError("no listener given")
    return tuple(listeners)


def parse_host_port(address: str, *, what: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host without brackets, port); ValueError naming ``what``.

    Also checks the other host:port values of server.properties (``zookeeper.connect``,
    ``strait.admin.listener``).
    """
    match = re.fullmatch(r"\[([^\]]*)\]:([^:]*)|([^:\[\]]*):([^:]*)", address.strip())
    if match is None:
        raise ValueError(f"{what}: {address!r} is not host:port (write IPv6 hosts as [addr]:port)")
    bracketed = match.group(1) is not None
    host = match.group(1) if bracketed else match.group(3)
    port_text = match.group(2) if bracketed else match.group(4)
    if not re.fullmatch(r"[0-9]{1,5}", port_text, re.ASCII) or int(port_text) > 65535:
        raise ValueError(f"{what}: port {port_text!r} is not a number from 0 to 65535")
    if bracketed:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{what}: {host!r} is not an IPv6 address") from None
    elif host and (not _HOSTNAME.fullmatch(host) or _looks_like_bad_ipv4(host)):
        raise ValueError(f"{what}: {host!r} is not a host name or IPv4 address")
    return host, int(port_text)


def _looks_like_bad_ipv4(host: str) -> bool:
    if not re.fullmatch(r"[0-9.]+", host):
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return True
    return False


def check_listeners(value: Value) -> None:
    """The ``listeners`` key's validator; ValueError(reason)."""
    _parse_listeners(str(value), advertised=False)


def check_advertised(value: Value) -> None:
    """The ``advertised.listeners`` key's validator (no wildcard host, no port 0); ValueError(reason)."""
    _parse_listeners(str(value), advertised=True)
