"""The chaos file for sites the operator runs: read with every bad key named; faults it cannot drive are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.errors import ChaosError
from chaos.existing import load_existing

pytestmark = pytest.mark.unit

SITES = """
[sites.east]
bootstrap = "127.0.0.1:19092"
zookeeper = "127.0.0.1:2181/east"

[sites.west]
bootstrap = "127.0.0.1:19192"
zookeeper = "127.0.0.1:2182/west"

[[link]]
name = "east-to-west"
source = "east"
target = "west"
mirror_admin = "http://127.0.0.1:8090"
token_file = "token"
"""

NODE = """
[[node]]
site = "east"
broker_id = {id}
kill = "echo kill {id}"
start = "echo start {id}"
"""


def write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "sites.toml").write_text(SITES)
    path = tmp_path / "chaos.toml"
    path.write_text(body)
    return path


def test_a_complete_file_gives_both_sites_and_their_commands(tmp_path: Path) -> None:
    body = 'topology = "sites.toml"\nlink = "east-to-west"\n' + "".join(NODE.format(id=i) for i in (1, 2))
    body += '[zookeeper.east]\nkill = "echo zk kill"\nstart = "echo zk start"\n'
    sites = load_existing(write(tmp_path, body))
    assert sites.source.name == "east" and sites.target.name == "west" and sites.link_name == "east-to-west"
    assert [n.broker_id for n in sites.source.nodes] == [1, 2] and sites.target.nodes == []
    assert sites.source.bootstrap == "127.0.0.1:19092"
    assert sites.supports("kill-leader") is None and sites.supports("site-loss") is None
    assert "pause" in str(sites.supports("pause-leader"))
    assert "fault proxy" in str(sites.supports("wan-latency")) and "fault proxy" in str(sites.supports("isolate-node"))
    sites.source.node(1).kill()  # runs `echo kill 1`
    assert not sites.source.node(1).running
    assert sites.stop() == ["east node 1 is still down after the run"]


def test_without_zookeeper_commands_zk_loss_and_site_loss_are_refused(tmp_path: Path) -> None:
    sites = load_existing(write(tmp_path, 'topology = "sites.toml"\nlink = "east-to-west"\n' + NODE.format(id=1)))
    assert "zookeeper.east" in str(sites.supports("zk-loss"))
    assert "ZooKeeper" in str(sites.supports("site-loss"))


def test_a_failing_command_is_an_error_naming_it_and_its_output(tmp_path: Path) -> None:
    body = 'topology = "sites.toml"\nlink = "east-to-west"\n[[node]]\nsite = "east"\nbroker_id = 1\n'
    body += 'kill = "echo no such unit >&2; exit 5"\n'
    sites = load_existing(write(tmp_path, body))
    with pytest.raises(ChaosError, match=r"kill east node 1: .*exited with 5: no such unit"):
        sites.source.node(1).kill()
    with pytest.raises(ChaosError, match="no 'pause' command"):
        sites.source.node(1).pause()


HEAD = 'topology = "sites.toml"\nlink = "east-to-west"\n'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('link = "east-to-west"\n', "'topology' .* and 'link'"),
        ('topology = "sites.toml"\nlink = "nope"\n', "no link 'nope'"),
        ('topology = "missing.toml"\nlink = "east-to-west"\n', "missing.toml"),
        ('topology = "sites.toml"\nlink = "east-to-west"\nnodes = 1\n', "unknown key 'nodes'"),
        ('topology = "sites.toml"\nlink = "east-to-west"\n[[node]]\nsite = "north"\nbroker_id = 1\n', "site 'north'"),
        ('topology = "sites.toml"\nlink = "east-to-west"\n[[node]]\nsite = "east"\nbroker_id = "1"\n', "broker_id"),
        (HEAD + '[[node]]\nsite = "east"\nbroker_id = 1\nstop = "x"\n', "'stop'"),
        ('topology = "sites.toml"\nlink = "east-to-west"\n[zookeeper.east]\nrestart = "x"\n', "kill' and 'start"),
        ("topology = [", "cannot read chaos file"),
    ],
)
def test_bad_files_are_named(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ChaosError, match=message):
        load_existing(write(tmp_path, body))
