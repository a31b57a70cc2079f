"""The ``strait-segments`` options, parsed and checked once, when the DataFrame is defined.

Every bad value is a ValueError naming the option and the value (Spark shows it as the
cause of its AnalysisException). What needs the files (does a named topic exist?) is checked
later, when the read is planned (:mod:`._segments_plan`). The options themselves are
documented in :mod:`spark_jobs.sources.segments`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from storage import parse_partition_dir

EARLIEST = -2
LATEST = -1
MiB = 1024 * 1024
DEFAULT_MAX_BYTES = 128 * MiB
#: ``rows=batches``: a task keeps one row per batch, whatever the bytes; fewer, larger tasks cost
#: less (each task has a fixed cost in Spark's Python data source machinery).
DEFAULT_MAX_BYTES_BATCHES = 1024 * MiB

Copies = Literal["longest", "all"]

_BYTE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_BYTES = re.compile(r"^(\d+)\s*([kmgt]?)(?:i?b)?$", re.IGNORECASE)
_KNOWN = {
    "path",
    "paths",
    "topics",
    "topicpattern",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "includecontrol",
    "copies",
    "committedonly",
    "maxbytesperpartition",
    "rows",
}


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end each partition: ``default`` for partitions not named in
    ``named``; each value an offset, or EARLIEST (-2) / LATEST (-1)."""

    option: str
    default: int
    named: dict[tuple[str, int], int] = field(default_factory=dict)

    def of(self, topic: str, partition: int) -> int:
        return self.named.get((topic, partition), self.default)


@dataclass(frozen=True, slots=True)
class SegmentOptions:
    paths: tuple[str, ...]
    topics: frozenset[str] | None = None
    topic_pattern: str | None = None
    starting: OffsetSpec = OffsetSpec("startingOffsets", EARLIEST)
    ending: OffsetSpec = OffsetSpec("endingOffsets", LATEST)
    start_ms: int | None = None
    end_ms: int | None = None
    include_control: bool = False
    copies: Copies = "longest"
    committed_only: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    rows: Literal["records", "batches"] = "records"

    def wants_topic(self, topic: str) -> bool:
        """Whether the topic filters keep ``topic``. With neither filter, Kafka's internal
        topics (names starting with ``__``) are left out, as a consumer's subscription does."""
        if self.topics is not None:
            return topic in self.topics
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return not topic.startswith("__")


def parse_options(options: Mapping[str, Any]) -> SegmentOptions:
    """Check every option (names are case-insensitive, as Spark's); raises ValueError naming
    the option and the value at the first bad one."""
    opts = {str(k).lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - _KNOWN)
    if unknown:
        raise ValueError(
            f"strait-segments: unknown option(s) {', '.join(unknown)}; known options: "
            "path, topics, topicPattern, startingOffsets, endingOffsets, startingTimestamp, "
            "endingTimestamp, includeControl, copies, committedOnly, maxBytesPerPartition, rows"
        )
    topics, pattern = _topics(opts)
    starting = _offsets("startingOffsets", opts.get("startingoffsets"), EARLIEST)
    ending = _offsets("endingOffsets", opts.get("endingoffsets"), LATEST)
    for tp, start in starting.named.items():
        end = ending.of(*tp)
        if start >= 0 and end >= 0 and start > end:
            raise ValueError(
                f"startingOffsets {start} is after endingOffsets {end} for {tp[0]}-{tp[1]}: nothing could be read"
            )
    start_ms = _millis("startingTimestamp", opts.get("startingtimestamp"))
    end_ms = _millis("endingTimestamp", opts.get("endingtimestamp"))
    if start_ms is not None and end_ms is not None and end_ms < start_ms:
        raise ValueError(f"endingTimestamp {end_ms} is before startingTimestamp {start_ms}")
    copies = str(opts.get("copies", "longest")).strip().lower()
    if copies not in ("longest", "all"):
        raise ValueError(f"copies={opts['copies']!r}: expected 'longest' or 'all'")
    rows = str(opts.get("rows", "records")).strip().lower()
    if rows not in ("records", "batches"):
        raise ValueError(f"rows={opts['rows']!r}: expected 'records' (one row per record) or 'batches' (one per batch)")
    return SegmentOptions(
        paths=_paths(opts),
        topics=topics,
        topic_pattern=pattern,
        starting=starting,
        ending=ending,
        start_ms=start_ms,
        end_ms=end_ms,
        include_control=_flag("includeControl", opts.get("includecontrol")),
        copies="longest" if copies == "longest" else "all",
        committed_only=_flag("committedOnly", opts.get("committedonly")),
        max_bytes=_bytes(
            "maxBytesPerPartition",
            opts.get("maxbytesperpartition"),
            DEFAULT_MAX_BYTES_BATCHES if rows == "batches" else DEFAULT_MAX_BYTES,
        ),
        rows="batches" if rows == "batches" else "records",
    )


