"""The divergence export: every record the old primary holds beyond the cut, as JSON Lines.

``strait failover reverse LINK --export DIR`` writes, before it truncates anything::

    DIR/<link>/epoch-<N>/divergence.jsonl   one JSON object per record, by topic, partition, offset
    DIR/<link>/epoch-<N>/summary.json       what the file holds, per partition and in total

``<N>`` is the DR epoch the promote started. A record line::

    {"topic": "orders", "partition": 0, "offset": 1250,
     "timestamp": 1761200000123, "timestamp_type": "create",      # or "log_append"
     "key": "order-17", "key_encoding": "utf8",                   # "base64" when not UTF-8; null key: null
     "value": "eyJ0b3RhbCI6IDEyfQ==", "value_encoding": "base64",
     "headers": [{"key": "trace", "value": "abc", "encoding": "utf8"}],
     "producer_id": 4001, "producer_epoch": 0, "sequence": 17,    # -1 when the producer was not idempotent
     "transactional": false, "leader_epoch": 3}

Control records (transaction markers) are not records and are not exported. ``summary.json``::

    {"format": 1, "link": "east-to-west", "epoch": 1, "site": "east", "created_ms": ...,
     "file": "divergence.jsonl", "sha256": "...", "records": 12, "bytes": 4096,
     "partitions": [{"topic": "orders", "partition": 0, "cut": 1250, "end": 1262,
                     "records": 12, "bytes": 4096, "first_offset": 1250, "last_offset": 1261}]}

``bytes`` are the sizes of the batches read (as stored on the old primary). The files are
written to a temporary name, fsynced, renamed and the directory fsynced; once
``summary.json`` exists the export is complete and strait never writes or deletes it again
(a resumed ``reverse`` finds it and goes on).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from node.client import SiteClient
from node.proc import atomic_write
from storage.records import Offset

from . import _scan
from .errors import FailoverError

EXPORT_FORMAT = 1
DATA_FILE = "divergence.jsonl"
SUMMARY_FILE = "summary.json"


def export_dir(root: Path, link: str, epoch: int) -> Path:
    return root / link / f"epoch-{epoch}"


def read_summary(directory: Path) -> dict[str, Any] | None:
    """The summary of a complete export in ``directory``, None when there is none."""
    try:
        summary: dict[str, Any] = json.loads((directory / SUMMARY_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise FailoverError(f"{directory / SUMMARY_FILE}: cannot read the export's summary: {exc}") from None
    return summary


def _text(data: bytes | None) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def record_line(topic: str, partition: int, header: Any, record: Any) -> dict[str, Any]:
    key, key_encoding = _text(record.key)
    value, value_encoding = _text(record.value)
    headers = []
    for name, raw in record.headers:
        text, encoding = _text(raw)
        headers.append({"key": name, "value": text, "encoding": encoding})
    sequence = (
        -1 if header.base_sequence < 0 else (header.base_sequence + record.offset - header.base_offset) & 0x7FFFFFFF
    )
    return {
        "topic": topic,
        "partition": partition,
        "offset": int(record.offset),
        "timestamp": int(record.timestamp),
        "timestamp_type": "log_append" if header.is_log_append_time else "create",
        "key": key,
        "key_encoding": key_encoding,
        "value": value,
        "value_encoding": value_encoding,
        "headers": headers,
        "producer_id": int(header.producer_id),
        "producer_epoch": int(header.producer_epoch),
        "sequence": sequence,
        "transactional": bool(header.is_transactional),
        "leader_epoch": int(header.partition_leader_epoch),
    }


async def export_divergence(
    site: SiteClient,
    ranges: Mapping[tuple[str, int], tuple[int, int]],
    directory: Path,
    *,
    link: str,
    epoch: int,
    clock_ms: Callable[[], int],
    timeout_s: float = 10.0,
) -> dict[str, Any]:
    """Export ``[cut, end)`` of every partition in ``ranges`` from ``site`` into ``directory``.

    Returns the summary (the existing one, untouched, when the export was completed before).

    Raises:
        FailoverError: the directory cannot be written (names it), or the site fails a read.
    """
    done = read_summary(directory)
    if done is not None:
        return done
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FailoverError(f"cannot create the export directory {directory}: {exc.strerror or exc}") from None
    data_path = directory / DATA_FILE
    tmp_path = directory / f".{DATA_FILE}.tmp"
    digest = hashlib.sha256()
    partitions: list[dict[str, Any]] = []
    try:
        with tmp_path.open("wb") as out:
            for (topic, p), (cut, end) in sorted(ranges.items()):
                records = size = 0
                first: int | None = None
                last: int | None = None
                if end > cut:
                    async for header, batch in _scan.batches(
                        site, topic, p, Offset(cut), Offset(end), timeout=timeout_s
                    ):
                        size += header.size
                        for record in _scan.records_in(batch, Offset(cut), Offset(end)):
                            line = json.dumps(record_line(topic, p, header, record), separators=(",", ":")) + "\n"
                            raw = line.encode()
                            out.write(raw)
                            digest.update(raw)
                            records += 1
                            first = record.offset if first is None else first
                            last = record.offset
                partitions.append(
                    {
                        "topic": topic,
                        "partition": p,
                        "cut": cut,
                        "end": end,
                        "records": records,
                        "bytes": size,
                        "first_offset": first,
                        "last_offset": last,
                    }
                )
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp_path, data_path)
        _fsync_dir(directory)
        summary = {
            "format": EXPORT_FORMAT,
            "link": link,
            "epoch": epoch,
            "site": site.name,
            "created_ms": clock_ms(),
            "file": DATA_FILE,
            "sha256": digest.hexdigest(),
            "records": sum(e["records"] for e in partitions),
            "bytes": sum(e["bytes"] for e in partitions),
            "partitions": partitions,
        }
        atomic_write(directory / SUMMARY_FILE, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        raise FailoverError(f"writing the divergence export in {directory}: {exc.strerror or exc}") from None
    return summary


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
