"""``strait acls add|list|remove``: a site's ACLs over the Kafka protocol, in the shape of Kafka's
``kafka-acls.sh`` (``strait users``, the SCRAM credentials, is ``_users_commands``).

Every command reaches one node with ``--bootstrap-server`` (a PLAINTEXT listener), or a secured
listener with ``--command-config``: a Kafka client properties file as ``kafka-acls.sh`` takes it
(``security.protocol``, PEM ``ssl.truststore.location`` / ``ssl.keystore.location``,
``sasl.mechanism``, ``sasl.jaas.config``). The principal the node sees must be a super user or hold
ALTER (to change) or DESCRIBE (to list) on the cluster.

Where strait's commands differ from Kafka's, they refuse what is easy to get wrong:

- ``acls add`` needs the operations (``--operation``, ``--producer`` or ``--consumer``); Kafka
  would grant ``All`` when they are left out.
- A principal is ``User:name`` (``User:*``: every user): strait's listeners give no other type,
  so an ACL for another type would never match.
- ``acls remove`` asks nothing and prints what it removed. Left-out principals, hosts and
  operations select any; the resources are required.
- ``users add-scram`` reads the password from a file or stdin, never from the command line.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ._command_config import client_security, connect, connection_options, echo_table
from ._topics_commands import run_client

if TYPE_CHECKING:
    from node.security._acl import AclBinding

F = TypeVar("F", bound=Callable[..., Any])

# Kafka's operation names (``AclOperation``'s javadoc spelling), which --operation takes in any case.
# fmt: off
OPERATIONS = (
    "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs", "AlterConfigs",
    "IdempotentWrite", "All",
)
# What each resource type supports (Kafka's ``AclCommand.ResourceTypeToValidOperations``).
VALID_OPERATIONS = {
    "TOPIC": {"Read", "Write", "Create", "Delete", "Alter", "Describe", "DescribeConfigs", "AlterConfigs", "All"},
    "GROUP": {"Read", "Describe", "Delete", "All"},
    "CLUSTER": {"Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "Alter", "Describe",
                "All"},
    "TRANSACTIONAL_ID": {"Describe", "Write", "All"},
}
# fmt: on
CLUSTER_NAME = "kafka-cluster"  # the one name of the cluster resource
PRODUCER_TOPIC_OPERATIONS = ("Write", "Describe", "Create")
CONSUMER_TOPIC_OPERATIONS = ("Read", "Describe")


def _check_principals(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        kind, _, name = value.partition(":")
        if kind != "User" or not name:
            raise click.BadParameter(f"{value!r} is not a principal User:name (User:alice; User:* for every user)")
    return values


def _check_hosts(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        if value != "*":
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise click.BadParameter(
                    f"{value!r} is neither '*' nor an IP address (ACL hosts match the client's address)"
                ) from None
    return values


class OperationName(click.ParamType[str]):
    """One of Kafka's operation names, in any case; the refusal lists them as Kafka spells them."""

    name = "operation"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        for operation in OPERATIONS:
            if operation.lower() == str(value).lower():
                return operation
        self.fail(f"{value!r} is not an operation; Kafka's operations are {', '.join(OPERATIONS)}", param, ctx)


def _entry_options(fn: F) -> F:
    for option in reversed(
        [
            click.option(
                "--allow-principal", multiple=True, callback=_check_principals, help="User:name (repeatable)."
            ),
            click.option("--deny-principal", multiple=True, callback=_check_principals, help="User:name (repeatable)."),
            click.option("--allow-host", multiple=True, callback=_check_hosts, help="IP address or * (repeatable)."),
            click.option("--deny-host", multiple=True, callback=_check_hosts, help="IP address or * (repeatable)."),
            click.option(
                "--operation",
                "operations",
                multiple=True,
                type=OperationName(),
                metavar="NAME",
                help=f"Kafka's operation name, any case (repeatable): {', '.join(OPERATIONS)}.",
            ),
            click.option(
                "--producer", is_flag=True, help="Write, Describe, Create on the topics (and --transactional-id)."
            ),
            click.option("--consumer", is_flag=True, help="Read, Describe on the topics; Read on the groups."),
            click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster."),
        ]
    ):
        fn = option(fn)
    return fn


def _resource_options(pattern_types: tuple[str, ...], default: str) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        for option in reversed(
            [
                click.option("--topic", "topics", multiple=True, help="Topic name; * for every topic (repeatable)."),
                click.option(
                    "--group", "groups", multiple=True, help="Consumer group; * for every group (repeatable)."
                ),
                click.option("--cluster", is_flag=True, help="The cluster resource."),
                click.option("--transactional-id", "transactional_ids", multiple=True, help="(Repeatable.)"),
                click.option(
                    "--resource-pattern-type",
                    "pattern_type",
                    type=click.Choice(pattern_types, case_sensitive=False),
                    default=default,
                    show_default=True,
                    help="How names match: literal (the name, or *), prefixed (names starting with it)"
                    + (
                        "; any (both), match (every ACL that applies to the name)." if "match" in pattern_types else "."
                    ),
                ),
            ]
        ):
            fn = option(fn)
        return fn

    return decorate


