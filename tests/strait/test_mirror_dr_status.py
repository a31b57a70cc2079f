"""The DR status source ``strait mirror start`` gives the mirror: a topology made of one link's
config, and a clear refusal where ``failover.status`` cannot work (no processes).

The source against real sites and a real mirror process: tests/mirror/test_dr_page_browser.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import trio

from failover.topology import Link, Site
from mirror import LinkConfig, MirrorError, parse_link
from mirror._service import MirrorService
from strait._mirror_commands import _dr_status, _dr_topology


def link(**target: Any) -> LinkConfig:
    return parse_link(
        {
            "name": "east-to-west",
            "source": {"name": "east", "bootstrap": "10.0.0.1:9092,10.0.0.2:9092"},
            "target": {"name": "west", "bootstrap": "10.1.0.1:9092", **target},
        },
        origin="links.toml",
    )


class OneLink:
    """What ``_dr_status`` reads of the service, for one link that is not running anywhere."""

    admin_url = "http://127.0.0.1:8090"
    token_file = Path("/state/admin.token")

    def __init__(self, config: LinkConfig) -> None:
        self.config = config

    def link_config(self, name: str) -> LinkConfig:
        assert name == self.config.name
        return self.config


def test_the_topology_is_the_links_two_sites_and_this_mirror() -> None:
    topology = _dr_topology(link(), "10.1.0.1:2181/west", "http://127.0.0.1:8090", Path("/state/admin.token"))
    assert dict(topology.sites) == {
        "east": Site("east", "10.0.0.1:9092,10.0.0.2:9092", ""),
        "west": Site("west", "10.1.0.1:9092", "10.1.0.1:2181/west"),
    }
    assert dict(topology.links) == {
        "east-to-west": Link("east-to-west", "east", "west", "http://127.0.0.1:8090", Path("/state/admin.token"))
    }


def test_a_secured_targets_digest_file_reaches_the_topology(tmp_path: Path) -> None:
    digest = tmp_path / "west-zk.digest"
    digest.write_text("strait:west-s3cret\n")
    config = link(zookeeper="10.1.0.1:2181/west", zookeeper_digest_file=str(digest))
    topology = _dr_topology(config, "10.1.0.1:2181/west", "http://127.0.0.1:8090", None)
    assert topology.site("west").zookeeper_digest_file == digest
    assert topology.site("east").zookeeper_digest_file is None


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            {},
            "link 'east-to-west': the link file names no zookeeper for the target 'west', where the DR state lives: "
            'add zookeeper = "host:port/chroot" to its target (or use `strait failover status`)',
        ),
        (
            {"zookeeper": "10.1.0.1:2181/west", "tls": {"check_hostname": False}},
            "link 'east-to-west': its sites are reached over TLS, which the DR status does not speak yet",
        ),
    ],
)
def test_a_link_the_dr_status_cannot_serve_is_refused_naming_why(target: dict[str, Any], message: str) -> None:
    service = cast(MirrorService, OneLink(link(**target)))
    with pytest.raises(MirrorError) as refused:
        trio.run(_dr_status, service, "east-to-west")
    assert str(refused.value) == message
