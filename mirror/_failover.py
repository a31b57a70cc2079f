"""A link's failover: what is kept of it (``FailoverRecord``) and the cut it answers.

``POST /v1/links/{name}/failover`` stops the link for good (until ``restore``): copiers, topic
sync and group sync. The **cut** is, per mirrored partition, where the target's copy ends at
that moment (everything below it is on the target) and the source's end last seen:

``mirrored_offset``
    offset-preserving mode: the target partition's log end offset, read from the target leader
    with a MirrorAppend probe *after* every copier stopped (``PartitionCopier.request_stop``: no
    append is in flight, none will start), so it is exact. MM2 mode: the next source offset the
    copier would have copied (MM2 targets number their records themselves).
``source_high_watermark``, ``source_seen_ms``
    the source's high watermark at the copier's last successful fetch, and when that was (ms;
    null before any). With the source lost, that is the best lower bound of what it held.

The record, cut included once measured, is kept in the mirror's ``state.json`` (``mirror._state``),
so a repeated failover (or one after a restart) answers the same cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

from node.client import ClientError, NodeConnection, SiteClient, mirror_append
from node.protocol import ErrorCode
from storage.records import NO_OFFSET

from ._config import MirrorError
from ._copier import PartitionProgress
from ._fencer import check_fence_text

__all__ = ["CutPartition", "CutUnavailable", "FailoverRecord", "PartitionToCut", "measure_cut"]


class CutUnavailable(MirrorError):
    """The target's end of some mirror partition could not be read: the cut is not known yet."""


@dataclass(frozen=True)
class CutPartition:
    topic: str  # the source topic's name
    partition: int
    mirrored_offset: int
    source_high_watermark: int  # -1: never seen
    source_seen_ms: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "mirrored_offset": self.mirrored_offset,
            "source_high_watermark": self.source_high_watermark,
            "source_seen_ms": self.source_seen_ms,
        }

    @classmethod
    def from_json(cls, raw: object, where: str) -> CutPartition:
        """Raises MirrorError naming ``where`` and the bad field."""
        if not isinstance(raw, dict):
            raise MirrorError(f"{where}: expected an object, not {raw!r}")
        topic, seen = raw.get("topic"), raw.get("source_seen_ms")
        if not isinstance(topic, str) or not topic:
            raise MirrorError(f"{where}.topic: expected a topic name, not {topic!r}")
        numbers = []
        for key, least in (("partition", 0), ("mirrored_offset", -1), ("source_high_watermark", -1)):
            value = raw.get(key)
            if not _is_int(value) or value < least:
                raise MirrorError(f"{where}.{key}: expected an integer of at least {least}, not {value!r}")
            numbers.append(value)
        if seen is not None and not _is_int(seen):
            raise MirrorError(f"{where}.source_seen_ms: expected milliseconds or null, not {seen!r}")
        partition, mirrored, high = numbers
        return cls(topic, partition, mirrored, high, seen)


@dataclass(frozen=True)
class FailoverRecord:
    """A failed-over link as kept in ``state.json``: ``{"fence", "auto_fence", "at_ms"[, "cut"]}``."""

    fence: str
    auto_fence: bool
    at_ms: int
    cut: tuple[CutPartition, ...] | None = None  # None until measured

    def with_cut(self, cut: list[CutPartition]) -> FailoverRecord:
        return replace(self, cut=tuple(cut))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fence": self.fence, "auto_fence": self.auto_fence, "at_ms": self.at_ms}
        if self.cut is not None:
            out["cut"] = [c.to_json() for c in self.cut]
        return out

    @classmethod
    def from_json(cls, raw: object, where: str) -> FailoverRecord:
        """Raises MirrorError naming ``where`` and the bad field."""
        if not isinstance(raw, Mapping):
            raise MirrorError(f"{where}: expected {{'fence', 'auto_fence', 'at_ms'}}, not {raw!r}")
        unknown = sorted(set(raw) - {"fence", "auto_fence", "at_ms", "cut"})
        if unknown:
            raise MirrorError(f"{where}: unknown key {unknown[0]!r}")
        fence = check_fence_text(raw.get("fence"), f"{where}.fence")
        auto_fence, at_ms = raw.get("auto_fence"), raw.get("at_ms")
        if not isinstance(auto_fence, bool):
            raise MirrorError(f"{where}.auto_fence: expected true or false, not {auto_fence!r}")
        if not _is_int(at_ms) or at_ms < 0:
            raise MirrorError(f"{where}.at_ms: expected milliseconds, not {at_ms!r}")
        cut = raw.get("cut")
        if cut is not None and not isinstance(cut, list):
            raise MirrorError(f"{where}.cut: expected a list, not {cut!r}")
        parts = (
            None if cut is None else tuple(CutPartition.from_json(c, f"{where}.cut[{i}]") for i, c in enumerate(cut))
        )
        return cls(fence, auto_fence, at_ms, parts)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class PartitionToCut:
    """One mirrored partition: source topic, its name on the target, and what its copier knew."""

    topic: str
    target_topic: str
    partition: int
    progress: PartitionProgress | None


async def measure_cut(
    link: str, target: SiteClient, partitions: list[PartitionToCut], *, offset_preserving: bool, timeout: float
) -> list[CutPartition]:
    """The cut of ``partitions``; call it only once every copier of the link is idle or stopped.

    Offset-preserving: each mirror partition's end is asked of its target leader (a MirrorAppend
    probe, ``timeout`` seconds each, retried on leadership moves). A mirror the target no longer
    lets this link write (made writable already) answers what its copier last saw instead.
    Raises CutUnavailable naming the partition whose end cannot be read. Cancellable.
    """
    out: list[CutPartition] = []
    for entry in sorted(partitions, key=lambda e: (e.topic, e.partition)):
        progress = entry.progress
        known = progress.mirrored_offset if progress is not None else NO_OFFSET
        if offset_preserving:
            end = await _target_end(link, target, entry, known, timeout)
        else:
            end = known
        out.append(
            CutPartition(
                entry.topic,
                entry.partition,
                end,
                progress.source_high_watermark if progress is not None else NO_OFFSET,
                progress.last_fetch_ms if progress is not None else None,
            )
        )
    return out


async def _target_end(link: str, target: SiteClient, entry: PartitionToCut, known: int, timeout: float) -> int:
    topic, partition = entry.target_topic, entry.partition

    async def probe(conn: NodeConnection) -> tuple[int, int, str | None]:
        result = await mirror_append(conn, link, topic, partition, NO_OFFSET, None, timeout=timeout)
        if result.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE):
            raise ClientError.from_code(result.error_code, f"probing {topic}-{partition}", result.error_message)
        return result.error_code, result.log_end_offset, result.error_message

    what = f"cannot read where the mirror of {topic}-{partition} ends on site {target.name}"
    try:
        code, end, message = await target.on_leader(topic, partition, probe)
    except ClientError as exc:
        raise CutUnavailable(f"{what}: {exc}") from None
    if code in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE) and end >= 0:
        return end
    if code == ErrorCode.POLICY_VIOLATION and known >= 0:
        return known  # no longer this link's mirror: its copier, stopped cleanly, knew the end
    detail = ClientError.from_code(code, "MirrorAppend probe", message) if code else "no end offset in the answer"
    raise CutUnavailable(f"{what}: {detail}")
