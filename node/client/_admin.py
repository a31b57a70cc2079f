"""Admin verbs: topics and their configs, ACLs and SCRAM credentials over the Kafka protocol.

``AdminClient`` sends them through a ``Route``: one node's connection (``AdminClient.connect``,
what ``strait topics`` uses) or a whole site (``AdminClient(site)``, what the mirror uses: the
controller first, the other brokers in turn when it fails; offsets asked of each leader).

ACLs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31, v1 where the node speaks it: v0 knows only
LITERAL patterns) are ``node.security``'s ``AclBinding`` and ``AclBindingFilter``. SCRAM
credentials (DescribeUserScramCredentials 50, AlterUserScramCredentials 51, KIP-554) are named by
mechanism ("SCRAM-SHA-256", "SCRAM-SHA-512"); a password never leaves this process: the verb
salts it with a fresh random salt and sends Hi(password, salt, iterations), as Kafka's admin
client does.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from node.protocol import ApiKey, ErrorCode
from node.security._acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from node.security._scram import MAX_ITERATIONS, MIN_ITERATIONS, SALT_SIZE, ScramMechanism
from storage.records import NO_OFFSET, Offset

from ._connection import ClientError, NodeConnection
from ._data import EARLIEST, LATEST, list_offsets
from ._site import MakeBody, NodeRoute, Route, SiteClient
from ._truncate import TruncationResult
from ._truncate import truncate_partitions as _truncate_partitions

TOPIC_RESOURCE = 2  # DescribeConfigs / IncrementalAlterConfigs resource type of a topic
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source of a topic's own override
CONFIG_SET, CONFIG_DELETE = 0, 1  # IncrementalAlterConfigs operations
DEFAULT_REPLICATION_FROM = 4  # CreateTopics takes replication_factor -1 (the broker's default) from v4 (KIP-464)
ADMIN_CLIENT_ID = "strait-admin"
ACL_VERSION = 1  # the highest DescribeAcls/CreateAcls/DeleteAcls version sent: v1 adds pattern types (KIP-290)
# The SCRAM mechanisms' wire codes (Kafka's ``ScramMechanism.type``; 0 is UNKNOWN).
SCRAM_MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_SCRAM_MECHANISM_NAMES = {code: name for name, code in SCRAM_MECHANISM_CODES.items()}


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    log_start_offset: Offset = NO_OFFSET
    high_watermark: Offset = NO_OFFSET


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: list[PartitionDescription]
    configs: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # name -> (value, source)


_SOURCES = {1: "topic", 2: "dynamic-broker", 3: "dynamic-default", 4: "server.properties", 5: "default"}


class AdminClient:
    """Topic administration through ``route`` (a ``NodeRoute`` or a ``SiteClient``)."""

    def __init__(self, route: Route) -> None:
        self.route = route

    @classmethod
    async def connect(cls, bootstrap: str, *, timeout: float = 10.0) -> AdminClient:
        """An admin client on the first node of ``bootstrap`` ("h:p,h:p") that answers; ``aclose``
        closes that connection. Raises ClientError naming the last address tried."""
        last: ClientError | None = None
        for address in bootstrap.split(","):
            try:
                conn = await NodeConnection.open(address.strip(), client_id=ADMIN_CLIENT_ID, timeout=timeout)
            except ClientError as exc:
                last = exc
                continue
            return cls(NodeRoute(conn))
        raise last or ClientError(f"no broker address in {bootstrap!r}")

    async def aclose(self) -> None:
        """Close the connections of a route this client opened (``connect``); a site stays open."""
        if isinstance(self.route, NodeRoute):
            await self.route.aclose()
            await self.route.conn.aclose()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- topics --------------------------------------------------------------------------------

    async def create_topic(
        self, name: str, partitions: int = -1, replication_factor: int = -1, configs: dict[str, str] | None = None
    ) -> int:
        """Create ``name``; -1 takes the broker's ``num.partitions`` / ``default.replication.factor``.

        Returns the replication factor asked for: the default (-1) needs CreateTopics v4, so
        below v4 it asks for min(3, known brokers) where the route knows them. Raises ClientError
        (its ``code`` TOPIC_ALREADY_EXISTS when it does).
        """
        replication = replication_factor

        def body(version: int) -> dict[str, Any]:
            nonlocal replication
            known = self.route.known_brokers()
            if replication_factor == -1 and version < DEFAULT_REPLICATION_FROM and known:
                replication = min(3, known)
            return {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in sorted((configs or {}).items())],
                    }
                ],
                "timeout_ms": int(self.route.timeout * 1000),
                "validate_only": False,
            }

        response = await self.route.on_admin(ApiKey.CREATE_TOPICS, 4, body)
        result = response.topics[0]
        if result.error_code:
            raise ClientError.from_code(
                result.error_code, f"creating topic {name!r}{self.route.where}", result.error_message
            )
        return replication

    async def delete_topic(self, name: str) -> None:
        response = await self.route.on_admin(
            ApiKey.DELETE_TOPICS, 3, lambda _v: {"topic_names": [name], "timeout_ms": int(self.route.timeout * 1000)}
        )
        result = response.responses[0]
        if result.error_code:
            raise ClientError.from_code(result.error_code, f"deleting topic {name!r}{self.route.where}")

    async def create_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` to ``count`` partitions (placed by the cluster). Raises ClientError."""
        response = await self.route.on_admin(
            ApiKey.CREATE_PARTITIONS,
            1,
            lambda _v: {
                "topics": [{"name": name, "count": count, "assignments": None}],
                "timeout_ms": int(self.route.timeout * 1000),
                "validate_only": False,
            },
        )
        result = response.results[0]
        if result.error_code:
            raise ClientError.from_code(
                result.error_code,
                f"growing topic {name!r} to {count} partitions{self.route.where}",
                result.error_message,
            )

    async def list_topics(self) -> list[str]:
        response = await self.route.on_admin(ApiKey.METADATA, 8, _metadata_body(None))
        return sorted(t.name for t in response.topics if t.error_code == 0)

    async def describe_topic(self, name: str) -> TopicDescription:
        """Partitions (leader, replicas, ISR, log start, high watermark) and every config with its source."""
        response = await self.route.on_admin(ApiKey.METADATA, 8, _metadata_body([name]))
        topic = response.topics[0]
        if topic.error_code:
            raise ClientError.from_code(topic.error_code, f"describing topic {name!r}{self.route.where}")
        indexes = [p.partition_index for p in topic.partitions]
        starts = await self.list_offsets(name, indexes, EARLIEST, strict=False)
        ends = await self.list_offsets(name, indexes, LATEST, strict=False)
        partitions = [
            PartitionDescription(
                p.partition_index,
                p.leader_id,
                list(p.replica_nodes),
                list(p.isr_nodes),
                starts[p.partition_index],
                ends[p.partition_index],
            )
            for p in sorted(topic.partitions, key=lambda p: p.partition_index)
        ]
        found = (await self._describe_configs([name])).get(name)
        if found is None:
            raise ClientError(f"describing configs of {name!r}{self.route.where}: no answer for it")
        if isinstance(found, ClientError):
            raise found
        configs = {c.name: (c.value, _SOURCES.get(c.config_source, "?")) for c in found}
        return TopicDescription(name, partitions, configs)

    async def list_offsets(
        self, topic: str, partitions: list[int], timestamp: int, *, strict: bool = True
    ) -> dict[int, Offset]:
        """Each partition's offset at a ListOffsets target: EARLIEST (-2), LATEST (-1) or a time in ms.

        A partition error raises ClientError, or gives -1 when ``strict`` is False.
        """
        return await list_offsets(self.route, topic, partitions, timestamp, strict=strict)

    # -- configs -------------------------------------------------------------------------------

    async def topic_overrides(self, topics: list[str]) -> dict[str, dict[str, str] | ClientError]:
        """Each topic's own config overrides (DescribeConfigs source 1), or the error for that topic."""
        described = await self._describe_configs(topics)
        return {
            name: (
                found
                if isinstance(found, ClientError)
                else {c.name: c.value for c in found if c.config_source == DYNAMIC_TOPIC_CONFIG and c.value is not None}
            )
            for name, found in described.items()
        }

    async def alter_topic_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> None:
        """IncrementalAlterConfigs: set ``set_`` and remove ``delete`` from the topic's overrides."""
        ops = [{"name": k, "config_operation": CONFIG_SET, "value": v} for k, v in sorted(set_.items())]
        ops += [{"name": k, "config_operation": CONFIG_DELETE, "value": None} for k in sorted(delete)]
        response = await self.route.on_admin(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            0,
            lambda _v: {
                "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": ops}],
                "validate_only": False,
            },
        )
        result = response.responses[0]
        if result.error_code:
            raise ClientError.from_code(
                result.error_code, f"altering the configs of {name!r}{self.route.where}", result.error_message
            )

    # -- truncation ----------------------------------------------------------------------------

    async def truncate_partitions(
        self, cuts: Mapping[tuple[str, int], int], *, timeout: float = 60.0
    ) -> dict[tuple[str, int], TruncationResult]:
        """Truncate each ``(topic, partition)`` to its offset (the cut), also below the high
        watermark, and wait (at most ``timeout`` seconds in all) until each is led at the new
        epoch, its log ends at the cut and its ISR holds every live replica again.

        The topics must be fenced (``strait.fenced``) or mirrors. Per-partition results, never
        raised (see ``node.client._truncate.truncate_partitions`` for the codes); idempotent: a
        partition already at its cut answers success without a second epoch bump. Raises
        ClientError only when no controller answers.
        """
        return await _truncate_partitions(self.route, cuts, timeout)

    # -- ACLs ----------------------------------------------------------------------------------

    async def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACL bindings ``acl_filter`` selects, sorted.

        Raises ClientError with the node's code (SECURITY_DISABLED without an authorizer,
        CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster), and before sending when the
        node speaks only v0 and the filter is about other than LITERAL patterns.
        """
        what = f"describing ACLs{self.route.where}"
        response = await self.route.on_admin(
            ApiKey.DESCRIBE_ACLS, ACL_VERSION, lambda v: _filter_body(acl_filter, v, what)
        )
        if response.error_code:
            raise ClientError.from_code(response.error_code, what, response.error_message)
        return sorted(
            AclBinding(
                ResourcePattern(ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type)),
                AccessControlEntry(
                    a.principal, a.host, AclOperation(a.operation), AclPermissionType(a.permission_type)
                ),
            )
            for r in response.resources
            for a in r.acls
        )

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Store ``bindings`` (nothing is sent for none). The node checks each on its own and
        stores the valid ones; raises ClientError naming the first binding it refused and the
        code (INVALID_REQUEST with the node's reason, CLUSTER_AUTHORIZATION_FAILED without ALTER
        on the cluster, SECURITY_DISABLED), or before sending a PREFIXED binding to a v0 node.
        """
        wanted = list(bindings)
        if not wanted:
            return

        def body(version: int) -> dict[str, Any]:
            creations = []
            for binding in wanted:
                pattern, entry = binding.pattern, binding.entry
                _check_expressible(pattern.pattern_type, version, f"creating ACL {describe_binding(binding)}")
                creations.append(
                    {
                        "resource_type": pattern.resource_type,
                        "resource_name": pattern.name,
                        "resource_pattern_type": pattern.pattern_type,
                        "principal": entry.principal,
                        "host": entry.host,
                        "operation": entry.operation,
                        "permission_type": entry.permission,
                    }
                )
            return {"creations": creations}

        response = await self.route.on_admin(ApiKey.CREATE_ACLS, ACL_VERSION, body)
        if len(response.results) != len(wanted):
            raise ClientError(
                f"creating ACLs{self.route.where}: {len(response.results)} results for {len(wanted)} ACLs"
            )
        for binding, result in zip(wanted, response.results, strict=True):
            if result.error_code:
                raise ClientError.from_code(
                    result.error_code,
                    f"creating ACL {describe_binding(binding)}{self.route.where}",
                    result.error_message,
                )

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter selects, filter by filter: the bindings each removed, in the
        filters' order (a binding two filters select is reported by the first). Raises ClientError
        naming the first filter the node refused and the code; the filters before it took effect.
        """
        wanted = list(filters)
        if not wanted:
            return []

        def body(version: int) -> dict[str, Any]:
            what = f"deleting ACLs{self.route.where}"
            return {"filters": [_filter_body(f, version, what) for f in wanted]}

        response = await self.route.on_admin(ApiKey.DELETE_ACLS, ACL_VERSION, body)
        if len(response.filter_results) != len(wanted):
            raise ClientError(
                f"deleting ACLs{self.route.where}: {len(response.filter_results)} results for {len(wanted)} filters"
            )
        removed: list[list[AclBinding]] = []
        for acl_filter, result in zip(wanted, response.filter_results, strict=True):
            what = f"deleting the ACLs matching {describe_filter(acl_filter)}{self.route.where}"
            if result.error_code:
                raise ClientError.from_code(result.error_code, what, result.error_message)
            matched = []
            for m in result.matching_acls:
                binding = AclBinding(
                    ResourcePattern(ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type)),
                    AccessControlEntry(
                        m.principal, m.host, AclOperation(m.operation), AclPermissionType(m.permission_type)
                    ),
                )
                if m.error_code:
                    raise ClientError.from_code(m.error_code, f"{what}: {describe_binding(binding)}", m.error_message)
                matched.append(binding)
            removed.append(matched)
        return removed

    # -- SCRAM credentials ---------------------------------------------------------------------

    async def describe_scram(self, users: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """user -> mechanism name -> iterations, of ``users`` (None or none: every user holding a
        credential). Raises ClientError with the node's code, or naming the first named user the
        node answered with an error (RESOURCE_NOT_FOUND: that user has no credential)."""
        named = None if users is None else [{"name": user} for user in users]
        what = f"describing SCRAM credentials{self.route.where}"
        response = await self.route.on_admin(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, lambda _v: {"users": named or None}
        )
        if response.error_code:
            raise ClientError.from_code(response.error_code, what, response.error_message)
        found: dict[str, dict[str, int]] = {}
        for result in response.results:
            if result.error_code:
                raise ClientError.from_code(
                    result.error_code,
                    f"describing the SCRAM credentials of user {result.user!r}{self.route.where}",
                    result.error_message,
                )
            found[result.user] = {
                _SCRAM_MECHANISM_NAMES.get(info.mechanism, f"mechanism {info.mechanism}"): info.iterations
                for info in result.credential_infos
            }
        return found

    async def alter_scram(
        self,
        upserts: Iterable[tuple[str, str, str, int]] = (),
        deletions: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Set the credentials ``(user, mechanism, password, iterations)`` and delete the
        credentials ``(user, mechanism)``; mechanisms by name ("SCRAM-SHA-256", "SCRAM-SHA-512").

        Each password is salted here with SALT_SIZE fresh random bytes; only the salt and
        Hi(password, salt, iterations) are sent. The node applies each user's changes whole or
        not at all. Raises ValueError (nothing sent) for an unknown mechanism or iterations
        outside 4096..16384; ClientError naming the first user the node refused and the code
        (RESOURCE_NOT_FOUND: a deleted credential did not exist; DUPLICATE_RESOURCE: a user's
        mechanism named twice; UNACCEPTABLE_CREDENTIAL), the other users' changes made.
        """
        upsertions = []
        for user, mechanism_name, password, iterations in upserts:
            mechanism = ScramMechanism.from_name(mechanism_name)
            if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
                raise ValueError(
                    f"SCRAM iterations {iterations} for user {user!r} is outside {MIN_ITERATIONS}..{MAX_ITERATIONS}"
                )
            salt = secrets.token_bytes(SALT_SIZE)
            upsertions.append(
                {
                    "name": user,
                    "mechanism": SCRAM_MECHANISM_CODES[mechanism.mechanism_name],
                    "iterations": iterations,
                    "salt": salt,
                    "salted_password": mechanism.salted_password(password, salt, iterations),
                }
            )
        removals = [
            {"name": user, "mechanism": SCRAM_MECHANISM_CODES[ScramMechanism.from_name(name).mechanism_name]}
            for user, name in deletions
        ]
        if not upsertions and not removals:
            return
        response = await self.route.on_admin(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, lambda _v: {"deletions": removals, "upsertions": upsertions}
        )
        for result in response.results:
            if result.error_code:
                raise ClientError.from_code(
                    result.error_code,
                    f"altering the SCRAM credentials of user {result.user!r}{self.route.where}",
                    result.error_message,
                )

    # -- client quotas -------------------------------------------------------------------------

    async def describe_quotas(
        self, components: Iterable[tuple[str, int, str | None]] = (), *, strict: bool = False
    ) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
        """DescribeClientQuotas: ``(entity, key -> value)`` of every entity the filter selects; a
        component is ``(entity type, match type, match)`` (0 exact, 1 default, 2 any), an entity a
        list of ``(type, name)`` with None for a default. Raises ClientError with the node's code."""
        wanted = [{"entity_type": t, "match_type": m, "match": name} for t, m, name in components]
        response = await self.route.on_admin(
            ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, lambda _v: {"components": wanted, "strict": strict}
        )
        if response.error_code:
            raise ClientError.from_code(
                response.error_code, f"describing client quotas{self.route.where}", response.error_message
            )
        return [
            (
                [(e.entity_type, e.entity_name) for e in entry.entity],
                {value.key: value.value for value in entry.values},
            )
            for entry in response.entries or ()
        ]

    async def alter_quotas(
        self,
        entity: Iterable[tuple[str, str | None]],
        changes: Mapping[str, float | None],
        *,
        validate_only: bool = False,
    ) -> None:
        """AlterClientQuotas of one entity: set each key to its value, or remove it (None). Raises
        ClientError with the node's code and message (INVALID_REQUEST names a bad key or value)."""
        named = [{"entity_type": t, "entity_name": name} for t, name in entity]
        ops = [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in changes.items()]
        body = {"entries": [{"entity": named, "ops": ops}], "validate_only": validate_only}
        response = await self.route.on_admin(ApiKey.ALTER_CLIENT_QUOTAS, 1, lambda _v: body)
        for entry in response.entries:
            if entry.error_code:
                raise ClientError.from_code(
                    entry.error_code, f"altering client quotas{self.route.where}", entry.error_message
                )

    async def _describe_configs(self, topics: list[str]) -> dict[str, list[Any] | ClientError]:
        """DescribeConfigs of ``topics`` (no synonyms): each topic's config entries, or its error."""
        if not topics:
            return {}
        response = await self.route.on_admin(
            ApiKey.DESCRIBE_CONFIGS,
            1,
            lambda _v: {
                "resources": [
                    {"resource_type": TOPIC_RESOURCE, "resource_name": t, "configuration_keys": None} for t in topics
                ],
                "include_synonyms": False,
            },
        )
        out: dict[str, list[Any] | ClientError] = {}
        for result in response.results:
            if result.error_code:
                out[result.resource_name] = ClientError.from_code(
                    result.error_code,
                    f"describing configs of {result.resource_name!r}{self.route.where}",
                    result.error_message,
                )
            else:
                out[result.resource_name] = list(result.configs)
        return out


