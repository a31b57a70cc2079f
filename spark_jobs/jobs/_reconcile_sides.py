"""One side of a reconcile: a live site (``strait-kafka``) or segment files (``strait-segments``).

``--source``/``--target`` each name a side. A value whose every comma-separated entry is an
existing path is read from disk (log dirs, partition dirs, segment files, a node's data dir);
otherwise every entry must be ``host:port`` and the side is a live site. What a side answers in
the driver: its topics and partitions, and each partition's log range ``[log start, log end)``
(a live site: ListOffsets earliest and latest, the high watermark; files: the log start
checkpoint (or the first segment) and the end of the last whole batch, of the copy that
reaches furthest when several nodes' dirs hold the partition). Its rows are then read exactly
over those ranges, so what is counted is what was compared. A live side is reached as its
``security`` says (TLS, SASL), by the driver and by ``strait-kafka`` alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import trio

from node.client import (
    EARLIEST,
    LATEST,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ClientError,
    ClientSecurity,
    SecurityConfigError,
    SiteClient,
    list_offsets,
)
from storage import StorageError

from ..schema import BATCH_SCHEMA, RECORD_SCHEMA
from ..sources._kafka_options import security_options
from ..sources._segments_files import (
    LOG_START_OFFSET_CHECKPOINT,
    Checkpoints,
    Copy,
    find_copies,
    log_end,
    longest,
)
from ._common import BadInput

TP = tuple[str, int]
T = TypeVar("T")

_HOST_PORT = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$")
CLIENT_ID = "strait-reconcile"


class SiteUnreachable(Exception):
    """A live side did not answer (exit status 3); the message names the option and the servers."""


def is_internal(topic: str) -> bool:
    """Kafka's and MM2's internal topics, never compared unless named: ``__*``, ``.*``,
    ``*.internal``, ``*-internal``."""
    return topic.startswith(("__", ".")) or topic.endswith((".internal", "-internal"))


@dataclass(frozen=True)
class Side:
    """``option`` (``--source``/``--target``) = ``value``: a live site or segment paths."""

    option: str
    value: str
    kind: Literal["kafka", "segments"]
    entries: tuple[str, ...]
    timeout_s: float = 30.0
    security: ClientSecurity = field(default_factory=ClientSecurity)  # a live site's TLS and SASL

    @property
    def describe(self) -> str:
        return f"{self.option} {self.value}"

    # -- what the side holds ------------------------------------------------------------------------

    def partitions(self) -> dict[str, list[int]]:
        """Every topic (internal ones included) with its partitions, sorted."""
        if self.kind == "segments":
            out: dict[str, set[int]] = {}
            for copy in self._copies():
                out.setdefault(copy.tp.topic, set()).add(copy.tp.partition)
            return {t: sorted(ps) for t, ps in sorted(out.items())}

        async def topics(site: SiteClient) -> dict[str, list[int]]:
            metadata = await site.refresh()
            return {name: sorted(meta.partitions) for name, meta in sorted(metadata.items())}

        return self._on_site(topics)

    def ranges(self, topics: Mapping[str, list[int]], *, committed: bool = False) -> dict[TP, tuple[int, int]]:
        """``[log start, log end)`` of each named partition the side holds; ``committed``: a live
        site's end is the last stable offset (what a read_committed read reaches)."""
        if not topics:
            return {}
        if self.kind == "segments":
            checkpoints = Checkpoints()
            out: dict[TP, tuple[int, int]] = {}
            for copy in self._longest():
                tp = (copy.tp.topic, copy.tp.partition)
                if copy.tp.topic not in topics or not copy.segments:
                    continue
                try:
                    start = checkpoints.entry(copy.log_dir, LOG_START_OFFSET_CHECKPOINT, copy.tp) or 0
                except StorageError:
                    start = 0  # a damaged checkpoint hides nothing: from the first segment
                end = log_end(copy)
                out[tp] = (min(max(copy.segments[0].base_offset, start), end), end)
            return out

        async def offsets(site: SiteClient) -> dict[TP, tuple[int, int]]:
            out: dict[TP, tuple[int, int]] = {}
            await site.refresh(list(topics))
            for topic, parts in topics.items():
                starts = await list_offsets(site, topic, parts, EARLIEST)
                isolation = READ_COMMITTED if committed else READ_UNCOMMITTED
                ends = await list_offsets(site, topic, parts, LATEST, isolation_level=isolation)
                out.update({(topic, p): (int(starts[p]), int(ends[p])) for p in parts})
            return out

        return self._on_site(offsets)

    # -- reading --------------------------------------------------------------------------------------

    def read(
        self, spark: Any, ranges: Mapping[TP, tuple[int, int]], *, committed: bool = False, rows: str = "records"
    ) -> Any:
        """The side's rows over ``ranges`` (a DataFrame of RECORD_SCHEMA); ``committed``: a live
        site's aborted transactions left out (read_committed, as MM2 copies); ``rows`` ``batches``:
        one row per batch (BATCH_SCHEMA)."""
        if not ranges:
            return spark.createDataFrame([], BATCH_SCHEMA if rows == "batches" else RECORD_SCHEMA)
        topics = sorted({t for t, _ in ranges})
        starting = _offsets_json({tp: r[0] for tp, r in ranges.items()})
        ending = _offsets_json({tp: r[1] for tp, r in ranges.items()})
        if self.kind == "segments":
            # The copies ranges() measured, by their partition dirs: the source need not look
            # for the longest copy again (a walk over every replica's batch headers).
            chosen = sorted(str(c.dir) for c in self._longest() if (c.tp.topic, c.tp.partition) in ranges)
            reader = spark.read.format("strait-segments").option("path", ",".join(chosen))
            reader = reader.option("topics", ",".join(topics)).option("rows", rows)
        else:
            reader = self._kafka(spark)
            assigned: dict[str, list[int]] = {}
            for t, p in sorted(ranges):
                assigned.setdefault(t, []).append(p)
            reader = reader.option("assign", json.dumps(assigned, separators=(",", ":")))
            reader = reader.option("kafka.request.timeout.ms", str(int(self.timeout_s * 1000)))
            if committed:
                reader = reader.option("kafka.isolation.level", "read_committed")
            if rows != "records":
                reader = reader.option("rows", rows)
        return reader.option("startingOffsets", starting).option("endingOffsets", ending).load()

    def read_topic(self, spark: Any, topic: str) -> Any:
        """A whole (small) topic, such as the offset syncs."""
        if self.kind == "segments":
            reader = spark.read.format("strait-segments").option("path", ",".join(self.entries))
            return reader.option("topics", topic).load()
        return self._kafka(spark).option("subscribe", topic).load()

    def _kafka(self, spark: Any) -> Any:
        """A ``strait-kafka`` reader of the site: its bootstrap servers and security options."""
        return spark.read.format("strait-kafka").options(
            **{"kafka.bootstrap.servers": self.value, **security_options(self.security)}
        )

    # -- helpers --------------------------------------------------------------------------------------

    def _copies(self) -> list[Copy]:
        try:
            return find_copies(self.entries)
        except ValueError as exc:
            raise BadInput(f"{self.option}: {exc}") from None

    def _longest(self) -> list[Copy]:
        """Per partition the copy whose log reaches furthest (ties: the first found), as
        ``strait-segments`` reads by default."""
        return longest(self._copies())

    def _on_site(self, call: Callable[[SiteClient], Awaitable[T]]) -> T:
        try:
            secured = self.security.site_client_kwargs()
        except SecurityConfigError as exc:
            raise BadInput(f"{self.describe}: {exc}") from None

        async def main() -> T:
            site = SiteClient(
                self.option.lstrip("-"), self.value, client_id=CLIENT_ID, timeout=self.timeout_s, **secured
            )
            try:
                with trio.fail_after(3 * self.timeout_s):
                    return await call(site)
            finally:
                await site.aclose()

        try:
            return trio.run(main)
        except (ClientError, trio.TooSlowError, OSError) as exc:
            raise SiteUnreachable(f"{self.describe}: the site did not answer ({exc or 'timed out'})") from None


def parse_side(option: str, value: str, *, timeout_s: float = 30.0, security: ClientSecurity | None = None) -> Side:
    """The side ``value`` names, a live one reached as ``security`` says (default PLAINTEXT);
    BadInput naming ``option`` when it is neither existing paths nor a ``host:port`` list."""
    entries = tuple(e.strip() for e in value.split(",") if e.strip())
    if not entries:
        raise BadInput(f"{option}: empty; give host:port,... of a site or segment paths")
    exists = [Path(e).expanduser().exists() for e in entries]
    if all(exists):
        return Side(option, value, "segments", entries, timeout_s)
    if any(exists):
        missing = next(e for e, ok in zip(entries, exists, strict=True) if not ok)
        raise BadInput(f"{option}: {missing} does not exist (the other entries are paths)")
    bad = next((e for e in entries if not _HOST_PORT.match(e)), None)
    if bad is not None:
        raise BadInput(f"{option}: {bad!r} is neither an existing path nor host:port")
    return Side(option, ",".join(entries), "kafka", entries, timeout_s, security or ClientSecurity())


def _offsets_json(offsets: Mapping[TP, int]) -> str:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(out, separators=(",", ":"))
