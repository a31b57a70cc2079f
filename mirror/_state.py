"""``<state-dir>/state.json``: what operators changed through a mirror process's admin API.

Version 2, written by this mirror::

    {"version": 2,
     "member_id": "host-1a2b3c",
     "links": {
       "east-to-west": {"paused": true,
                        "failed_over": {"fence": "<strait.fenced text>", "auto_fence": true,
                                        "at_ms": 1761200000000,
                                        "cut": [{"topic": "orders", "partition": 0, "mirrored_offset": 1200,
                                                 "source_high_watermark": 1250, "source_seen_ms": 1761199999000}]}},
       "old-link": {"deleted": true}},
     "runtime_links": {"added-at-runtime": {<the link's [[link]] table as JSON>}},
     "updated_ms": 1761200000000}

- ``links``: per link, only what differs from a fresh start. ``paused`` and ``deleted`` as
  before; ``failed_over`` while the link is failed over (``mirror._failover.FailoverRecord``;
  ``cut`` once measured).
- ``runtime_links``: links added with ``PUT /v1/links/{name}``, run again at every start, in
  the normalized form of ``LinkConfig.to_dict`` (checked again when read, like a link file).

Version 1, written by earlier mirrors (``links`` entries ``{"paused": true}`` or
``{"deleted": true}``, no ``runtime_links``), is read as it is; the next save writes version 2.
Every problem is a MirrorError naming the file and the key.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from node.proc import atomic_write

from ._config import ConfigError, LinkConfig, MirrorError, parse_link
from ._failover import FailoverRecord
from ._members import check_member_id

STATE_VERSION = 2
READABLE_VERSIONS = (1, 2)
_LINK_STATE_KEYS = ("paused", "deleted", "failed_over")


@dataclass(frozen=True)
class LinkState:
    """One link's saved state; the default is a link as the link file starts it."""

    paused: bool = False
    deleted: bool = False
    failed_over: FailoverRecord | None = None

    @property
    def empty(self) -> bool:
        return self == LinkState()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.paused:
            out["paused"] = True
        if self.deleted:
            out["deleted"] = True
        if self.failed_over is not None:
            out["failed_over"] = self.failed_over.to_json()
        return out


@dataclass
class MirrorState:
    member_id: str | None = None
    links: dict[str, LinkState] = field(default_factory=dict)
    runtime_links: dict[str, LinkConfig] = field(default_factory=dict)

    def link(self, name: str) -> LinkState:
        return self.links.get(name, LinkState())

    def changed(self, name: str, **changes: Any) -> MirrorState:
        """A copy with link ``name``'s state changed (``LinkState`` fields); an entry left at the
        defaults is dropped."""
        entry = replace(self.link(name), **changes)
        links = {n: s for n, s in self.links.items() if n != name}
        if not entry.empty:
            links[name] = entry
        return MirrorState(self.member_id, links, dict(self.runtime_links))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "member_id": self.member_id,
            "links": {name: entry.to_json() for name, entry in sorted(self.links.items()) if not entry.empty},
            "runtime_links": {name: config.to_dict() for name, config in sorted(self.runtime_links.items())},
            "updated_ms": int(time.time() * 1000),
        }


def load_state(path: Path) -> MirrorState:
    """The state saved in ``path`` (an empty one when there is no file). Raises MirrorError."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return MirrorState()
    except (OSError, ValueError) as exc:
        raise MirrorError(f"{path}: cannot read the mirror's state: {exc}") from None
    links = data.get("links") if isinstance(data, dict) else None
    version = data.get("version") if isinstance(data, dict) else None
    if not isinstance(links, dict) or version not in READABLE_VERSIONS or isinstance(version, bool):
        raise MirrorError(f"{path}: not a version {' or '.join(map(str, READABLE_VERSIONS))} mirror state file")
    state = MirrorState()
    for name, entry in links.items():
        reader = _link_v1 if version == 1 else _link_v2
        parsed = reader(entry, f"{path}: links.{name}")
        if not parsed.empty:
            state.links[str(name)] = parsed
    member_id = data.get("member_id")
    if isinstance(member_id, str):
        state.member_id = check_member_id(member_id)
    if version >= 2:
        state.runtime_links = _runtime_links(data.get("runtime_links", {}), path)
    return state


def _link_v1(entry: object, where: str) -> LinkState:
    if not isinstance(entry, dict) or not all(isinstance(v, bool) for v in entry.values()):
        raise MirrorError(f"{where}: expected {{'paused': bool}} or {{'deleted': bool}}")
    return LinkState(paused=bool(entry.get("paused")), deleted=bool(entry.get("deleted")))


def _link_v2(entry: object, where: str) -> LinkState:
    if not isinstance(entry, dict):
        raise MirrorError(f"{where}: expected an object with {', '.join(_LINK_STATE_KEYS)}, not {entry!r}")
    for key, value in entry.items():
        if key not in _LINK_STATE_KEYS:
            raise MirrorError(f"{where}: unknown key {key!r} (known: {', '.join(_LINK_STATE_KEYS)})")
        if key != "failed_over" and not isinstance(value, bool):
            raise MirrorError(f"{where}.{key}: expected true or false, not {value!r}")
    raw = entry.get("failed_over")
    failed_over = None if raw is None else FailoverRecord.from_json(raw, f"{where}.failed_over")
    return LinkState(bool(entry.get("paused")), bool(entry.get("deleted")), failed_over)


def _runtime_links(raw: object, path: Path) -> dict[str, LinkConfig]:
    if not isinstance(raw, dict):
        raise MirrorError(f"{path}: runtime_links: expected an object of link definitions, not {raw!r}")
    out: dict[str, LinkConfig] = {}
    for name, table in raw.items():
        try:
            config = parse_link(table, origin=f"{path}: runtime_links.{name}")
        except ConfigError as exc:
            raise MirrorError(f"{exc} (fix or remove the entry, or add the link again through the admin API)") from None
        if config.name != name:
            raise MirrorError(f"{path}: runtime_links.{name}: the definition names link {config.name!r}")
        out[name] = config
    return out


def save_state(path: Path, state: MirrorState) -> None:
    """Write ``state`` atomically (a crash leaves the old or the new file). Raises MirrorError."""
    try:
        atomic_write(path, json.dumps(state.to_json(), indent=2) + "\n")
    except OSError as exc:
        raise MirrorError(f"cannot save the mirror's state to {path}: {exc.strerror or exc}") from None
