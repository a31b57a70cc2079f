"""``strait log ...``: inspect, verify and recover Kafka-format partition logs offline."""

from __future__ import annotations

import base64
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from storage import (
    BatchInfo,
    CorruptBatchError,
    CorruptIndexError,
    FaultPoints,
    LogConfig,
    LogManager,
    RecordFormatError,
    StorageError,
    TopicPartition,
    index_entries,
    list_batches,
    load_log,
    parse_partition_dir,
    read_batch,
    segment_files,
    verify,
    wall_clock_ms,
)
from storage.records import Compression, Record, build_batch

_EXISTING = click.Path(exists=True, path_type=Path)


@click.group("log")
def log_group() -> None:
    """Inspect, verify and recover partition logs (Kafka's on-disk format)."""


@log_group.command("dump")
@click.argument("path", type=_EXISTING)
@click.option("--records", is_flag=True, help="One line per record instead of per batch.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def dump(path: Path, records: bool, as_json: bool) -> None:
    """List the batches (or records) of a .log file, a partition dir or a log dir.

    An .index or .timeindex file lists its entries. Exits 1 at a torn or unreadable batch,
    after printing everything before it.
    """
    try:
        if path.suffix in (".index", ".timeindex"):
            _dump_index(path, as_json)
            return
        for log_path in segment_files(path):
            if not as_json:
                click.echo(f"# {log_path}")
            for info in list_batches(log_path):
                if records:
                    _dump_records(log_path, info, as_json)
                else:
                    _emit(_batch_fields(info), as_json)
    except (StorageError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


def _dump_index(path: Path, as_json: bool) -> None:
    names = ("offset", "position") if path.suffix == ".index" else ("timestamp", "offset")
    for entry in index_entries(path):
        _emit(dict(zip(names, entry, strict=True)), as_json)


def _batch_fields(info: BatchInfo) -> dict[str, Any]:
    h = info.header
    return {
        "position": info.position,
        "base_offset": h.base_offset,
        "last_offset": h.last_offset,
        "count": h.records_count,
        "size": h.size,
        "codec": Compression(h.compression).name.lower() if h.compression <= 4 else f"unknown({h.compression})",
        "crc_ok": info.crc_ok,
        "crc": f"{h.crc:#010x}",
        "base_timestamp": h.base_timestamp,
        "max_timestamp": h.max_timestamp,
        "timestamp_type": "LogAppendTime" if h.is_log_append_time else "CreateTime",
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "partition_leader_epoch": h.partition_leader_epoch,
        "transactional": h.is_transactional,
        "control": h.is_control,
    }


def _dump_records(log_path: Path, info: BatchInfo, as_json: bool) -> None:
    if not info.crc_ok:
        click.echo(f"error: {log_path} at byte {info.position}: batch fails its CRC; records not shown", err=True)
        return
    try:
        for record in read_batch(log_path, info.position, info.header).records():
            _emit(_record_fields(record), as_json)
    except RecordFormatError as exc:
        raise CorruptBatchError(str(exc), position=info.position, path=log_path) from exc


def _record_fields(record: Record) -> dict[str, Any]:
    fields: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp}
    _put_bytes(fields, "key", record.key)
    _put_bytes(fields, "value", record.value)
    headers = []
    for key, value in record.headers:
        entry: dict[str, Any] = {"key": key}
        _put_bytes(entry, "value", value)
        headers.append(entry)
    fields["headers"] = headers
    return fields


def _put_bytes(out: dict[str, Any], name: str, data: bytes | None) -> None:
    """UTF-8 text under ``name`` where valid, else base64 under ``name_b64``; None stays null."""
    if data is None:
        out[name] = None
        return
    try:
        out[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        out[name] = None
        out[f"{name}_b64"] = base64.b64encode(data).decode("ascii")


def _emit(fields: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(fields, separators=(",", ":")))
    else:
        click.echo(" ".join(f"{k}: {_text(v)}" for k, v in fields.items()))


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(" ".join(f"{k}={_text(v)}" for k, v in h.items()) for h in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "null" if value is None else str(value)


@log_group.command("verify")
@click.argument("path", type=_EXISTING)
def verify_cmd(path: Path) -> None:
    """Check every batch (length, magic, CRC-32C, offsets) and every index under PATH.

    PATH is a .log file, a partition dir or a whole log dir. Exits 0 when all is valid,
    else 1 naming the first bad file and byte position. A missing index is not an error.
    """
    try:
        segments, batches = verify(path)
    except CorruptBatchError as exc:
        click.echo(f"INVALID {exc.path} at byte {exc.position}: {exc.reason}", err=True)
        sys.exit(1)
    except CorruptIndexError as exc:
        click.echo(f"INVALID {exc.path}: {exc.reason}", err=True)
        sys.exit(1)
    except (StorageError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"OK {path}: {segments} segments, {batches} batches")


@log_group.command("recover")
@click.argument("path", type=_EXISTING)
def recover_cmd(path: Path) -> None:
    """Run crash recovery offline on a partition dir or every partition of a log dir.

    Every batch is validated, each segment is cut at its first invalid byte (later segments
    are deleted), and indexes are rebuilt. Prints the bytes dropped per partition.
    """
    dirs = (
        [path]
        if parse_partition_dir(path.name) is not None
        else sorted(p for p in path.iterdir() if p.is_dir() and parse_partition_dir(p.name) is not None)
    )
    if not dirs:
        click.echo(f"error: {path} is neither a partition dir (<topic>-<n>) nor a log dir holding some", err=True)
        sys.exit(2)
    total = 0
    for directory in dirs:
        tp = parse_partition_dir(directory.name)
        assert tp is not None
        try:
            partition_log, report = load_log(
                directory,
                TopicPartition(tp.topic, tp.partition),
                LogConfig(),
                clean_shutdown=False,
                faults=FaultPoints(),
                clock=wall_clock_ms,
            )
            partition_log.close()
        except (StorageError, OSError) as exc:
            click.echo(f"error: {directory}: {exc}", err=True)
            sys.exit(1)
        total += report.bytes_dropped
        detail = f" (first bad batch: {report.first_error})" if report.first_error else ""
        click.echo(
            f"{directory}: dropped {report.bytes_dropped} bytes, {report.segments_deleted} segments deleted, "
            f"log end offset {partition_log.log_end_offset}{detail}"
        )
    click.echo(f"total bytes dropped: {total}")


@log_group.command("demo")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--batches", default=200, show_default=True, help="Batches per partition.")
def demo_cmd(directory: Path, batches: int) -> None:
    """Exercise the storage engine end to end in DIRECTORY (wiped first).

    Two JBOD log dirs, four partitions written in every codec, a clean restart, then a
    crash with a torn tail: recovery drops exactly the torn batch, and verify passes.
    """
    shutil.rmtree(directory, ignore_errors=True)
    dirs = [directory / "d1", directory / "d2"]
    config = LogConfig(segment_bytes=256 * 1024)
    manager = LogManager(dirs, config, broker_id=1)
    manager.startup()
    codecs = list(Compression)
    for p in range(4):
        tp = TopicPartition("demo", p)
        plog = manager.create_log(tp)
        for i in range(batches):
            codec = codecs[i % len(codecs)]
            records = [(wall_clock_ms(), f"key-{i}-{r}".encode(), f"value {i}.{r} ".encode() * 20) for r in range(10)]
            plog.append(build_batch(records, compression=codec))
        plog.high_watermark = plog.log_end_offset
        click.echo(f"{tp}: {plog.log_end_offset} records in {len(plog.segments)} segments under {plog.dir.parent}")
    manager.shutdown()

    manager = LogManager(dirs, config, broker_id=1)
    reports = manager.startup()
    click.echo(f"clean restart: {sum(r.segments_recovered for r in reports)} segments needed recovery")
    victim = manager.get_log(TopicPartition("demo", 0))
    assert victim is not None
    active = victim.active_segment
    end_before = victim.log_end_offset
    manager.checkpoint()  # then "crash": no clean shutdown, and the last write is torn
    with open(active.log_path, "r+b") as f:
        f.truncate(active.size - 100)

    manager = LogManager(dirs, config, broker_id=1)
    for report in manager.startup():
        if report.bytes_dropped:
            click.echo(
                f"after the crash, {report.tp}: recovery dropped {report.bytes_dropped} bytes ({report.first_error})"
            )
    recovered = manager.get_log(TopicPartition("demo", 0))
    assert recovered is not None
    click.echo(f"demo-0 log end offset {end_before} -> {recovered.log_end_offset} (the torn batch is gone)")
    manager.shutdown()
    for d in dirs:
        segments, checked = verify(d)
        click.echo(f"verify {d}: {segments} segments, {checked} batches, all valid")
    click.echo(f"try: strait log dump --records --json {dirs[0]} | head")
