"""Divergence exports for replay's tests, with failover's own line format (``failover.export.record_line``).

``write_export`` builds record batches with ``storage.records`` and turns each record into its
export line exactly as ``strait failover reverse`` does; the summary is written as
``failover.export`` writes it (the file's SHA-256, per partition cut, end and counts).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from failover.export import DATA_FILE, EXPORT_FORMAT, SUMMARY_FILE, export_dir, record_line
from storage.records import RecordBatch, build_batch

#: (timestamp ms, key, value[, headers]) as ``storage.records.build_batch`` takes them.
Rec = tuple[Any, ...]

T0 = 1_761_200_000_000


def export_lines(topic: str, partition: int, cut: int, records: Sequence[Rec], **batch: Any) -> list[dict[str, Any]]:
    """The export lines of ``records`` stored in one batch at offsets ``cut``, ``cut + 1``, ..."""
    decoded = RecordBatch(bytearray(build_batch(records, base_offset=cut, **batch)))
    return [record_line(topic, partition, decoded.header, r) for r in decoded.records()]


def write_export(
    root: Path,
    partitions: dict[tuple[str, int], tuple[int, Sequence[Rec]]],
    *,
    link: str = "east-to-west",
    epoch: int = 1,
    edit: Callable[[list[dict[str, Any]]], list[str]] | None = None,
) -> Path:
    """``root/<link>/epoch-<N>/`` holding ``partitions`` ((topic, p) -> (cut, records)).

    ``edit`` turns the lines into the text lines written (to plant damage); the summary's
    SHA-256 and count then describe the file as written, so only the content is wrong.
    """
    directory = export_dir(root, link, epoch)
    directory.mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, Any]] = []
    entries = []
    for (topic, p), (cut, records) in sorted(partitions.items()):
        own = export_lines(topic, p, cut, records) if records else []
        lines += own
        entries.append(
            {
                "topic": topic,
                "partition": p,
                "cut": cut,
                "end": cut + len(own),
                "records": len(own),
                "bytes": 0,
                "first_offset": own[0]["offset"] if own else None,
                "last_offset": own[-1]["offset"] if own else None,
            }
        )
    texts = edit(lines) if edit is not None else [json.dumps(line, separators=(",", ":")) for line in lines]
    raw = "".join(t + "\n" for t in texts).encode()
    (directory / DATA_FILE).write_bytes(raw)
    summary = {
        "format": EXPORT_FORMAT,
        "link": link,
        "epoch": epoch,
        "site": "east",
        "created_ms": T0,
        "file": DATA_FILE,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "records": len(texts),
        "bytes": 0,
        "partitions": entries,
    }
    (directory / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return directory
