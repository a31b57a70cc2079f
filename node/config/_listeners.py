"""Listeners: ``NAME://host:port`` endpoints (``listeners``, ``advertised.listeners``), the security
protocol of each name (``listener.security.protocol.map``), and host:port.

A listener's name is free (``LOCAL``, ``WAN``); its security protocol comes from
``listener.security.protocol.map``, where a name that is itself a protocol name maps to that
protocol unless the map says otherwise. strait speaks all four: PLAINTEXT, SSL (TLS, ``node.tls``),
SASL_PLAINTEXT and SASL_SSL (``node.sasl``).
:func:`check_listener_keys` holds the rules that span these keys and ``inter.broker.listener.name``;
:func:`parse_host_port` is shared with the other address keys.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from ._errors import ConfigError
from ._keys import Value

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "SECURITY_PROTOCOLS",
    "SUPPORTED_PROTOCOLS",
    "WILDCARD_HOSTS",
    "Listener",
    "check_advertised",
    "check_listener_keys",
    "check_listeners",
    "check_protocol_map",
    "listener_protocol",
    "parse_host_port",
    "parse_listener_list",
    "parse_listeners",
    "parse_protocol_map",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_PROTOCOLS = SECURITY_PROTOCOLS
# Kafka's default listener.security.protocol.map: each protocol name is a listener name for itself.
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
_HOSTNAME = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
_LISTENER_NAME = re.compile(r"[A-Z0-9_]+", re.ASCII)  # what /brokers/ids/N's endpoints can carry


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` endpoint. ``name`` is upper case; ``host`` is kept without IPv6 brackets."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.address}"

    @property
    def address(self) -> str:
        """``host:port``, with an IPv6 host in brackets (what a client's bootstrap list takes)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def is_wildcard(self) -> bool:
        """True when the host means "every interface" (empty, ``0.0.0.0`` or ``::``)."""
        return self.host in WILDCARD_HOSTS


def parse_listeners(value: str, key: str, protocol_map: Mapping[str, str] | None = None) -> tuple[Listener, ...]:
    """Parse a comma list of ``NAME://host:port`` for ``key`` (``listeners`` or ``advertised.listeners``)
    and check that each name has a supported security protocol in ``protocol_map`` (default:
    Kafka's, where only the protocol names are listener names).

    See :func:`parse_listener_list` for the form; raises ConfigError naming the key, the whole
    value and the offending listener, also for a name missing from the map (as Kafka does) and
    for a protocol strait does not serve.
    """
    listeners = parse_listener_list(value, key)
    protocols = protocol_map if protocol_map is not None else parse_protocol_map(DEFAULT_PROTOCOL_MAP)
    for listener in listeners:
        try:
            listener_protocol(listener, protocols)
        except ValueError as exc:
            raise ConfigError(str(exc), key=key, value=value) from None
    return listeners


def parse_listener_list(value: str, key: str) -> tuple[Listener, ...]:
    """The listeners of ``value`` for ``key``, checked for form only (no security protocols).

    Names are case-insensitive (kept upper case), letters, digits and ``_``, each used once.
    ``listeners`` may use port 0 (bind any free port) and an unspecified host (empty,
    ``0.0.0.0``, ``::``), and no two of its listeners may share a port other than 0;
    ``advertised.listeners`` may not use port 0 or an unspecified host, since clients connect
    to what it says, and may repeat a port (one listener may advertise another's address).

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
        if not _LISTENER_NAME.fullmatch(name):
            raise ValueError(f"listener {item!r}: a listener name is letters, digits and '_' only")
        host, port = parse_host_port(address, what=f"listener {item!r}")
        if advertised and host in WILDCARD_HOSTS:
            raise ValueError(f"listener {item!r}: clients cannot connect to {host or 'an empty host'}; name a host")
        if advertised and port == 0:
            raise ValueError(f"listener {item!r}: port 0 cannot be advertised; give the real port")
        if any(existing.name == name for existing in listeners):
            raise ValueError(f"listener {item!r}: listener name {name} is used twice")
        same_port = next((x for x in listeners if x.port == port != 0), None)
        if not advertised and same_port is not None:
            raise ValueError(
                f"listener {item!r}: port {port} is already the port of listener {same_port}; "
                "each listener needs a port of its own (or 0)"
            )
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ValueError("no listener given")
    return tuple(listeners)


def parse_protocol_map(value: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` (``listener.security.protocol.map``) as {NAME: PROTOCOL}, over Kafka's
    default (each protocol name maps to itself unless ``value`` maps it).

    Names and protocols are case-insensitive (kept upper case). Raises ValueError(reason) for an
    item that is not NAME:PROTOCOL, an unknown protocol, or a name mapped twice.
    """
    given: dict[str, str] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, protocol = (part.strip().upper() for part in item.partition(":"))
        if not sep or not name or not protocol:
            raise ValueError(f"{item!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        if not _LISTENER_NAME.fullmatch(name):
            raise ValueError(f"{item!r}: a listener name is letters, digits and '_' only")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"{item!r}: {protocol} is not a security protocol ({', '.join(SECURITY_PROTOCOLS)})")
        if name in given:
            raise ValueError(f"{item!r}: listener name {name} is mapped twice")
        given[name] = protocol
    return {p: p for p in SECURITY_PROTOCOLS} | given


def listener_protocol(listener: Listener, protocol_map: Mapping[str, str]) -> str:
    """The security protocol of ``listener`` under ``protocol_map`` (from :func:`parse_protocol_map`).

    Raises ValueError(reason naming the listener) when its name is not in the map, or when its
    protocol is one strait does not support yet.
    """
    protocol = protocol_map.get(listener.name)
    if protocol is None:
        raise ValueError(
            f"listener '{listener}': listener name {listener.name} has no security protocol in "
            f"listener.security.protocol.map; add {listener.name}:PLAINTEXT to it"
        )
    if protocol not in SUPPORTED_PROTOCOLS:
        raise ValueError(
            f"listener '{listener}': security protocol {protocol} is not supported yet (only PLAINTEXT and SSL)"
        )
    return protocol


def check_listener_keys(values: Mapping[str, Value], explicit: Collection[str], source: str) -> None:
    """The rules that span the listener keys, on the parsed ``values`` of a server.properties
    (``explicit``: the keys set in it): every listener has a supported security protocol;
    advertised.listeners and inter.broker.listener.name name listeners.

    Raises ConfigError naming ``source``, the key at fault and its value.
    """
    listeners_text, map_text = str(values["listeners"]), str(values["listener.security.protocol.map"])
    listeners = parse_listener_list(listeners_text, "listeners")
    protocols = parse_protocol_map(map_text)
    for listener in listeners:
        try:
            listener_protocol(listener, protocols)
        except ValueError as exc:
            # The map is at fault only when the file's map names the listener (to a protocol strait lacks).
            mapped = "listener.security.protocol.map" in explicit and listener.name in _mapped_names(map_text)
            at_fault = "listener.security.protocol.map" if mapped else "listeners"
            value = map_text if at_fault == "listener.security.protocol.map" else listeners_text
            raise ConfigError(str(exc), key=at_fault, value=value, source=source) from None
    names = [listener.name for listener in listeners]
    if "advertised.listeners" in values:
        advertised = str(values["advertised.listeners"])
        for adv in parse_listener_list(advertised, "advertised.listeners"):
            if adv.name not in names:
                raise ConfigError(
                    f"listener name {adv.name} is not in listeners ({listeners_text})",
                    key="advertised.listeners",
                    value=advertised,
                    source=source,
                )
    if "inter.broker.listener.name" in values:
        inter = str(values["inter.broker.listener.name"])
        if inter.upper() not in names:
            raise ConfigError(
                f"listener name {inter.upper()} is not in listeners ({listeners_text})",
                key="inter.broker.listener.name",
                value=inter,
                source=source,
            )


def _mapped_names(map_text: str) -> set[str]:
    """The listener names ``listener.security.protocol.map`` lists itself (not Kafka's defaults)."""
    return {item.partition(":")[0].strip().upper() for item in map_text.split(",") if item.strip()}


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
    """The ``listeners`` key's validator (form only; the protocols are checked with the map); ValueError(reason)."""
    _parse_listeners(str(value), advertised=False)


def check_advertised(value: Value) -> None:
    """The ``advertised.listeners`` key's validator (no wildcard host, no port 0); ValueError(reason)."""
    _parse_listeners(str(value), advertised=True)


def check_protocol_map(value: Value) -> None:
    """The ``listener.security.protocol.map`` key's validator; ValueError(reason)."""
    parse_protocol_map(str(value))
