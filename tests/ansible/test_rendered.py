"""What the roles render, read back by the programs that use it: server.properties by the node's own
config loader (``strait node start`` runs the same ``load_config``), the link file by the mirror's
``load_links``, and every systemd unit by ``systemd-analyze verify``.

One ansible-playbook run (tests/ansible/playbooks/render.yml) renders them all for one broker host
of site east, with a mirror link from east to a site west of the same inventory, into a tmp dir;
the units point at this venv's ``strait`` (systemd-analyze needs ExecStart to exist).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mirror import load_links
from node.config import load_config
from tests.ansible.harness import PLAYBOOKS, run_playbook, write_inventory

pytestmark = pytest.mark.ansible

TOKEN = "render-test-token-0123456789"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("render")
    prefix = root / "prefix"
    host_vars = {
        "ansible_connection": "local",
        "ansible_become": False,
        "common_prefix": str(prefix),
        "common_service_manager": "systemd",
        "common_systemd_unit_dir": str(root / "units"),
        "common_venv_dir": sys.prefix,  # this venv: the template validation and ExecStart use it
        "common_user": "root",  # the strait user may not exist yet on this machine
        "common_group": "root",
        "broker_id": 1,
        "broker_log_dirs": [str(prefix / "data/d1/strait-logs"), str(prefix / "data/d2/strait-logs")],
        "broker_properties": {"log.retention.hours": 72, "delete.topic.enable": False},
        "zookeeper_id": 1,
        "zookeeper_user": "root",
        "zookeeper_group": "root",
        "mirror_admin_token": TOKEN,
        "mirror_links": [
            {"name": "east-to-west", "source": "east", "target": "west", "topics": {"include": ["orders.*"]}}
        ],
    }
    inventory = {
        "all": {
            "children": {
                "east": {"hosts": {"render": host_vars}, "vars": {"common_site": "east"}},
                "west": {"hosts": {"west-1": {"ansible_host": "192.0.2.21", "broker_port": 9093}}},
                "zookeeper": {"hosts": {"render": None, "west-1": None}},
                "brokers": {"hosts": {"render": None, "west-1": None}},
            }
        }
    }
    for d in ("etc/strait", "units"):
        (prefix / d if d != "units" else root / d).mkdir(parents=True, exist_ok=True)
    result = run_playbook(
        PLAYBOOKS / "render.yml",
        write_inventory(root / "hosts.json", inventory),
        home=root / "ansible-home",
        timeout=240,
        args=["--limit", "render"],
    )
    assert result.returncode == 0, result.output
    yield root


def test_server_properties_loads_with_the_node_parser(rendered: Path) -> None:
    config = load_config(rendered / "prefix/etc/strait/server.properties")
    assert config.broker_id == 1
    assert config.broker_rack == "east"
    assert config.zookeeper_connect.endswith("/strait/east")
    assert [str(d) for d in config.log_dirs] == [
        str(rendered / "prefix/data/d1/strait-logs"),
        str(rendered / "prefix/data/d2/strait-logs"),
    ]
    assert config.min_insync_replicas == 2
    assert config.default_replication_factor == 3
    assert config.unclean_leader_election_enable is False
    assert config.admin_listener == ("127.0.0.1", 9644)
    assert config.explicit_values["log.retention.hours"] == "72"
    assert config.delete_topic_enable is False


def test_link_file_loads_with_the_mirror_parser(rendered: Path) -> None:
    (link,) = load_links(rendered / "prefix/etc/strait/links.toml")
    assert link.name == "east-to-west"
    assert link.source.name == "east"
    assert link.source.bootstrap == "render:9092"  # no ansible_host: the inventory name
    assert link.target.name == "west"
    assert link.target.bootstrap == "192.0.2.21:9093"
    assert link.target.zookeeper == "192.0.2.21:2181/strait/west"
    assert link.mirrors_topic("orders.eu") and not link.mirrors_topic("payments")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("unit", ["strait-zookeeper.service", "strait-broker.service", "strait-mirror.service"])
def test_systemd_unit_verifies(rendered: Path, unit: str) -> None:
    path = rendered / "units" / unit
    text = path.read_text()
    assert "LimitNOFILE=100000" in text
    verify = ["systemd-analyze", "verify", str(path)]
    done = subprocess.run(verify, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    if unit == "strait-broker.service":
        assert "RequiresMountsFor=" in text and "/data/d2/strait-logs" in text
    if unit == "strait-zookeeper.service":  # ZooKeeper rewrites zoo.cfg under /etc (read-only otherwise)
        assert 'ReadWritePaths="' + str(rendered / "prefix/etc/strait/zookeeper") + '"' in text
