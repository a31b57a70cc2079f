"""``--set KEY=VALUE`` on ``strait site up`` and ``strait up``: checked before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from strait._appliance import Appliance
from strait._site import LocalSite, parse_settings
from strait.cli import main

pytestmark = pytest.mark.unit


def test_settings_parse_and_a_later_key_wins() -> None:
    assert parse_settings(["num.partitions=3", "log.retention.hours = 2", "num.partitions=6"]) == {
        "num.partitions": "6",
        "log.retention.hours": "2",
    }
    assert parse_settings(["strait.mirror.x="]) == {"strait.mirror.x": ""}


@pytest.mark.parametrize("bad", ["num.partitions", "=6", " =6"])
def test_a_setting_without_key_or_equals_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_settings([bad])


def test_the_settings_reach_every_nodes_properties_and_override_the_sites_defaults(tmp_path: Path) -> None:
    site = LocalSite(tmp_path / "east", nodes=3, properties={"num.partitions": "6", "min.insync.replicas": "1"})
    for node in site.nodes:
        props = site.node_properties(node)
        assert props["num.partitions"] == "6"
        assert props["min.insync.replicas"] == "1"  # the site's default would be 2
        assert props["broker.id"] == str(node.broker_id)
    appliance = Appliance(tmp_path / "a", nodes=1, properties={"num.partitions": "2"})
    for local in (appliance.east, appliance.west):
        assert local.node_properties(local.nodes[0])["num.partitions"] == "2"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("num.partitions=zero", "num.partitions='zero': not an integer"),
        ("num.partitons=3", "did you mean 'num.partitions'?"),
        ("broker.id=7", "the local site sets broker.id itself"),
        ("log.dirs=/tmp/x", "the local site sets log.dirs itself"),
        ("num.partitions", "expected KEY=VALUE"),
    ],
)
@pytest.mark.parametrize("command", [["site", "up"], ["up"]])
def test_a_bad_setting_is_refused_by_name_before_anything_starts(
    tmp_path: Path, command: list[str], setting: str, message: str
) -> None:
    directory = tmp_path / "d"
    result = CliRunner().invoke(main, [*command, "--dir", str(directory), "--set", setting])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not directory.exists()
