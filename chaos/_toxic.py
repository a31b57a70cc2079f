"""Toxics: the fault types the proxy knows, their attributes, and validation of their descriptions.

The names, attributes and JSON shape are toxiproxy's, so its clients work unchanged::

    {"name": "latency_downstream",      # default "<type>_<stream>"
     "type": "latency",                 # one of TOXIC_TYPES
     "stream": "downstream",            # "upstream" = client -> server, "downstream" = server -> client
     "toxicity": 1.0,                   # probability, drawn once per connection, that the toxic applies to it
     "attributes": {"latency": 100, "jitter": 10}}

Every attribute is a non-negative integer; attributes left out are 0, except ``rto_ms`` of
``packet_loss`` (200, Linux's minimum retransmission timeout). What each type does:

===============  ===================  ===============================================================
type             attributes           effect on the stream it is attached to
===============  ===================  ===============================================================
``latency``      ``latency``,         each chunk of data leaves ``latency`` ms (plus or minus a
                 ``jitter`` (ms)      uniform ``jitter``) after it arrived; byte order is kept
``bandwidth``    ``rate`` (KB/s)      at most ``rate`` * 1000 bytes per second; 0 means no limit
``timeout``      ``timeout`` (ms)     no data passes (it is dropped, as toxiproxy does); after
                                      ``timeout`` ms the connection is closed; 0 holds it open until
                                      the toxic is removed (a black hole)
``slow_close``   ``delay`` (ms)       the end of the stream (FIN) is passed on ``delay`` ms late
``reset_peer``   ``timeout`` (ms)     after ``timeout`` ms the connection is reset: the peer this
                                      stream writes to gets an RST
``limit_data``   ``bytes``            the connection is closed once ``bytes`` bytes have passed
``slicer``       ``average_size``,    each chunk is cut into slices of ``average_size`` plus or minus
                 ``size_variation``   a uniform ``size_variation`` bytes (the last slice of a chunk
                 (bytes), ``delay``   may be shorter), each written on its own, each at least
                 (microseconds)       ``delay`` µs after the one before; every byte passes, in order.
                                      ``average_size`` must be at least 1 and ``size_variation``
                                      smaller than it (toxiproxy's meaning and units)
``packet_loss``  ``probability``      each piece of data written (a chunk, or a slice under a
                 (percent, 0-100),    ``slicer``) is "lost" with ``probability`` percent and
                 ``rto_ms`` (ms)      delivered ``rto_ms`` later, every further loss of the same
                                      piece doubling the wait; every byte passes, in order (below)
===============  ===================  ===============================================================

Several toxics of one type on one stream combine: latencies and packet-loss waits add up, the
smallest bandwidth rate and the smallest drawn slice win, and the longest slicer delay applies.

**Packet loss over a TCP proxy.** Toxiproxy's documented toxics include no packet loss, and
dropping bytes from the middle of a TCP stream would not model loss at all: it would corrupt
the stream, which TCP never lets an application see. What an application sees when packets
are lost is the retransmission: the lost data, and everything behind it (TCP delivers in
order), arrives a retransmission timeout late. ``packet_loss`` models exactly that. For each
piece about to be written it draws, per transmission, whether that transmission is lost (with
``probability`` percent); the n-th consecutive loss adds ``rto_ms`` * 2^(n-1) ms (capped at
120 s, as Linux backs off its RTO) before the piece goes out. When the first transmission
and all ``MAX_RETRANSMISSIONS`` retransmissions (Linux's ``tcp_retries2``) are lost, the piece
waits until the toxic is changed or removed, so ``probability`` 100 holds the stream without
losing a byte (``timeout`` 0, by contrast, drops what it holds). The connection is never
closed by this toxic. Toxicity still picks the connections it applies to, as for every toxic.

A :class:`Toxic` is immutable; an update makes a new one with a new ``serial``, so connections
draw toxicity again and restart its timers, as toxiproxy restarts an updated toxic.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from chaos.errors import InvalidRequestError

__all__ = ["STREAMS", "TOXIC_TYPES", "Toxic", "make_toxic", "toxic_from_json"]

#: Each toxic type with its attribute names, in the order toxiproxy documents them.
TOXIC_TYPES: Mapping[str, tuple[str, ...]] = {
    "latency": ("latency", "jitter"),
    "bandwidth": ("rate",),
    "timeout": ("timeout",),
    "slow_close": ("delay",),
    "reset_peer": ("timeout",),
    "limit_data": ("bytes",),
    "slicer": ("average_size", "size_variation", "delay"),
    "packet_loss": ("probability", "rto_ms"),
}

#: Attribute values used when a description leaves them out (every other attribute defaults to 0).
ATTRIBUTE_DEFAULTS: Mapping[str, Mapping[str, int]] = {"packet_loss": {"rto_ms": 200}}

#: Consecutive losses of one piece a ``packet_loss`` toxic draws before it holds the piece until
#: the toxic changes (Linux gives up on a connection after ``tcp_retries2`` = 15 retransmissions).
MAX_RETRANSMISSIONS = 15
#: The longest single retransmission wait, in ms (Linux's ``TCP_RTO_MAX``).
MAX_RTO_MS = 120_000

#: ``upstream`` carries client -> server bytes, ``downstream`` server -> client bytes.
STREAMS = ("upstream", "downstream")

#: The largest attribute value accepted: the largest integer a JSON double holds exactly.
MAX_ATTRIBUTE = 2**53 - 1

_MAX_NAME_CHARS = 200
_TOXIC_FIELDS = ("name", "type", "stream", "toxicity", "attributes")
_serials = itertools.count(1)


@dataclass(frozen=True, eq=False)
class Toxic:
    """One toxic on one proxy. ``attributes`` holds every attribute of the type (absent ones are 0)."""

    name: str
    type: str
    stream: str
    toxicity: float
    attributes: Mapping[str, int]
    #: Unique per Toxic object: connections key their per-toxic state (toxicity draw, bytes counted) on it.
    serial: int = field(default_factory=lambda: next(_serials))

    def attribute(self, key: str) -> int:
        return self.attributes[key]

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": dict(self.attributes),
        }

    def updated(self, body: object) -> Toxic:
        """A new toxic with ``toxicity`` and/or some ``attributes`` of ``body`` (a JSON object) changed.

        ``name``, ``type`` and ``stream`` may be repeated but not changed. Raises InvalidRequestError
        naming the field and value that are wrong.
        """
        fields = _object(body, "toxic")
        _reject_unknown(fields, _TOXIC_FIELDS, "toxic field")
        for key in ("name", "type", "stream"):
            if key in fields and fields[key] != getattr(self, key):
                raise InvalidRequestError(
                    f"toxic {key} cannot be changed by an update: {self.name!r} has {key} "
                    f"{getattr(self, key)!r}, the update asks for {fields[key]!r}; delete and add it instead"
                )
        toxicity = _toxicity(fields["toxicity"]) if "toxicity" in fields else self.toxicity
        changes = _attributes(self.type, _object(fields.get("attributes", {}), "toxic attributes"))
        attributes = {**self.attributes, **changes}
        _check_together(self.type, attributes)
        return Toxic(self.name, self.type, self.stream, toxicity, attributes)


def make_toxic(
    type: str,
    *,
    name: str | None = None,
    stream: str = "downstream",
    toxicity: float = 1.0,
    attributes: Mapping[str, int] | None = None,
) -> Toxic:
    """A validated toxic. Raises InvalidRequestError naming the bad type, stream, toxicity or attribute."""
    if not isinstance(type, str) or type not in TOXIC_TYPES:
        raise InvalidRequestError(f"invalid toxic type: {type!r}; known types: {', '.join(TOXIC_TYPES)}")
    if stream not in STREAMS:
        raise InvalidRequestError(f"invalid toxic stream: {stream!r}; it must be 'upstream' or 'downstream'")
    name = f"{type}_{stream}" if name is None else name
    if not isinstance(name, str) or not name or len(name) > _MAX_NAME_CHARS or "/" in name:
        raise InvalidRequestError(
            f"invalid toxic name: {name!r}; it must be a non-empty string of at most {_MAX_NAME_CHARS} "
            "characters without '/'"
        )
    given = _attributes(type, {} if attributes is None else attributes)
    defaults = ATTRIBUTE_DEFAULTS.get(type, {})
    complete = {key: given.get(key, defaults.get(key, 0)) for key in TOXIC_TYPES[type]}
    _check_together(type, complete)
    return Toxic(name, type, stream, _toxicity(toxicity), complete)


def toxic_from_json(body: object) -> Toxic:
    """A toxic from toxiproxy's JSON description (``type`` required, the rest defaulted)."""
    fields = _object(body, "toxic")
    _reject_unknown(fields, _TOXIC_FIELDS, "toxic field")
    if "type" not in fields:
        raise InvalidRequestError(f"missing required toxic field: 'type'; known types: {', '.join(TOXIC_TYPES)}")
    name = fields.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidRequestError(f"invalid toxic name: {name!r}; it must be a string")
    attributes = fields.get("attributes", {})
    return make_toxic(
        fields["type"],  # type: ignore[arg-type]  # checked by make_toxic
        name=name or None,
        stream=fields.get("stream", "downstream"),  # type: ignore[arg-type]  # checked by make_toxic
        toxicity=fields.get("toxicity", 1.0),  # type: ignore[arg-type]  # checked by _toxicity
        attributes=_object(attributes, "toxic attributes"),  # type: ignore[arg-type]  # checked by _attributes
    )


