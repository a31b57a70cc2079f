"""``strait groups list|describe|reset-offsets``: consumer groups over the Kafka protocol."""

from __future__ import annotations

import datetime

import click

from ._topics_commands import bootstrap_option, run_client

INACTIVE_STATES = ("Empty", "Dead")


@click.group("groups", help="List, describe and reset consumer groups.")
def groups_group() -> None:
    pass


@groups_group.command("list")
@bootstrap_option
def list_(bootstrap: str) -> None:
    from node.client import AdminClient, GroupAdmin

    async def go() -> list[tuple[str, str]]:
        async with await AdminClient.connect(bootstrap) as admin:
            groups = GroupAdmin(admin)
            try:
                return await groups.list_groups()
            finally:
                await groups.aclose()

    for group, protocol_type in run_client(go):
        click.echo(f"{group}\t{protocol_type}")


@groups_group.command("describe")
@click.argument("group")
@bootstrap_option
def describe(group: str, bootstrap: str) -> None:
    """Members, and per partition the committed offset, the log end and the lag."""
    from rich.console import Console
    from rich.table import Table

    from node.client import AdminClient, GroupAdmin, GroupDescription

    async def go() -> GroupDescription:
        async with await AdminClient.connect(bootstrap) as admin:
            groups = GroupAdmin(admin)
            try:
                return await groups.describe(group)
            finally:
                await groups.aclose()

    d = run_client(go)
    console = Console()
    console.print(f"group {d.group_id}: {d.state}, protocol {d.protocol_type or '-'}/{d.protocol or '-'}, lag {d.lag}")
    members = Table(title="members")
    for column in ("member id", "instance id", "client id", "host"):
        members.add_column(column)
    for m in d.members:
        members.add_row(m.member_id, m.group_instance_id or "", m.client_id, m.client_host)
    console.print(members)
    offsets = Table(title="offsets")
    for column in ("topic", "partition", "committed", "log end", "lag"):
        offsets.add_column(column, justify="right" if column != "topic" else "left")
    for (topic, partition), (committed, end) in sorted(d.offsets.items()):
        lag = max(0, end - committed) if end >= 0 else "?"
        offsets.add_row(topic, str(partition), str(committed), str(end), str(lag))
    console.print(offsets)


@groups_group.command("reset-offsets")
@click.argument("group")
@click.option("--topic", "-t", required=True, help="The topic whose committed offsets to move.")
@click.option("--to-earliest", "to", flag_value="earliest", help="The log start of each partition.")
@click.option("--to-latest", "to", flag_value="latest", help="The log end of each partition.")
@click.option("--to-datetime", "when", type=click.DateTime(), help="The first record at or after this time (UTC).")
@click.option("--to-offset", "offset", type=click.IntRange(min=0), help="This offset in every partition.")
@click.option("--dry-run", is_flag=True, help="Show the new offsets without committing them.")
@bootstrap_option
def reset_offsets(
    group: str,
    topic: str,
    to: str | None,
    when: datetime.datetime | None,
    offset: int | None,
    dry_run: bool,
    bootstrap: str,
) -> None:
    """Move a stopped group's committed offsets on one topic (refused while members are active)."""
    from node.client import AdminClient, ClientError, GroupAdmin
    from storage.records import Offset

    chosen = [x for x in (to, when, offset) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset")

    async def go() -> dict[tuple[str, int], tuple[int, Offset]]:
        async with await AdminClient.connect(bootstrap) as admin:
            groups = GroupAdmin(admin)
            try:
                d = await groups.describe(group)
                if d.state not in INACTIVE_STATES:
                    raise ClientError(
                        f"group {group!r} is {d.state} with {len(d.members)} active member(s): "
                        "stop its consumers before resetting offsets"
                    )
                topic_info = await admin.describe_topic(topic)
                partitions = [p.partition for p in topic_info.partitions]
                if to == "earliest":
                    targets = await admin.list_offsets(topic, partitions, -2)
                elif to == "latest":
                    targets = await admin.list_offsets(topic, partitions, -1)
                elif when is not None:
                    ts = int(when.replace(tzinfo=datetime.UTC).timestamp() * 1000)
                    found = await admin.list_offsets(topic, partitions, ts)
                    ends = await admin.list_offsets(topic, partitions, -1)
                    targets = {p: (o if o >= 0 else ends[p]) for p, o in found.items()}
                else:
                    assert offset is not None
                    ends = await admin.list_offsets(topic, partitions, -1)
                    starts = await admin.list_offsets(topic, partitions, -2)
                    targets = {p: min(max(Offset(offset), starts[p]), ends[p]) for p in partitions}
                plan = {(topic, p): (d.offsets.get((topic, p), (-1, -1))[0], o) for p, o in targets.items()}
                if not dry_run:
                    await groups.commit(group, {tp: new for tp, (_, new) in plan.items()})
                return plan
            finally:
                await groups.aclose()

    plan = run_client(go)
    for (t, p), (old, new) in sorted(plan.items()):
        click.echo(f"{t}\t{p}\t{old if old >= 0 else '-'} -> {new}")
    click.echo("dry run: nothing committed" if dry_run else f"committed new offsets for group {group}")
