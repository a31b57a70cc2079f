"""Checkpoint files and ``meta.properties``, written atomically.

An offset checkpoint (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``) is Kafka's text format::

    0                      version
    2                      number of entries
    orders 0 1234          topic, partition, offset
    orders 1 877

``meta.properties`` is a Java properties file with ``version=0``, ``broker.id`` and
``cluster.id``. Writes go to a temp file, are fsynced, renamed over the target, and the
directory is fsynced, so a crash leaves either the old file or the new one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ._errors import StorageError
from ._files import TEMP_SUFFIX, TopicPartition
from .records import Offset

_VERSION = 0


def write_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content.

    Without ``sync`` nothing waits for the disk: a process crash still leaves the old or the
    new content (the page cache has them), a power loss may leave the old one (the caller
    fsyncs later with ``fsync_file``, or can rebuild what was lost).
    """
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def fsync_file(path: Path) -> None:
    """fsync ``path`` and its directory (what ``write_atomically(sync=False)`` left undone)."""
    _fsync_path(path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """fsync a directory, so that the renames and creations in it survive a crash."""
    _fsync_path(directory)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(_VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def read_offsets(path: Path) -> dict[TopicPartition, Offset]:
    """Entries of an offset checkpoint; empty when the file is missing. Raises StorageError if malformed."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _VERSION:
            raise StorageError(f"{path}: unsupported checkpoint version {lines[0]!r}")
        count = int(lines[1])
        entries = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            entries[TopicPartition(topic, int(partition))] = Offset(int(offset))
    except (IndexError, ValueError) as exc:
        raise StorageError(f"{path}: malformed checkpoint file ({exc})") from exc
    if len(entries) != count:
        raise StorageError(f"{path}: header says {count} entries, found {len(entries)}")
    return entries


def read_properties(path: Path) -> dict[str, str]:
    props = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise StorageError(f"{path}: line {raw!r} is not key=value")
        props[key.strip()] = value.strip()
    return props


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    body = "#\n" + "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
    write_atomically(path, body.encode())
