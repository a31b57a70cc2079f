"""``strait failover``'s bad input: a clear message naming the value, and exit code 2; a site
whose ZooKeeper is secured and a topology without (or with the wrong) credential for it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from kazoo.security import ACL, ANYONE_ID_UNSAFE, Permissions  # type: ignore[import-untyped]

from strait.cli import main
from tests.failover.test_state import DIGEST, PASSWORD, dr_znodes
from tests.failover.test_topology import APPLIANCE
from tests.node.harness import NodeProcess


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


# -- a site that secures its ZooKeeper ---------------------------------------------------------------

SECURED_TOPOLOGY = """
[sites.east]
bootstrap = "127.0.0.1:1"
zookeeper = "127.0.0.1:1/east"

[sites.west]
bootstrap = "{bootstrap}"
zookeeper = "{zookeeper}"
{digest}

[[link]]
name = "east-to-west"
source = "east"
target = "west"
mirror_admin = "http://127.0.0.1:1"
"""


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_fencing_a_secured_site_needs_its_credential_in_the_topology(
    tmp_path: Path, zk_connect: str, node_factory: Callable[..., NodeProcess]
) -> None:
    """``strait failover fence west`` on a one-node west whose node sets zookeeper.set.acl: the
    command journals in west's ZooKeeper, so without the credential it stops at the lock with one
    clear line (exit 2) and writes nothing; with it, it is done and its znodes are secured."""
    (tmp_path / "west.digest").write_text(f"strait:{PASSWORD}\n")
    (tmp_path / "wrong.digest").write_text("strait:not-the-password\n")
    node = node_factory(1, zookeeper_set_acl="true", strait_zookeeper_digest_file=str(tmp_path / "west.digest"))

    def fence(digest_line: str) -> Result:
        path = tmp_path / "dr.toml"
        path.write_text(SECURED_TOPOLOGY.format(bootstrap=node.bootstrap, zookeeper=zk_connect, digest=digest_line))
        return CliRunner().invoke(main, ["failover", "fence", "west", "--topology", str(path)])

    for digest_line, needle in [
        ("", "is secured (its nodes set zookeeper.set.acl) and refused to lock link 'east-to-west' (NoAuth)"),
        ('zookeeper_digest_file = "wrong.digest"', "it is not the one the site's nodes use"),
    ]:
        refused = fence(digest_line)
        assert refused.exit_code == 2, refused.output
        assert refused.exception is None or isinstance(refused.exception, SystemExit), refused.exception
        (line,) = refused.output.splitlines()
        assert line.startswith(f"error: site west's ZooKeeper ({zk_connect}) ") and needle in line
        assert "sites.west.zookeeper_digest_file" in line and PASSWORD not in line
        assert "Traceback" not in refused.output
    assert dr_znodes(zk_connect) == {}  # the refused commands wrote nothing

    done = fence('zookeeper_digest_file = "west.digest"')
    assert done.exit_code == 0, done.output
    assert "link east-to-west: 0 of 0 topics on west changed" in done.output
    znodes = dr_znodes(zk_connect)
    assert "/strait/dr/east-to-west/state" in znodes
    assert len([p for p in znodes if p.startswith("/strait/dr/east-to-west/journal/")]) == 1  # the fence
    secured = sorted([DIGEST.all_acl(), ACL(Permissions.READ, ANYONE_ID_UNSAFE)])
    assert {path: acl for path, acl in znodes.items() if acl != secured} == {}  # no znode the world may change
