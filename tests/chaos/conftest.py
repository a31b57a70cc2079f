"""Fixtures for chaos tests: a fault proxy server for the test, stopped after it."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from chaos.proxy import ProxyHandle, run_in_thread


@pytest.fixture
def chaos_proxy(request: pytest.FixtureRequest) -> Iterator[ProxyHandle]:
    """A fault proxy server with its toxiproxy API on a free loopback port, in a background thread.

    Seeded from the test's id, so toxicity draws and jitter repeat from run to run.
    """
    with run_in_thread(seed=zlib.crc32(request.node.nodeid.encode())) as handle:
        yield handle
