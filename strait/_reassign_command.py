"""``strait topics reassign``: move partitions between brokers, Kafka's way.

Starting a reassignment writes ``/admin/reassign_partitions`` in the site's ZooKeeper; the
controller carries it out (new replicas catch up, leadership moves into the target, the old
replicas delete their logs) and removes each partition's entry when it is done. ``--verify``
reads that back; ``--generate`` proposes a plan. Nothing here talks to the brokers.

A site whose nodes secure their ZooKeeper (``zookeeper.set.acl``) lets anyone read but only its
credential write: ``--zookeeper-digest-file`` authenticates with it and creates the znode with
the site's secured ACL, as the nodes do. Without it, starting a reassignment there fails with
one line naming the option.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

if TYPE_CHECKING:
    from node.coordination import PartitionState, Reassignment, TopicAssignment, ZkState
    from node.ids import NodeId
    from node.zkkit import ZkDigest

    from ._reassignment_plan import Partitions

T = TypeVar("T")


@click.command("reassign")
@click.option(
    "--zookeeper",
    "-z",
    "connect",
    required=True,
    envvar="STRAIT_ZOOKEEPER",
    help="The site's ZooKeeper, host:port[,host:port][/chroot], as in the nodes' zookeeper.connect "
    "(env STRAIT_ZOOKEEPER).",
)
@click.option(
    "--zookeeper-digest-file",
    "digest_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="STRAIT_ZOOKEEPER_DIGEST_FILE",
    help="For a site that secures its ZooKeeper (zookeeper.set.acl=true): a file holding its credential, one line "
    "user:password, as the nodes' strait.zookeeper.digest.file (env STRAIT_ZOOKEEPER_DIGEST_FILE).",
)
@click.option(
    "--plan",
    "plan_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The plan, in kafka-reassign-partitions JSON (see docs/site.md).",
)
@click.option("--verify", is_flag=True, help="Report each partition of --plan: complete or in progress.")
@click.option(
    "--throttle",
    type=click.IntRange(min=1),
    metavar="BYTES_PER_S",
    help="Cap the replication traffic of the moving partitions (per follower).",
)
@click.option("--generate", is_flag=True, help="Print a plan that spreads --topics over --brokers.")
@click.option("--topics", "topic_list", metavar="T1,T2", help="With --generate: the topics to move.")
@click.option("--brokers", "broker_list", metavar="1,2,3", help="With --generate: the brokers to move them to.")
@click.option(
    "--zk-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to wait for a ZooKeeper session.",
)
def reassign(
    connect: str,
    digest_path: Path | None,
    plan_path: Path | None,
    verify: bool,
    throttle: int | None,
    generate: bool,
    topic_list: str | None,
    broker_list: str | None,
    zk_timeout: float,
) -> None:
    """Start a partition reassignment from --plan, check it with --plan --verify, or propose a
    plan with --generate --topics --brokers.

    --verify exits 0 when every partition of the plan is complete, 1 otherwise.
    """
    from ._reassignment_plan import PlanError, parse_broker_list, parse_plan, parse_topic_list

    if generate:
        if plan_path is not None or verify or throttle is not None:
            raise click.UsageError("--generate takes --topics and --brokers, not --plan, --verify or --throttle")
        if not topic_list or not broker_list:
            raise click.UsageError("--generate needs --topics T1,T2 and --brokers 1,2,3")
        try:
            topics, brokers = parse_topic_list(topic_list), parse_broker_list(broker_list)
        except PlanError as exc:
            raise click.UsageError(str(exc)) from None
        _run(connect, digest_path, zk_timeout, lambda zk: _generate(zk, topics, brokers))
        return
    if topic_list is not None or broker_list is not None:
        raise click.UsageError("--topics and --brokers go with --generate")
    if plan_path is None:
        raise click.UsageError("give --plan FILE (to start or, with --verify, check a reassignment) or --generate")
    if verify and throttle is not None:
        raise click.UsageError("--throttle applies when starting a reassignment, not with --verify")
    try:
        text = plan_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read plan {plan_path}: {exc}") from None
    try:
        plan = parse_plan(text, str(plan_path))
    except PlanError as exc:
        raise click.ClickException(str(exc)) from None
    if verify:
        if not _run(connect, digest_path, zk_timeout, lambda zk: _verify(zk, plan)):
            raise SystemExit(1)
    else:
        _run(connect, digest_path, zk_timeout, lambda zk: _execute(zk, plan, throttle))


def _run(connect: str, digest_path: Path | None, timeout_s: float, action: Callable[[ZkState], Awaitable[T]]) -> T:
    """Run ``action`` with a ZooKeeper session (authenticated with the credential in
    ``digest_path``, when given); every expected failure becomes a one-line error."""
    import trio
    from kazoo.exceptions import NoAuthError  # type: ignore[import-untyped]

    from node.coordination import CoordinationError, ZkState

    from ._reassignment_plan import PlanError

    digest = _read_digest(digest_path)
    try:
        zk = ZkState(
            connect,
            connection_timeout_ms=max(1, int(timeout_s * 1000)),
            digest=digest,
            set_acl=digest is not None,  # what it creates gets the site's secured ACL, as the nodes' znodes
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--zookeeper") from None

    async def go() -> T:
        async with zk:
            return await action(zk)

    try:
        return trio.run(go)
    except CoordinationError as exc:
        if isinstance(exc.__cause__, NoAuthError):
            raise click.ClickException(_refused(connect, digest_path)) from None
        raise click.ClickException(str(exc)) from None
    except (PlanError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


def _read_digest(path: Path | None) -> ZkDigest | None:
    """The credential in ``--zookeeper-digest-file``; a usage error naming the option and the
    file (never its content) when it cannot be read or is not one line ``user:password``."""
    from node.zkkit import read_digest_file

    if path is None:
        return None
    try:
        return read_digest_file(path)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise click.BadParameter(f"{str(path)!r}: {reason}", param_hint="--zookeeper-digest-file") from None


def _refused(connect: str, digest_path: Path | None) -> str:
    """The one line for a change ZooKeeper refused with NoAuth."""
    if digest_path is None:
        return (
            f"ZooKeeper {connect} is secured (the site's nodes set zookeeper.set.acl) and refused the change "
            "(NoAuth): give the site's credential with --zookeeper-digest-file FILE (one line user:password, "
            "as the nodes' strait.zookeeper.digest.file)"
        )
    return (
        f"ZooKeeper {connect} refused the change with the credential in --zookeeper-digest-file {str(digest_path)!r} "
        "(NoAuth): it is not the one the site's nodes use (their strait.zookeeper.digest.file)"
    )


async def _read_topics(zk: ZkState, names: set[str]) -> dict[str, TopicAssignment | None]:
    return {name: await zk.topic(name) for name in sorted(names)}


async def _live_brokers(zk: ZkState) -> list[NodeId]:
    from ._reassignment_plan import PlanError

    brokers = sorted(await zk.brokers())
    if not brokers:
        raise PlanError(f"no broker is registered in ZooKeeper {zk.connect}: is the site up and the chroot right?")
    return brokers


async def _execute(zk: ZkState, plan: Partitions, throttle: int | None) -> None:
    from node.coordination import ReassignmentInProgress

    from ._reassignment_plan import check_against_site, current_assignment, encode_plan

    running = await zk.reassignment()
    if running is not None:
        raise ReassignmentInProgress(tuple(running.partitions))
    topics = await _read_topics(zk, {topic for topic, _ in plan})
    check_against_site(plan, topics, await _live_brokers(zk))
    # Fails with ReassignmentInProgress when one is running; re-checks the topics atomically.
    started = await zk.start_reassignment(plan, throttle)
    click.echo("Current partition replica assignment (save it: --plan with it moves them back):")
    click.echo(encode_plan(current_assignment(plan, topics)))
    limit = f"throttled to {throttle} bytes/s" if throttle else "not throttled"
    click.echo(
        f"Started the reassignment of {len(started.partitions)} partition(s), {limit}; "
        "check it with --plan FILE --verify."
    )


async def _verify(zk: ZkState, plan: Partitions) -> bool:
    from ._reassignment_plan import progress

    running: Reassignment | None = await zk.reassignment()
    topics = await _read_topics(zk, {topic for topic, _ in plan})
    states: dict[tuple[str, int], PartitionState | None] = {}
    for topic, partition in plan:
        assignment = topics[topic]
        if assignment is not None and partition in assignment.partitions:
            states[topic, partition] = await zk.partition_state(topic, partition)
    report = progress(plan, topics, states, running)
    for (topic, partition), (_, message) in report.items():
        click.echo(f"{topic}-{partition}: {message}")
    done = sum(1 for complete, _ in report.values() if complete)
    click.echo(f"{done} of {len(report)} partition(s) complete")
    return done == len(report)


async def _generate(zk: ZkState, names: tuple[str, ...], brokers: tuple[NodeId, ...]) -> None:
    from ._reassignment_plan import PlanError, encode_plan, propose

    found = await _read_topics(zk, set(names))
    topics: dict[str, TopicAssignment] = {}
    for name in names:
        assignment = found[name]
        if assignment is None:
            raise PlanError(f"topic {name!r} does not exist")
        topics[name] = assignment
    live = await _live_brokers(zk)
    down = [b for b in brokers if b not in live]
    if down:
        raise PlanError(f"--brokers: broker {down[0]} is not a live broker of this site (live brokers: {live})")
    current = {(name, p): replicas for name, a in topics.items() for p, replicas in a.partitions.items()}
    click.echo("Current partition replica assignment:")
    click.echo(encode_plan(current))
    click.echo("Proposed partition reassignment configuration:")
    click.echo(encode_plan(propose(topics, brokers)))
