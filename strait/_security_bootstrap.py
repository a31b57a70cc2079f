"""The first SCRAM users and ACLs of a secured appliance site, written into its ZooKeeper.

A SASL_SSL node authenticates clients against the SCRAM credentials in its site's ZooKeeper,
so the first users cannot be made through a node: as Kafka operators do with
``kafka-configs.sh --zookeeper``, :func:`bootstrap_site` writes them straight into ZooKeeper
(with the site's digest credential: on a secured site only it may write), after ZooKeeper
started and before the nodes do. It goes through :class:`node.coordination.ZkSecurityStore`,
so the znodes are Kafka's (``/config/users/<user>``, ``/kafka-acl/...``) and the change
notifications are posted for nodes that already run.

Idempotent: a user whose stored credential already matches its password is left alone (a
changed password file is written again); an ACL already stored is not written again. ACLs
an operator added are kept; nothing is removed.

The ACLs (every pattern LITERAL, from any host: everything is on loopback anyway). They are
the least each principal works with, found by running the appliance and reading the nodes'
denials (``strait.node.authorizer``); READ, WRITE and ALTER imply DESCRIBE, and ALTER_CONFIGS
implies DESCRIBE_CONFIGS, as in Kafka:

=========  ============  ======================  ==============================================
principal  site          resource                operations, and what needs them
=========  ============  ======================  ==============================================
app        both          topic ``*``             READ, WRITE, CREATE, DESCRIBE: consume,
                                                 produce, create (auto-creation, CreateTopics)
app        both          group ``*``             READ: join, commit and fetch offsets
mirror     source        topic ``*``             READ (fetch, list offsets, metadata),
                                                 DESCRIBE_CONFIGS (topic config sync)
mirror     source        group ``*``             DESCRIBE: list the groups, fetch their offsets
mirror     target        cluster                 CLUSTER_ACTION: MirrorAppend
mirror     target        topic ``*``             CREATE (the mirror topics), ALTER (more
                                                 partitions), ALTER_CONFIGS (config sync),
                                                 READ (committing group offsets on it)
mirror     target        group ``*``             READ: describe the group, commit its offsets
=========  ============  ======================  ==============================================

``admin`` and ``broker`` (the nodes' principal on their inter-broker listener) are super users
(``super.users``) and need no ACL. The mirror's ACLs follow the link's direction (east is the
source): a reversed link (failover) would need them the other way round.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

import trio

from node.coordination import CoordinationError, ZkSecurityStore, ZkSession
from node.security._acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from node.security._scram import ScramCredential, ScramMechanism, credential_from_salted_password, make_credential
from node.security._store import SecurityStoreError
from node.zkkit import ZkDigest

SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
SCRAM_ITERATIONS = 4096
CONNECT_TIMEOUT_MS = 15000

ANY = "*"
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
READ, WRITE, CREATE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE
ALTER, ALTER_CONFIGS = AclOperation.ALTER, AclOperation.ALTER_CONFIGS
DESCRIBE_CONFIGS, CLUSTER_ACTION = AclOperation.DESCRIBE_CONFIGS, AclOperation.CLUSTER_ACTION

Grant = tuple[ResourceType, str, tuple[AclOperation, ...]]

#: A client of either site: any topic (produce, consume, create by auto-creation or CreateTopics), any group.
APP_ACLS: tuple[Grant, ...] = (
    (TOPIC, ANY, (READ, WRITE, CREATE, DESCRIBE)),
    (GROUP, ANY, (READ,)),
)
#: The mirror on the site it copies from.
MIRROR_SOURCE_ACLS: tuple[Grant, ...] = (
    (TOPIC, ANY, (READ, DESCRIBE_CONFIGS)),
    (GROUP, ANY, (DESCRIBE,)),
    (CLUSTER, CLUSTER_NAME, (DESCRIBE,)),  # DescribeAcls: the link copies the ACLs (sync_acls)
)
#: The mirror on the site it copies to.
MIRROR_TARGET_ACLS: tuple[Grant, ...] = (
    (CLUSTER, CLUSTER_NAME, (CLUSTER_ACTION, ALTER)),  # MirrorAppend; CreateAcls/DeleteAcls (sync_acls)
    (TOPIC, ANY, (CREATE, ALTER, ALTER_CONFIGS, READ)),
    (GROUP, ANY, (READ,)),
)


class BootstrapError(Exception):
    """The users or ACLs could not be written; the message names the ZooKeeper and the step."""


def bindings(grants: Mapping[str, Sequence[Grant]]) -> list[AclBinding]:
    """ALLOW bindings from any host for each user's grants (``user`` -> grants)."""
    out = []
    for user, table in grants.items():
        for resource_type, name, operations in table:
            pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
            for operation in operations:
                entry = AccessControlEntry(f"User:{user}", ANY, operation, AclPermissionType.ALLOW)
                out.append(AclBinding(pattern, entry))
    return out


def appliance_salt(user: str, mechanism: str, password: str) -> bytes:
    """The salt of ``user``'s ``mechanism`` credential: the same on both sites, so that each site
    stores the credential the mirror's user sync (``sync_users``) would copy there, and the sync
    finds nothing to change instead of a conflict for every user. Drawn from the password (a
    random 256-bit token of the appliance's secrets) by HMAC-SHA-256, so it is as unpredictable
    as the password and differs for every user and mechanism."""
    return hmac.new(password.encode(), f"strait up salt\0{user}\0{mechanism}".encode(), hashlib.sha256).digest()


def matches(credential: ScramCredential, mechanism: ScramMechanism, password: str) -> bool:
    """Whether ``credential`` was made from ``password`` (whatever its salt and iterations)."""
    try:
        salted = mechanism.salted_password(password, credential.salt, credential.iterations)
        return credential_from_salted_password(mechanism, credential.salt, salted, credential.iterations) == credential
    except ValueError:
        return False


def bootstrap_site(
    connect: str, digest: ZkDigest, passwords: Mapping[str, str], acls: Sequence[AclBinding]
) -> list[str]:
    """Make ``passwords``' users (both SCRAM mechanisms) and ``acls`` exist in the ZooKeeper at
    ``connect`` (``host:port/chroot``; the chroot is created with the secured ACL if missing).
    Blocking (its own trio run); returns the credentials it wrote, in words (empty on a restart).

    Raises:
        BootstrapError: ZooKeeper did not answer within ``CONNECT_TIMEOUT_MS`` or refused a write.
    """
    try:
        return trio.run(_bootstrap, connect, digest, passwords, acls)
    except (CoordinationError, SecurityStoreError) as exc:
        raise BootstrapError(f"cannot write the SCRAM users and ACLs into ZooKeeper {connect}: {exc}") from None


async def _bootstrap(
    connect: str, digest: ZkDigest, passwords: Mapping[str, str], acls: Sequence[AclBinding]
) -> list[str]:
    wrote = []
    session = ZkSession(connect, digest=digest, set_acl=True, connection_timeout_ms=CONNECT_TIMEOUT_MS)
    async with session, ZkSecurityStore(session) as store:
        for user, password in passwords.items():
            for name in SCRAM_MECHANISMS:
                mechanism = ScramMechanism.from_name(name)
                stored = store.scram_credential(name, user)
                if stored is not None and matches(stored, mechanism, password):
                    continue
                credential = make_credential(
                    mechanism, password, salt=appliance_salt(user, name, password), iterations=SCRAM_ITERATIONS
                )
                await store.set_scram(user, name, credential)
                wrote.append(f"{name} credential of {user}")
        await store.add_acls(acls)  # a compare-and-set per pattern that writes only what is missing
    return wrote
