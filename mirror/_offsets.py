"""The mirror's two kinds of offset: a record's place on the source site and on the target site.

Both are ``storage.records.Offset``s, so either may be passed to ``node.client``, but mypy
keeps them apart inside mirror/: a source offset given where a target offset belongs is an
error. In offset-preserving mode the two are the same number by construction (the target
holds the same batches at the same offsets); that identity is stated where it is used, with
:func:`target_of` and :func:`source_of`, and nowhere else. In MM2 mode the target assigns
its own offsets and only an offset sync relates the two (MM2 calls them upstream and
downstream).
"""

from __future__ import annotations

from typing import NewType

from storage.records import NO_OFFSET, Offset

#: An offset in the source site's partition (MM2's "upstream").
SourceOffset = NewType("SourceOffset", Offset)
#: An offset in the target site's partition (MM2's "downstream").
TargetOffset = NewType("TargetOffset", Offset)

#: Not known yet (Kafka's -1).
NO_SOURCE_OFFSET = SourceOffset(NO_OFFSET)
NO_TARGET_OFFSET = TargetOffset(NO_OFFSET)


def source_offset(value: int) -> SourceOffset:
    """A source offset computed from others (``sync.upstream + 1``); arithmetic gives plain ints."""
    return SourceOffset(Offset(value))


def target_offset(value: int) -> TargetOffset:
    """A target offset computed from others (``base + records - 1``)."""
    return TargetOffset(Offset(value))


def target_of(offset: SourceOffset) -> TargetOffset:
    """Offset-preserving mode only: where the source record at ``offset`` is on the target."""
    return TargetOffset(offset)


def source_of(offset: TargetOffset) -> SourceOffset:
    """Offset-preserving mode only: the source record the target record at ``offset`` copies."""
    return SourceOffset(offset)
