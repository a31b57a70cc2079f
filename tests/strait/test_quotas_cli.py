"""``strait quotas``: what it refuses before reaching a node (the calls themselves are tested
against a real node in tests/node/test_quotas_clients.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from strait.cli import main

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["alter", "--user", "a", "--user-default", "--add", "producer_byte_rate=1"], "--user or --user-default"),
        (["alter", "--add", "producer_byte_rate=1"], "name the entity"),
        (["alter", "--client-id", "c", "--add", "producer_byte_rate"], "expected KEY=NUMBER"),
        (["alter", "--client-id", "c", "--add", "producer_byte_rate=lots"], "expected KEY=NUMBER"),
        (["alter", "--client-id", "c"], "nothing to change"),
        (["describe", "--client-id", "c", "--client-id-default"], "--client-id or --client-id-default"),
    ],
)
def test_usage_errors_are_named(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["quotas", *args, "-b", "127.0.0.1:1"])
    assert result.exit_code == 2, result.output
    assert message in result.output
