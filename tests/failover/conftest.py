"""The node fixture (``node_factory``) for the failover tests that need one real node."""

from __future__ import annotations

from tests.node.conftest import node_factory  # noqa: F401 - a fixture, found by name