def describe_binding(binding: AclBinding) -> str:
    """One line for people: ``ALLOW User:alice WRITE on TOPIC 'orders' (LITERAL) from host *``."""
    pattern, entry = binding.pattern, binding.entry
    return (
        f"{entry.permission.name} {entry.principal} {entry.operation.name} on "
        f"{pattern.resource_type.name} {pattern.name!r} ({pattern.pattern_type.name}) from host {entry.host}"
    )


def describe_filter(acl_filter: AclBindingFilter) -> str:
    """One line for people; ANY and absent values read "any"."""
    pattern, entry = acl_filter.pattern, acl_filter.entry

    def shown(value: str | None) -> str:
        return "any" if value is None else repr(value)

    return (
        f"{entry.permission.name} {shown(entry.principal)} {entry.operation.name} on "
        f"{pattern.resource_type.name} {shown(pattern.name)} ({pattern.pattern_type.name}) "
        f"from host {shown(entry.host)}"
    )


def _check_expressible(pattern_type: PatternType, version: int, what: str) -> None:
    """v0 of the ACL APIs has no pattern type: every pattern is LITERAL (ANY filters read as LITERAL)."""
    if version == 0 and pattern_type not in (PatternType.LITERAL, PatternType.ANY):
        raise ClientError(
            f"{what}: the node speaks ACL APIs v0 only, which know LITERAL patterns only (not {pattern_type.name})",
            ErrorCode.UNSUPPORTED_VERSION,
        )