def named_resources(
    topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool, transactional_ids: tuple[str, ...]
) -> list[tuple[str, str]]:
    """(resource type, name) of each resource option given."""
    return (
        [("TOPIC", t) for t in topics]
        + [("GROUP", g) for g in groups]
        + ([("CLUSTER", CLUSTER_NAME)] if cluster else [])
        + [("TRANSACTIONAL_ID", t) for t in transactional_ids]
    )


@dataclass(frozen=True)
class AclOptions:
    """The options ``acls add`` and ``acls remove`` share, and the ACLs they name."""

    allow_principal: tuple[str, ...]
    deny_principal: tuple[str, ...]
    allow_host: tuple[str, ...]
    deny_host: tuple[str, ...]
    operations: tuple[str, ...]
    producer: bool
    consumer: bool
    idempotent: bool
    topics: tuple[str, ...]
    groups: tuple[str, ...]
    cluster: bool
    transactional_ids: tuple[str, ...]
    pattern_type: str

    def resources(self) -> list[tuple[str, str]]:
        """(resource type, name) of each resource given; UsageError when there is none."""
        named = named_resources(self.topics, self.groups, self.cluster, self.transactional_ids)
        if not named:
            raise click.UsageError("name a resource: --topic, --group, --cluster or --transactional-id")
        return named

    def targets(self) -> list[tuple[str, str, str | None]]:
        """(resource type, name, operation; None: any) each ACL is about, paired as kafka-acls
        pairs them. Raises UsageError for what it refuses."""
        resources = self.resources()
        if self.idempotent and not self.producer:
            raise click.UsageError("--idempotent goes with --producer")
        if not (self.producer or self.consumer):
            for kind, name in resources:
                invalid = [op for op in self.operations if op not in VALID_OPERATIONS[kind]]
                if invalid:
                    valid = ", ".join(sorted(VALID_OPERATIONS[kind]))
                    raise click.UsageError(
                        f"operation {invalid[0]} does not apply to {kind} {name!r}; it takes {valid}"
                    )
            return [(kind, name, op) for kind, name in resources for op in (self.operations or (None,))]
        refusals = [
            (bool(self.operations), "--operation cannot be combined with --producer or --consumer"),
            (not self.topics, "--producer and --consumer need --topic"),
            (self.consumer and not self.groups, "--consumer needs --group"),
            (bool(self.groups) and not self.consumer, "--group goes with --consumer or --operation"),
            (bool(self.transactional_ids) and not self.producer, "--transactional-id goes with --producer"),
            (self.cluster, "--cluster goes with --operation (--producer --idempotent adds IdempotentWrite)"),
        ]
        for refused, message in refusals:
            if refused:
                raise click.UsageError(message)
        wanted: list[tuple[str, str, str | None]] = []
        if self.producer:
            wanted += [("TOPIC", t, op) for t in self.topics for op in PRODUCER_TOPIC_OPERATIONS]
            wanted += [("TRANSACTIONAL_ID", t, op) for t in self.transactional_ids for op in ("Write", "Describe")]
            wanted += [("CLUSTER", CLUSTER_NAME, "IdempotentWrite")] if self.idempotent else []
        if self.consumer:
            wanted += [("TOPIC", t, op) for t in self.topics for op in CONSUMER_TOPIC_OPERATIONS]
            wanted += [("GROUP", g, "Read") for g in self.groups]
        return list(dict.fromkeys(wanted))

    def entries(self, *, default_host: str | None) -> list[tuple[str, str | None, str]]:
        """(principal, host, permission) of each principal and host given; a principal without
        hosts gets ``default_host``."""
        if self.allow_host and not self.allow_principal:
            raise click.UsageError("--allow-host needs --allow-principal")
        if self.deny_host and not self.deny_principal:
            raise click.UsageError("--deny-host needs --deny-principal")
        return [(p, h, "ALLOW") for p in self.allow_principal for h in (self.allow_host or (default_host,))] + [
            (p, h, "DENY") for p in self.deny_principal for h in (self.deny_host or (default_host,))
        ]


def _operation(name: str) -> Any:
    """``ClusterAction`` -> ``AclOperation.CLUSTER_ACTION``."""
    from node.security._acl import AclOperation

    return AclOperation[re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()]


def _pattern_type(kind: str, pattern_type: str) -> Any:
    """The cluster has one name: its ACLs are LITERAL whatever the option says (as kafka-acls does)."""
    from node.security._acl import PatternType

    if kind == "CLUSTER" and pattern_type.upper() == "PREFIXED":
        return PatternType.LITERAL
    return PatternType[pattern_type.upper()]


def binding_rows(bindings: Iterable[AclBinding]) -> list[dict[str, str]]:
    return [
        {
            "resource_type": b.pattern.resource_type.name,
            "name": b.pattern.name,
            "pattern_type": b.pattern.pattern_type.name,
            "principal": b.entry.principal,
            "host": b.entry.host,
            "operation": b.entry.operation.name,
            "permission": b.entry.permission.name,
        }
        for b in sorted(bindings)
    ]