def _paths(opts: dict[str, Any]) -> tuple[str, ...]:
    raw: list[str] = []
    if "path" in opts:
        raw += str(opts["path"]).split(",")
    if "paths" in opts:  # DataFrameReader.load([...]) passes a JSON list
        try:
            listed = json.loads(opts["paths"])
        except (TypeError, ValueError):
            listed = None
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise ValueError(f"paths={opts['paths']!r}: expected a JSON list of paths")
        for p in listed:
            raw += p.split(",")
    paths = tuple(p.strip() for p in raw if p.strip())
    if not paths:
        raise ValueError(
            "path: no path given; pass log dirs, partition dirs, segment files or a node's data dir, "
            "comma-separated, as .load(path) or .option('path', ...)"
        )
    return paths


def _topics(opts: dict[str, Any]) -> tuple[frozenset[str] | None, str | None]:
    topics = pattern = None
    if "topics" in opts:
        names = [t.strip() for t in str(opts["topics"]).split(",") if t.strip()]
        if not names:
            raise ValueError(f"topics={opts['topics']!r}: name at least one topic")
        for name in names:
            if parse_partition_dir(f"{name}-0") is None:
                raise ValueError(f"topics={opts['topics']!r}: {name!r} is not a valid topic name")
        topics = frozenset(names)
    if "topicpattern" in opts:
        pattern = str(opts["topicpattern"])
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"topicPattern={pattern!r} is not a regular expression: {exc}") from None
    if topics is not None and pattern is not None:
        raise ValueError("topics and topicPattern: give one of them, not both")
    return topics, pattern


def _offsets(option: str, value: Any, default: int) -> OffsetSpec:
    """Spark's Kafka source format: ``earliest``, ``latest`` or ``{"topic":{"0":23,"1":-2}}``."""
    forbidden = LATEST if option == "startingOffsets" else EARLIEST
    forbidden_name = "latest (-1)" if forbidden == LATEST else "earliest (-2)"
    if value is None:
        return OffsetSpec(option, default)
    text = str(value).strip()
    if text.lower() in ("earliest", "latest"):
        chosen = EARLIEST if text.lower() == "earliest" else LATEST
        if chosen == forbidden:
            raise ValueError(f"{option}={text!r}: {forbidden_name} is not allowed for {option} in a batch read")
        return OffsetSpec(option, chosen)
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ValueError(
            f'{option}={text!r} is neither \'earliest\', \'latest\' nor JSON like {{"topic":{{"0":23,"1":-2}}}}: {exc}'
        ) from None
    if not isinstance(parsed, dict) or not parsed:
        raise ValueError(f'{option}={text!r}: expected a JSON object {{"topic":{{"partition":offset,...}},...}}')
    named: dict[tuple[str, int], int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict) or not partitions:
            raise ValueError(f'{option}={text!r}: topic {topic!r} must map to {{"partition":offset,...}}')
        for key, offset in partitions.items():
            if not (isinstance(key, str) and key.isdigit()):
                raise ValueError(f"{option}={text!r}: partition {key!r} of topic {topic!r} is not a number")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise ValueError(
                    f"{option}={text!r}: offset {offset!r} for {topic}-{key} must be an offset, "
                    "-2 (earliest) or -1 (latest)"
                )
            if offset == forbidden:
                raise ValueError(
                    f"{option}={text!r}: {forbidden_name} for {topic}-{key} is not allowed for {option} in a batch read"
                )
            named[(topic, int(key))] = offset
    return OffsetSpec(option, default, named)


def _millis(option: str, value: Any) -> int | None:
    if value is None:
        return None
    text = str(value).strip()
    if not re.fullmatch(r"\d+", text):
        raise ValueError(f"{option}={value!r}: expected milliseconds since the epoch (a non-negative integer)")
    return int(text)


def _flag(option: str, value: Any) -> bool:
    if value is None:
        return False
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{option}={value!r}: expected true or false")
    return text == "true"


def _bytes(option: str, value: Any, default: int) -> int:
    if value is None:
        return default
    m = _BYTES.match(str(value).strip())
    if m is None or int(m[1]) == 0:
        raise ValueError(f"{option}={value!r}: expected a positive size in bytes, such as 134217728 or 128m")
    return int(m[1]) * _BYTE_UNITS[m[2].lower()]
