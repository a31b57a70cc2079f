"""Shared helpers for storage tests."""

from __future__ import annotations

from storage import TopicPartition
from storage.records import build_batch

TP = TopicPartition("t", 0)


class FakeClock:
    """Milliseconds, advanced by hand."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(n: int = 3, *, ts: int = 1_700_000_000_000, size: int = 50, tag: str = "") -> bytes:
    """A batch of ``n`` records with distinct keys and ``size``-byte values."""
    return build_batch([(ts + i, f"k{tag}{i}".encode(), bytes([65 + i % 26]) * size) for i in range(n)])
