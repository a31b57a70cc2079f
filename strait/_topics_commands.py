"""``strait topics create|list|describe|delete``: topic admin over the Kafka protocol.

Any Kafka admin client works against strait as well; these are conveniences that need
nothing but strait installed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
import trio

T = TypeVar("T")

bootstrap_option = click.option(
    "--bootstrap-server",
    "-b",
    "bootstrap",
    default="127.0.0.1:9092",
    show_default=True,
    envvar="STRAIT_BOOTSTRAP",
    help="host:port[,host:port] of any node (env STRAIT_BOOTSTRAP).",
)


def run_client(fn: Callable[[], Awaitable[T]]) -> T:
    from node.client import ClientError

    try:
        return trio.run(fn)
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None


def _parse_configs(values: tuple[str, ...]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="--config")
        configs[key] = value
    return configs


@click.group("topics", help="Create, list, describe and delete topics.")
def topics_group() -> None:
    pass


@topics_group.command("create")
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(min=1), help="Default: the broker's num.partitions.")
@click.option("--replication-factor", "-r", type=click.IntRange(min=1), help="Default: default.replication.factor.")
@click.option("--config", "-c", "configs", multiple=True, help="Topic config key=value (repeatable).")
@bootstrap_option
def create(
    name: str, partitions: int | None, replication_factor: int | None, configs: tuple[str, ...], bootstrap: str
) -> None:
    from node.client import AdminClient

    parsed = _parse_configs(configs)

    async def go() -> None:
        async with await AdminClient.connect(bootstrap) as admin:
            await admin.create_topic(name, partitions or -1, replication_factor or -1, parsed)

    run_client(go)
    click.echo(f"created topic {name}")


@topics_group.command("list")
@bootstrap_option
def list_(bootstrap: str) -> None:
    from node.client import AdminClient

    async def go() -> list[str]:
        async with await AdminClient.connect(bootstrap) as admin:
            return await admin.list_topics()

    for name in run_client(go):
        click.echo(name)


@topics_group.command("describe")
@click.argument("name")
@click.option("--all-configs", is_flag=True, help="Show every config, not only the topic's overrides.")
@bootstrap_option
def describe(name: str, all_configs: bool, bootstrap: str) -> None:
    from rich.console import Console
    from rich.table import Table

    from node.client import AdminClient, TopicDescription

    async def go() -> TopicDescription:
        async with await AdminClient.connect(bootstrap) as admin:
            return await admin.describe_topic(name)

    topic = run_client(go)
    console = Console()
    table = Table(title=f"topic {topic.name}")
    for column in ("partition", "leader", "replicas", "isr", "log start", "high watermark"):
        table.add_column(column, justify="right")
    for p in topic.partitions:
        table.add_row(
            str(p.partition),
            str(p.leader),
            ",".join(map(str, p.replicas)),
            ",".join(map(str, p.isr)),
            str(p.log_start_offset),
            str(p.high_watermark),
        )
    console.print(table)
    shown = {k: v for k, v in topic.configs.items() if all_configs or v[1] == "topic"}
    if shown:
        configs = Table(title="configs")
        configs.add_column("name")
        configs.add_column("value")
        configs.add_column("source")
        for key, (value, source) in sorted(shown.items()):
            configs.add_row(key, "" if value is None else value, source)
        console.print(configs)


@topics_group.command("delete")
@click.argument("name")
@bootstrap_option
def delete(name: str, bootstrap: str) -> None:
    from node.client import AdminClient

    async def go() -> None:
        async with await AdminClient.connect(bootstrap) as admin:
            await admin.delete_topic(name)

    run_client(go)
    click.echo(f"deleted topic {name}")