def echo_bindings(bindings: list[AclBinding]) -> None:
    header = ("TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
    echo_table(header, (tuple(row.values()) for row in binding_rows(bindings)))


# -- acls -------------------------------------------------------------------------------------------------------------


@click.group("acls", help="Add, list and remove ACLs (the site's, stored in ZooKeeper; Kafka's kafka-acls.sh).")
def acls_group() -> None:
    pass


@acls_group.command("add")
@_entry_options
@_resource_options(("literal", "prefixed"), "literal")
@connection_options
def add(bootstrap: str, command_config: str | None, **options: Any) -> None:
    """Allow or deny principals operations on resources. For example:

    \b
    strait acls add --allow-principal User:alice --producer --topic orders
    strait acls add --deny-principal User:bob --operation Read --topic pay --resource-pattern-type prefixed
    """
    from node.security._acl import AccessControlEntry, AclBinding, AclPermissionType, ResourcePattern, ResourceType

    wanted = AclOptions(**options)
    targets = [(kind, name, op) for kind, name, op in wanted.targets() if op is not None]
    if not targets:
        raise click.UsageError("name the operations: --operation (repeatable), --producer or --consumer")
    who = wanted.entries(default_host="*")
    if not who:
        raise click.UsageError("name a principal: --allow-principal or --deny-principal")
    bindings = [
        AclBinding(
            ResourcePattern(ResourceType[kind], name, _pattern_type(kind, wanted.pattern_type)),
            AccessControlEntry(principal, host or "*", _operation(op), AclPermissionType[permission]),
        )
        for kind, name, op in targets
        for principal, host, permission in who
    ]
    security = client_security(command_config)

    async def go() -> None:
        async with connect(bootstrap, security) as admin:
            await admin.create_acls(bindings)

    run_client(go)
    click.echo(f"added {len(bindings)} ACL(s):")
    echo_bindings(bindings)


@acls_group.command("list")
@click.option("--principal", "principals", multiple=True, callback=_check_principals, help="Only these (repeatable).")
@_resource_options(("any", "match", "literal", "prefixed"), "any")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of ACLs instead of a table.")
@connection_options
def list_(
    principals: tuple[str, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    transactional_ids: tuple[str, ...],
    pattern_type: str,
    as_json: bool,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """The ACLs on the resources given (all when none is), of the principals given (all when none is)."""
    from node.security._acl import (
        AccessControlEntryFilter,
        AclBindingFilter,
        PatternType,
        ResourcePatternFilter,
        ResourceType,
    )

    named = named_resources(topics, groups, cluster, transactional_ids)
    patterns = [ResourcePatternFilter(ResourceType[k], n, _pattern_type(k, pattern_type)) for k, n in named] or [
        ResourcePatternFilter(pattern_type=PatternType[pattern_type.upper()])
    ]
    filters = [
        AclBindingFilter(pattern, AccessControlEntryFilter(principal))
        for pattern in patterns
        for principal in (principals or (None,))
    ]
    security = client_security(command_config)

    async def go() -> list[AclBinding]:
        found: set[AclBinding] = set()
        async with connect(bootstrap, security) as admin:
            for acl_filter in filters:
                found.update(await admin.describe_acls(acl_filter))
        return sorted(found)

    bindings = run_client(go)
    if as_json:
        click.echo(json.dumps(binding_rows(bindings), indent=2))
    elif bindings:
        echo_bindings(bindings)
    else:
        click.echo("no ACLs match")


@acls_group.command("remove")
@_entry_options
@_resource_options(("literal", "prefixed", "any", "match"), "literal")
@connection_options
def remove(bootstrap: str, command_config: str | None, **options: Any) -> None:
    """Remove the ACLs on the resources given that match the rest, and print them.

    Principals, hosts and operations left out match any: --topic orders alone removes every
    LITERAL ACL on orders.
    """
    from node.security._acl import (
        AccessControlEntryFilter,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternFilter,
        ResourceType,
    )

    wanted = AclOptions(**options)
    targets = wanted.targets()
    who: list[tuple[str | None, str | None, str]] = [*wanted.entries(default_host=None)] or [(None, None, "ANY")]
    filters = [
        AclBindingFilter(
            ResourcePatternFilter(ResourceType[kind], name, _pattern_type(kind, wanted.pattern_type)),
            AccessControlEntryFilter(
                principal, host, AclOperation.ANY if op is None else _operation(op), AclPermissionType[permission]
            ),
        )
        for kind, name, op in targets
        for principal, host, permission in who
    ]
    security = client_security(command_config)

    async def go() -> list[list[AclBinding]]:
        async with connect(bootstrap, security) as admin:
            return await admin.delete_acls(filters)

    removed = sorted({binding for found in run_client(go) for binding in found})
    if not removed:
        click.echo("no ACLs matched: nothing removed")
        return
    click.echo(f"removed {len(removed)} ACL(s):")
    echo_bindings(removed)


# -- users ------------------------------------------------------------------------------------------------------------
