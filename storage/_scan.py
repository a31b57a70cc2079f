"""Walk a ``.log`` file batch by batch, validating each one (length, magic, CRC-32C, offsets).

Recovery and ``strait log verify`` share this scan: it reads the file in large chunks, so
its speed is bounded by the disk and CRC-32C, not by per-batch system calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ._errors import CorruptBatchError
from .records import HEADER_SIZE, LOG_OVERHEAD, PREFIX, BatchHeader, check_batch

CHUNK_BYTES = 8 * 1024 * 1024
INT32_MAX = 2**31 - 1


def scan_batches(fd: int, file_size: int, *, path: Path, base_offset: int) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each valid batch of a segment, in order.

    Raises CorruptBatchError (with ``path`` and the byte ``position``) at the first batch
    that is torn, fails its CRC, is not magic 2, or whose offsets do not increase within the
    segment's int32 range. Everything yielded before the error is valid.
    """
    next_offset = base_offset
    pos = 0
    while pos < file_size:
        chunk = os.pread(fd, min(CHUNK_BYTES, file_size - pos), pos)
        cpos = 0
        while cpos < len(chunk):
            if len(chunk) - cpos >= PREFIX.size:
                batch_length = PREFIX.unpack_from(chunk, cpos)[1]
                size = batch_length + LOG_OVERHEAD
                spans_chunk = cpos + size > len(chunk) and pos + cpos + size <= file_size
                if batch_length >= HEADER_SIZE - LOG_OVERHEAD and spans_chunk:
                    if cpos == 0:  # a batch larger than the chunk: read it whole
                        chunk = os.pread(fd, size, pos)
                        continue
                    break  # re-read from this batch's start
            try:
                header = check_batch(chunk, cpos)
            except CorruptBatchError as exc:
                raise CorruptBatchError(exc.reason, position=pos + cpos, path=path) from None
            if header.base_offset < next_offset or header.last_offset - base_offset > INT32_MAX:
                raise CorruptBatchError(
                    f"offsets {header.base_offset}..{header.last_offset} do not follow offset {next_offset - 1}",
                    position=pos + cpos,
                    path=path,
                )
            yield pos + cpos, header
            next_offset = header.next_offset
            cpos += header.size
        pos += cpos
