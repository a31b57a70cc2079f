"""The mirror's target ZooKeeper with digest authentication: ``zookeeper_digest_file`` in a link's
target site, and a membership joining a site whose nodes set ``zookeeper.set.acl``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from mirror import ConfigError, parse_links
from mirror._members import ZkMembership
from node.coordination import ZkState
from node.zkkit import ZkDigest, kazoo_client, stop_quietly
from tests.node.coordination.zk_helpers import DEADLINE, run

PASSWORD = "mirror-zk-s3cret"
DIGEST = ZkDigest("strait", PASSWORD)


def target(**site: Any) -> dict[str, Any]:
    link = {"name": "l", "source": {"name": "a", "bootstrap": "h:1"}, "target": {"name": "b", "bootstrap": "h:2"}}
    link["target"] |= site
    return {"link": [link]}


def test_the_target_may_name_a_digest_file_next_to_its_zookeeper(tmp_path: Path) -> None:
    path = tmp_path / "zk.digest"
    path.write_text(f"strait:{PASSWORD}\n")
    (link,) = parse_links(target(zookeeper="127.0.0.1:2181/west", zookeeper_digest_file=str(path)))
    assert link.target.zookeeper_digest() == DIGEST
    assert link.target.to_dict()["zookeeper_digest_file"] == str(path)
    assert PASSWORD not in repr(link)
    (plain,) = parse_links(target(zookeeper="127.0.0.1:2181/west"))
    assert plain.target.zookeeper_digest() is None


def test_a_digest_file_needs_a_zookeeper_and_must_exist(tmp_path: Path) -> None:
    path = tmp_path / "zk.digest"
    path.write_text(f"strait:{PASSWORD}\n")
    with pytest.raises(ConfigError, match=r"target\.zookeeper_digest_file: needs target\.zookeeper"):
        parse_links(target(zookeeper_digest_file=str(path)))
    with pytest.raises(ConfigError, match="is not a readable file"):
        parse_links(target(zookeeper="127.0.0.1:2181", zookeeper_digest_file=str(tmp_path / "missing")))
    path.write_text(f"strait {PASSWORD}\n")
    (link,) = parse_links(target(zookeeper="127.0.0.1:2181", zookeeper_digest_file=str(path)))
    with pytest.raises(ConfigError, match="user:password") as err:
        link.target.zookeeper_digest()
    assert "s3cret" not in str(err.value)


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_a_member_joins_a_secured_site_only_with_the_credential(zk_connect: str) -> None:
    def member_acl() -> list[Any]:
        client = kazoo_client(zk_connect, 10.0, digest=DIGEST)
        client.start(timeout=DEADLINE)
        try:
            found, _ = client.get_acls("/strait/mirror/l/members/m1")
            return sorted(found)
        finally:
            stop_quietly(client)

    async def main() -> None:
        async with ZkState(zk_connect, digest=DIGEST, set_acl=True):  # the site's node: /strait is secured
            pass
        anonymous = ZkMembership(zk_connect, "l", "m0", session_timeout_s=4.0, recheck_s=0.2)
        async with trio.open_nursery() as nursery:
            with trio.move_on_after(2):
                await nursery.start(anonymous.run)  # never registers: it may not create under /strait
                pytest.fail("a member without the credential registered")
            nursery.cancel_scope.cancel()
        member = ZkMembership(zk_connect, "l", "m1", session_timeout_s=4.0, recheck_s=0.2, digest=DIGEST)
        async with trio.open_nursery() as nursery:
            await nursery.start(member.run)
            assert member.members == ("m1",)
            assert await trio.to_thread.run_sync(member_acl) == sorted(DIGEST.secure_acl())
            nursery.cancel_scope.cancel()

    run(main)
