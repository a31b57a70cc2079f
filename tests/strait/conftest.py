"""The node fixtures (``site``, ``node_factory``) for the CLI tests that drive a real site."""

from __future__ import annotations

from tests.node.conftest import node_factory, site  # noqa: F401 - fixtures, found by name