# -- validation ---------------------------------------------------------------------------------


def _object(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{what} must be a JSON object, got {type(value).__name__}: {value!r:.200}")
    return value


def _reject_unknown(fields: Mapping[str, object], known: tuple[str, ...], what: str) -> None:
    for key in fields:
        if key not in known:
            raise InvalidRequestError(f"unknown {what}: {key!r}; known: {', '.join(known)}")


def _toxicity(value: object) -> float:
    number = _number(value)
    if number is None or not 0.0 <= number <= 1.0:
        raise InvalidRequestError(f"invalid toxicity: {value!r}; it must be a number from 0.0 to 1.0")
    return number


def _attributes(toxic_type: str, given: Mapping[str, object]) -> dict[str, int]:
    names = TOXIC_TYPES[toxic_type]
    out: dict[str, int] = {}
    for key, value in given.items():
        if key not in names:
            raise InvalidRequestError(
                f"unknown attribute {key!r} for a {toxic_type} toxic; its attributes are: {', '.join(names)}"
            )
        number = _number(value)
        if number is None or number != math.floor(number) or not 0 <= number <= MAX_ATTRIBUTE:
            raise InvalidRequestError(
                f"invalid {toxic_type} attribute {key}: {value!r}; it must be an integer from 0 to {MAX_ATTRIBUTE}"
            )
        out[key] = int(number)
    return out


def _check_together(toxic_type: str, attributes: Mapping[str, int]) -> None:
    """The rules a toxic's complete set of attributes must keep (after defaults, or after an update)."""
    if toxic_type == "slicer":
        average, variation = attributes["average_size"], attributes["size_variation"]
        if average < 1:
            raise InvalidRequestError(
                f"invalid slicer attribute average_size: {average}; it must be at least 1 byte "
                "(the size of an average slice)"
            )
        if variation >= average:
            raise InvalidRequestError(
                f"invalid slicer attribute size_variation: {variation}; it must be smaller than "
                f"average_size ({average}), so that every slice holds at least one byte"
            )
    elif toxic_type == "packet_loss":
        if attributes["probability"] > 100:
            raise InvalidRequestError(
                f"invalid packet_loss attribute probability: {attributes['probability']}; "
                "it is a percentage from 0 to 100"
            )
        if attributes["rto_ms"] < 1:
            raise InvalidRequestError(
                f"invalid packet_loss attribute rto_ms: {attributes['rto_ms']}; the retransmission "
                "timeout must be at least 1 ms (Linux's smallest is 200)"
            )


def _number(value: object) -> float | None:
    """``value`` as a finite float if it is a JSON number (not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
