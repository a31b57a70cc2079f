"""``strait acls add|list|remove`` and ``strait users add-scram|list|remove``: a site's ACLs and
SCRAM credentials over the Kafka protocol, in the shapes of Kafka's ``kafka-acls.sh`` and
``kafka-configs.sh --entity-type users``.

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

import contextlib
import ipaddress
import json
import re
import ssl
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ._topics_commands import bootstrap_option, run_client

if TYPE_CHECKING:
    from node.client import AdminClient
    from node.security._acl import AclBinding

F = TypeVar("F", bound=Callable[..., Any])

CLIENT_ID = "strait-admin"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# The command-config keys read here; any other is named on stderr and ignored, as Kafka's tools warn.
_KNOWN_KEYS = frozenset({
    "security.protocol", "ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location", "ssl.keystore.type",
    "ssl.key.password", "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.jaas.config",
})  # fmt: skip

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

# -- connections ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSecurity:
    """How to reach a secured listener, read from a ``--command-config`` file (``source``)."""

    source: str
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)


def load_command_config(path: str) -> ClientSecurity:
    """The security settings of the Kafka client properties file ``path``. Raises ClickException
    naming the file and the key that is wrong (never a password)."""
    from node.config import ConfigError, parse_properties

    try:
        props = parse_properties(Path(path).read_text(encoding="utf-8"), source=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read --command-config {path}: {exc}") from None
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    ignored = sorted(set(props) - _KNOWN_KEYS)
    if ignored:
        click.echo(f"{path}: ignoring {', '.join(ignored)} (not used by strait's commands)", err=True)
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise click.ClickException(
            f"{path}: security.protocol {props['security.protocol']!r} is not one of {', '.join(PROTOCOLS)}"
        )
    context = _ssl_context(props, path) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(path, protocol, context)
    mechanism = props.get("sasl.mechanism", "").strip().upper()
    if mechanism not in SASL_MECHANISMS:
        shown = repr(props["sasl.mechanism"]) if "sasl.mechanism" in props else "missing"
        raise click.ClickException(f"{path}: sasl.mechanism is {shown}; strait speaks {', '.join(SASL_MECHANISMS)}")
    username, password = _jaas_credentials(props, path)
    return ClientSecurity(path, protocol, context, mechanism, username, password)


def _ssl_context(props: dict[str, str], path: str) -> ssl.SSLContext:
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = props.get(key, "PEM").strip().upper()
        if kind != "PEM":
            raise click.ClickException(
                f"{path}: {key} {props[key]!r}: strait reads PEM files only "
                "(convert with keytool -importkeystore to PKCS12, then openssl pkcs12)"
            )
    truststore = props.get("ssl.truststore.location") or None
    keystore = props.get("ssl.keystore.location") or None
    try:
        context = ssl.create_default_context(cafile=truststore)
    except (OSError, ssl.SSLError) as exc:
        raise click.ClickException(f"{path}: ssl.truststore.location {truststore}: {exc}") from None
    if keystore is not None:
        try:
            context.load_cert_chain(keystore, password=props.get("ssl.key.password"))
        except (OSError, ssl.SSLError) as exc:
            raise click.ClickException(f"{path}: ssl.keystore.location {keystore}: {exc}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # Kafka's clients check the broker's host name unless this is set empty.
    context.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https").strip() != ""
    return context


def _jaas_credentials(props: dict[str, str], path: str) -> tuple[str, str]:
    from node.security._jaas import parse_jaas_config

    if "sasl.jaas.config" not in props:
        raise click.ClickException(f"{path}: sasl.jaas.config is missing (a login module with username and password)")
    try:
        entry = parse_jaas_config(props["sasl.jaas.config"])
    except ValueError as exc:
        raise click.ClickException(f"{path}: sasl.jaas.config: {exc}") from None
    if entry.username is None or entry.password is None:
        raise click.ClickException(f"{path}: sasl.jaas.config needs both username and password")
    return entry.username, entry.password


def _sasl_argument(security: ClientSecurity) -> dict[str, Any]:
    """``SiteClient``'s ``sasl`` keyword for ``security`` (empty without SASL); ClickException
    naming the file for settings the client refuses."""
    if security.sasl_mechanism is None:
        return {}
    from node.client import SaslCredentials

    assert security.sasl_username is not None and security.sasl_password is not None
    try:
        return {"sasl": SaslCredentials(security.sasl_mechanism, security.sasl_username, security.sasl_password)}
    except ValueError as exc:
        raise click.ClickException(f"{security.source}: sasl.mechanism: {exc}") from None


@contextlib.asynccontextmanager
async def connect(bootstrap: str, security: ClientSecurity | None) -> AsyncIterator[AdminClient]:
    """An admin client on ``bootstrap``: one node's connection over PLAINTEXT, else the site as
    seen through the secured listener. Raises ClientError or ClickException."""
    from node.client import AdminClient, SiteClient

    if security is None or security.protocol == "PLAINTEXT":
        async with await AdminClient.connect(bootstrap) as admin:
            yield admin
        return
    sasl = _sasl_argument(security)
    try:
        site = SiteClient(bootstrap, bootstrap, client_id=CLIENT_ID, ssl_context=security.ssl_context, **sasl)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield AdminClient(site)
    finally:
        await site.aclose()


def connection_options(fn: F) -> F:
    """``--bootstrap-server/-b`` and ``--command-config``."""
    command_config = click.option(
        "--command-config",
        type=click.Path(exists=True, dir_okay=False),
        help="Kafka client properties for a secured listener: security.protocol, ssl.truststore.location and "
        "ssl.keystore.location (PEM), sasl.mechanism, sasl.jaas.config (username, password).",
    )
    return bootstrap_option(command_config(fn))


def _security(command_config: str | None) -> ClientSecurity | None:
    return load_command_config(command_config) if command_config else None


# -- ACL options ------------------------------------------------------------------------------------------------------


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


def echo_table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> None:
    """Columns aligned by spaces, one line per row (no wrapping: greppable)."""
    lines = [header, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


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
    security = _security(command_config)

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
    security = _security(command_config)

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
    security = _security(command_config)

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


@click.group(
    "users", help="SCRAM credentials of users (the site's, in ZooKeeper; kafka-configs.sh --entity-type users)."
)
def users_group() -> None:
    pass


def _mechanism_option(help_: str) -> Callable[[F], F]:
    return click.option(
        "--mechanism",
        "mechanisms",
        multiple=True,
        required=True,
        type=click.Choice(SCRAM_MECHANISMS, case_sensitive=False),
        metavar="SCRAM-SHA-256|SCRAM-SHA-512",
        help=help_,
    )


def read_password(password_file: str | None, password_stdin: bool) -> str:
    """The password from its file or stdin (a terminal is prompted, twice), without the final
    line break. Raises UsageError unless exactly one source is given, ClickException when empty."""
    if (password_file is None) == (not password_stdin):
        raise click.UsageError("give the password with exactly one of --password-file PATH or --password-stdin")
    if password_file is not None:
        try:
            text = Path(password_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise click.ClickException(f"cannot read --password-file {password_file}: {exc}") from None
    elif sys.stdin.isatty():
        text = str(click.prompt("password", hide_input=True, confirmation_prompt=True))
    else:
        text = sys.stdin.read()
    password = text.removesuffix("\n").removesuffix("\r")
    if not password:
        raise click.ClickException("the password is empty")
    return password


@users_group.command("add-scram")
@click.argument("name")
@_mechanism_option("SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable: the same password for each).")
@click.option(
    "--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True, help="PBKDF2 iterations."
)
@click.option("--password-file", type=click.Path(exists=True, dir_okay=False), help="A file holding the password.")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin.")
@connection_options
def add_scram(
    name: str,
    mechanisms: tuple[str, ...],
    iterations: int,
    password_file: str | None,
    password_stdin: bool,
    bootstrap: str,
    command_config: str | None,
) -> None:
    """Create or replace user NAME's SCRAM credential(s). The password is salted here; the node
    gets the salt and the salted password only."""
    password = read_password(password_file, password_stdin)
    wanted = [m.upper() for m in dict.fromkeys(mechanisms)]
    security = _security(command_config)

    async def go() -> None:
        async with connect(bootstrap, security) as admin:
            await admin.alter_scram(upserts=[(name, mechanism, password, iterations) for mechanism in wanted])

    run_client(go)
    for mechanism in wanted:
        click.echo(f"set the {mechanism} credential of user {name} ({iterations} iterations)")


@users_group.command("list")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON object: user -> mechanism -> iterations.")
@connection_options
def list_users(names: tuple[str, ...], as_json: bool, bootstrap: str, command_config: str | None) -> None:
    """The users holding SCRAM credentials (those named, or all), with mechanisms and iterations."""
    security = _security(command_config)

    async def go() -> dict[str, dict[str, int]]:
        async with connect(bootstrap, security) as admin:
            return await admin.describe_scram(list(names) or None)

    found = run_client(go)
    if as_json:
        click.echo(json.dumps(found, indent=2, sort_keys=True))
    elif found:
        rows = [(user, m, str(n)) for user, infos in sorted(found.items()) for m, n in sorted(infos.items())]
        echo_table(("USER", "MECHANISM", "ITERATIONS"), rows)
    else:
        click.echo("no SCRAM users")


@users_group.command("remove")
@click.argument("name")
@_mechanism_option("The credential to delete (repeatable).")
@connection_options
def remove_user(name: str, mechanisms: tuple[str, ...], bootstrap: str, command_config: str | None) -> None:
    """Delete user NAME's SCRAM credential(s); a credential it does not have is an error."""
    wanted = [m.upper() for m in dict.fromkeys(mechanisms)]
    security = _security(command_config)

    async def go() -> None:
        async with connect(bootstrap, security) as admin:
            await admin.alter_scram(deletions=[(name, mechanism) for mechanism in wanted])

    run_client(go)
    for mechanism in wanted:
        click.echo(f"removed the {mechanism} credential of user {name}")
