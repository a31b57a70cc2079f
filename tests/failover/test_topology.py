"""failover.topology: strait up's appliance.json as it is, and the TOML file for real sites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from failover.errors import TopologyError
from failover.topology import load_topology
from node.zkkit import ZkDigest

APPLIANCE = {
    "sites": {
        "east": {
            "bootstrap": "127.0.0.1:9001,127.0.0.1:9002",
            "zookeeper": "127.0.0.1:2181",
            "zookeeper_chroot": "/east",
            "admin": ["http://127.0.0.1:8001"],
        },
        "west": {
            "bootstrap": "127.0.0.1:9101",
            "zookeeper": "127.0.0.1:2182",
            "zookeeper_chroot": "/west",
            "admin": [],
        },
    },
    "links": [{"name": "east-to-west", "source": "east", "target": "west", "admin": "http://127.0.0.1:8100/"}],
}


def write_json(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "appliance.json"
    path.write_text(json.dumps(data))
    return path


def test_the_appliance_file_is_read_as_strait_up_writes_it(tmp_path: Path) -> None:
    topology = load_topology(write_json(tmp_path, APPLIANCE))
    east = topology.site("east")
    assert east.bootstrap == "127.0.0.1:9001,127.0.0.1:9002"
    assert east.zookeeper == "127.0.0.1:2181/east"
    assert east.node_admin == ("http://127.0.0.1:8001",)
    link = topology.link("east-to-west")
    assert (link.source, link.target) == ("east", "west")
    assert link.mirror_admin == "http://127.0.0.1:8100"
    assert link.token_file == tmp_path / "mirror" / "admin.token"
    assert topology.links_from("east") == [link]
    assert topology.links_from("west") == []


def test_unknown_links_and_sites_are_named_with_the_known_ones(tmp_path: Path) -> None:
    topology = load_topology(write_json(tmp_path, APPLIANCE))
    with pytest.raises(TopologyError, match=r"no link 'west-to-east' \(links: east-to-west\)"):
        topology.link("west-to-east")
    with pytest.raises(TopologyError, match=r"no site 'north' \(sites: east, west\)"):
        topology.site("north")


def test_a_missing_appliance_file_says_strait_up_writes_it(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match=r"no such topology file \(is `strait up` running"):
        load_topology(tmp_path / "appliance.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["links"][0].update(source="north"), r"links\[0\]: source: no site 'north'"),
        (lambda d: d["links"][0].update(target="east"), r"the source and the target are the same site 'east'"),
        (lambda d: d["links"][0].update(admin="127.0.0.1:8100"), r"links\[0\]\.admin: '127.0.0.1:8100' is not an http"),
        (lambda d: d["sites"]["east"].pop("bootstrap"), r"sites\.east: bootstrap: missing"),
        (lambda d: d["sites"]["east"].update(zookeeper_chroot="east"), r"zookeeper_chroot: 'east' is not a path"),
        (lambda d: d.update(sites={}), r"sites: missing or empty"),
        (lambda d: d["links"].append(dict(d["links"][0])), r"link 'east-to-west' is defined more than once"),
    ],
)
def test_a_bad_appliance_file_names_the_key(tmp_path: Path, change: object, message: str) -> None:
    data = json.loads(json.dumps(APPLIANCE))
    change(data)  # type: ignore[operator]
    with pytest.raises(TopologyError, match=message):
        load_topology(write_json(tmp_path, data))


def test_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "appliance.json"
    path.write_text("{")
    with pytest.raises(TopologyError, match="not valid JSON"):
        load_topology(path)


TOML = """
[sites.east]
bootstrap = "10.0.0.1:9092,10.0.0.2:9092"
zookeeper = "10.0.0.1:2181,10.0.0.2:2181/east"
node_admin = ["http://10.0.0.1:8091"]

[sites.west]
bootstrap = "10.1.0.1:9092"
zookeeper = "10.1.0.1:2181/west"