def _filter_body(acl_filter: AclBindingFilter, version: int, what: str) -> dict[str, Any]:
    """A DescribeAcls request body, also one DeleteAcls filter."""
    pattern, entry = acl_filter.pattern, acl_filter.entry
    _check_expressible(pattern.pattern_type, version, what)
    return {
        "resource_type_filter": pattern.resource_type,
        "resource_name_filter": pattern.name,
        "pattern_type_filter": pattern.pattern_type,
        "principal_filter": entry.principal,
        "host_filter": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission,
    }


def _metadata_body(topics: list[str] | None) -> MakeBody:
    return lambda _v: {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
    }


async def ensure_topic(
    site: SiteClient, name: str, *, partitions: int = 1, configs: dict[str, str] | None = None, wait_s: float = 10.0
) -> bool:
    """Create ``name`` with ``configs`` when the site lacks it (default replication factor), then
    wait until its partitions have leaders. Returns True when this call created it. Raises
    ClientError (also after ``wait_s`` seconds without leaders)."""
    meta = site.topics.get(name)
    if meta is not None and meta.partitions and all(p.leader >= 0 for p in meta.partitions.values()):
        return False
    fresh = await site.refresh([name])
    created = False
    if name not in fresh:
        try:
            await AdminClient(site).create_topic(name, partitions, configs=dict(configs or {}))
            created = True
        except ClientError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
    with trio.move_on_after(wait_s):
        while True:
            meta = (await site.refresh([name])).get(name)
            if meta is not None and meta.partitions and all(p.leader >= 0 for p in meta.partitions.values()):
                return created
            await trio.sleep(0.1)
    raise ClientError(
        f"site {site.name}: topic {name!r} has no leader after {wait_s} s", ErrorCode.LEADER_NOT_AVAILABLE
    )
