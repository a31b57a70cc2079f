"""``strait failover``'s bad input: a clear message naming the value, and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from strait.cli import main
from tests.failover.test_topology import APPLIANCE


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    path = tmp_path / "appliance.json"
    path.write_text(json.dumps(APPLIANCE))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["promote", "west-to-east", "--planned"], "no link 'west-to-east' (links: east-to-west)"),
        (["status", "nope"], "no link 'nope' (links: east-to-west)"),
        (["reverse", "nope", "--export", "x"], "no link 'nope'"),
        (["failback", "nope"], "no link 'nope'"),
        (["fence", "north"], "no site 'north' (sites: east, west)"),
        (["unfence", "north"], "no site 'north'"),
    ],
)
def test_an_unknown_link_or_site_is_named_with_exit_code_2(topology: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["failover", *args, "--topology", str(topology)])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_json_mode_answers_the_error_as_json_too(topology: Path) -> None:
    result = CliRunner().invoke(main, ["failover", "failback", "nope", "--json", "--topology", str(topology)])
    assert result.exit_code == 2
    answer = json.loads(result.stdout)
    assert answer["ok"] is False and answer["exit_code"] == 2 and "no link 'nope'" in answer["error"]


def test_promote_needs_planned_or_unplanned(topology: Path) -> None:
    result = CliRunner().invoke(main, ["failover", "promote", "east-to-west", "--topology", str(topology)])
    assert result.exit_code == 2
    assert "--planned" in result.output and "--unplanned" in result.output


def test_a_missing_topology_says_where_it_looked(tmp_path: Path) -> None:
    missing = tmp_path / "appliance.json"
    result = CliRunner().invoke(main, ["failover", "status", "--topology", str(missing)])
    assert result.exit_code == 2
    assert f"{missing}: no such topology file" in result.output