[[link]]
name = "east-to-west"
source = "east"
target = "west"
mirror_admin = "http://10.1.0.5:8090"
token_file = "secrets/mirror.token"
"""


def test_the_toml_topology_names_sites_and_links(tmp_path: Path) -> None:
    path = tmp_path / "dr.toml"
    path.write_text(TOML)
    topology = load_topology(path)
    assert topology.site("east").zookeeper == "10.0.0.1:2181,10.0.0.2:2181/east"
    assert topology.site("west").node_admin == ()
    link = topology.link("east-to-west")
    assert link.token_file == tmp_path / "secrets" / "mirror.token"
    assert link.mirror_admin == "http://10.1.0.5:8090"
    assert topology.to_dict()["links"][0]["name"] == "east-to-west"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TOML.replace("mirror_admin", "mirror_url"), r"link 'east-to-west': unknown key 'mirror_url'"),
        (TOML.replace('zookeeper = "10.1.0.1:2181/west"', ""), r"sites\.west: zookeeper: missing"),
        (TOML.replace('name = "east-to-west"', 'name = "east to west"'), r"'east to west' is not a name"),
        (TOML + "\n[extra]\n", r"top level: unknown key 'extra'"),
        (TOML.replace("[[link]]", "[link]"), r"'link' must be an array of tables"),
        ("sites = 1", r"sites: missing or empty"),
        ("[sites", r"not valid TOML"),
    ],
)
def test_a_bad_toml_topology_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "dr.toml"
    path.write_text(text)
    with pytest.raises(TopologyError, match=message):
        load_topology(path)


# -- zookeeper_digest_file: the credential of a site that secures its ZooKeeper ----------------------

PASSWORD = "topology-zk-s3cret:with-a-colon"
SECURED_WEST = TOML.replace(
    'zookeeper = "10.1.0.1:2181/west"',
    'zookeeper = "10.1.0.1:2181/west"\nzookeeper_digest_file = "secrets/west.digest"',
)


def _toml(tmp_path: Path, text: str, digest: str | None = f"strait:{PASSWORD}\n") -> Path:
    if digest is not None:
        (tmp_path / "secrets").mkdir(exist_ok=True)
        (tmp_path / "secrets" / "west.digest").write_text(digest)
    path = tmp_path / "dr.toml"
    path.write_text(text)
    return path


def test_a_site_may_name_its_zookeepers_digest_file_relative_to_the_topology(tmp_path: Path) -> None:
    topology = load_topology(_toml(tmp_path, SECURED_WEST))
    west = topology.site("west")
    assert west.zookeeper_digest_file == tmp_path / "secrets" / "west.digest"
    assert west.zookeeper_digest() == ZkDigest("strait", PASSWORD)  # the password is all after the first ':'
    assert topology.site("east").zookeeper_digest_file is None
    assert topology.site("east").zookeeper_digest() is None
    shown = json.dumps(topology.to_dict())
    assert str(tmp_path / "secrets" / "west.digest") in shown
    assert PASSWORD not in shown and PASSWORD not in repr(topology)


def test_the_appliance_file_may_name_a_digest_file_too(tmp_path: Path) -> None:
    (tmp_path / "west.digest").write_text(f"strait:{PASSWORD}")
    data = json.loads(json.dumps(APPLIANCE))
    data["sites"]["west"]["zookeeper_digest_file"] = "west.digest"
    west = load_topology(write_json(tmp_path, data)).site("west")
    assert west.zookeeper == "127.0.0.1:2182/west"
    assert west.zookeeper_digest() == ZkDigest("strait", PASSWORD)


@pytest.mark.parametrize(
    ("digest", "reason"),
    [
        (None, "No such file or directory"),
        ("strait", "expected one line user:password: there is no ':'"),
        (f"strait:{PASSWORD}\nother:{PASSWORD}", "expected one line user:password, not several"),
        (f"str ait:{PASSWORD}", "expected one line user:password: the user is empty or has ':' or blanks"),
        ("strait:", "expected one line user:password: the password is empty"),
    ],
)
def test_a_missing_or_malformed_digest_file_names_the_key_and_the_file_never_the_password(
    tmp_path: Path, digest: str | None, reason: str
) -> None:
    path = _toml(tmp_path, SECURED_WEST, digest)
    with pytest.raises(TopologyError) as err:
        load_topology(path)
    file = tmp_path / "secrets" / "west.digest"
    assert str(err.value) == f"{path}: sites.west: zookeeper_digest_file: {str(file)!r}: {reason}"
    assert "s3cret" not in str(err.value)


def test_a_digest_file_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secrets" / "west.digest").mkdir(parents=True)
    with pytest.raises(TopologyError, match=r"sites\.west: zookeeper_digest_file: '.*west\.digest': Is a directory"):
        load_topology(_toml(tmp_path, SECURED_WEST, digest=None))


def test_a_digest_file_without_a_zookeeper_is_refused(tmp_path: Path) -> None:
    text = SECURED_WEST.replace('zookeeper = "10.1.0.1:2181/west"\n', "")
    with pytest.raises(TopologyError, match=r"sites\.west: zookeeper_digest_file: needs zookeeper"):
        load_topology(_toml(tmp_path, text))
    data = json.loads(json.dumps(APPLIANCE))
    data["sites"]["west"] |= {"zookeeper_digest_file": "west.digest"}
    del data["sites"]["west"]["zookeeper"]
    with pytest.raises(TopologyError, match=r"sites\.west: zookeeper_digest_file: needs zookeeper"):
        load_topology(write_json(tmp_path, data))


def test_a_digest_file_removed_after_loading_is_named_when_it_is_read(tmp_path: Path) -> None:
    west = load_topology(_toml(tmp_path, SECURED_WEST)).site("west")
    (tmp_path / "secrets" / "west.digest").unlink()
    with pytest.raises(TopologyError, match=r"^site west: zookeeper_digest_file: '.*west\.digest': No such file"):
        west.zookeeper_digest()
