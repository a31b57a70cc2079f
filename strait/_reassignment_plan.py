"""Reassignment plans in Kafka's ``kafka-reassign-partitions`` JSON, without any I/O.

A plan file looks like ``{"version": 1, "partitions": [{"topic": "t", "partition": 0,
"replicas": [2, 3]}]}``: each entry gives a partition's new replica list, preferred leader
first. Kafka's optional per-entry ``log_dirs`` is accepted when every value is ``"any"`` (a
node picks the log dir itself). Everything that is wrong raises :class:`PlanError` naming the
file, the entry and the value.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from node.coordination import PartitionState, Reassignment, TopicAssignment, validate_topic_name
from node.ids import NodeId

PLAN_VERSION = 1

Partitions = dict[tuple[str, int], tuple[NodeId, ...]]


class PlanError(ValueError):
    """A plan (or a ``--generate`` request) that cannot be carried out; the message says why."""


def parse_plan(text: str, source: str) -> Partitions:
    """The target replicas by ``(topic, partition)``, in file order.

    Raises:
        PlanError: not JSON, not the plan format, an invalid topic name, a negative partition,
            a replica list that is empty, has a negative or repeated broker id, or a partition
            listed twice.
    """
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{source}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise PlanError(f"{source}: expected a JSON object with 'version' and 'partitions', got {_short(obj)}")
    version = obj.get("version", PLAN_VERSION)
    if version != PLAN_VERSION or isinstance(version, bool):
        raise PlanError(f"{source}: unsupported plan version {version!r} (only {PLAN_VERSION})")
    entries = obj.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise PlanError(f"{source}: 'partitions' must be a non-empty list, got {_short(entries)}")
    plan: Partitions = {}
    for index, entry in enumerate(entries):
        where = f"{source}: partitions[{index}]"
        if not isinstance(entry, dict):
            raise PlanError(f"{where}: expected an object with topic, partition and replicas, got {_short(entry)}")
        topic = entry.get("topic")
        if not isinstance(topic, str):
            raise PlanError(f"{where}: 'topic' must be a string, got {_short(topic)}")
        try:
            validate_topic_name(topic)
        except ValueError as exc:
            raise PlanError(f"{where}: {exc}") from None
        partition = entry.get("partition")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise PlanError(f"{where} ({topic}): 'partition' must be a non-negative integer, got {_short(partition)}")
        name = f"{topic}-{partition}"
        replicas = _replicas(entry.get("replicas"), f"{where} ({name})")
        _check_log_dirs(entry.get("log_dirs"), len(replicas), f"{where} ({name})")
        if (topic, partition) in plan:
            raise PlanError(f"{where}: partition {name} is listed twice")
        plan[topic, partition] = replicas
    return plan


def parse_broker_list(text: str) -> tuple[NodeId, ...]:
    """``"1,2,3"`` as broker ids. Raises PlanError naming a bad or repeated id."""
    ids = tuple(_broker_id(item.strip(), text) for item in text.split(","))
    return _distinct(ids, f"--brokers {text!r}")


def parse_topic_list(text: str) -> tuple[str, ...]:
    """``"t1,t2"`` as topic names. Raises PlanError naming an invalid name."""
    names = []
    for item in text.split(","):
        try:
            names.append(validate_topic_name(item.strip()))
        except ValueError as exc:
            raise PlanError(f"--topics {text!r}: {exc}") from None
    return tuple(dict.fromkeys(names))


def encode_plan(plan: Mapping[tuple[str, int], Sequence[int]]) -> str:
    """The plan as one line of Kafka's JSON (what ``--plan`` reads back), sorted by partition."""
    entries = [
        {"topic": topic, "partition": partition, "replicas": list(replicas)}
        for (topic, partition), replicas in sorted(plan.items())
    ]
    return json.dumps({"version": PLAN_VERSION, "partitions": entries}, separators=(",", ":"))


def check_against_site(
    plan: Partitions, topics: Mapping[str, TopicAssignment | None], brokers: Collection[NodeId]
) -> None:
    """Every topic and partition exists and every target replica is a live broker.

    ``topics`` holds the assignment of every topic the plan names (None: no such topic).

    Raises:
        PlanError: naming the unknown topic, partition or broker.
    """
    for (topic, partition), replicas in plan.items():
        assignment = topics.get(topic)
        if assignment is None:
            raise PlanError(f"topic {topic!r} does not exist")
        if partition not in assignment.partitions:
            raise PlanError(
                f"topic {topic!r} has partitions 0..{len(assignment.partitions) - 1}; there is no partition {partition}"
            )
        missing = [b for b in replicas if b not in brokers]
        if missing:
            raise PlanError(
                f"{topic}-{partition}: broker {missing[0]} is not a live broker of this site "
                f"(live brokers: {_ids(sorted(brokers))})"
            )


def current_assignment(plan: Partitions, topics: Mapping[str, TopicAssignment | None]) -> Partitions:
    """The replicas the plan's partitions have now (a plan that moves them back)."""
    current: Partitions = {}
    for topic, partition in plan:
        assignment = topics.get(topic)
        if assignment is not None and partition in assignment.partitions:
            current[topic, partition] = assignment.partitions[partition]
    return current


def propose(topics: Mapping[str, TopicAssignment], brokers: Sequence[NodeId]) -> Partitions:
    """A plan that spreads every partition of ``topics`` over ``brokers`` round-robin, keeping
    each partition's replication factor: successive partitions (across topics, in order) start
    at successive brokers, so preferred leaders are spread evenly too.

    Raises:
        PlanError: a partition has more replicas than there are brokers.
    """
    plan: Partitions = {}
    start = 0
    for name, assignment in topics.items():
        for partition, replicas in sorted(assignment.partitions.items()):
            factor = len(replicas)
            if factor > len(brokers):
                raise PlanError(
                    f"{name}-{partition} has {factor} replicas but --brokers names only {len(brokers)} "
                    f"({_ids(brokers)})"
                )
            plan[name, partition] = tuple(brokers[(start + k) % len(brokers)] for k in range(factor))
            start += 1
    return plan


def progress(
    plan: Partitions,
    topics: Mapping[str, TopicAssignment | None],
    states: Mapping[tuple[str, int], PartitionState | None],
    running: Reassignment | None,
) -> dict[tuple[str, int], tuple[bool, str]]:
    """Per partition of ``plan``: (complete?, what to tell the operator).

    A partition is complete when the reassignment in progress no longer lists it and its
    replicas are the plan's; in progress while listed; otherwise the reassignment ended with
    other replicas (another plan replaced it, or the topic changed).
    """
    pending = running.partitions if running is not None else {}
    report = {}
    for (topic, partition), target in plan.items():
        key = (topic, partition)
        assignment = topics.get(topic)
        replicas = None if assignment is None else assignment.partitions.get(partition)
        state = states.get(key)
        isr = f"; in sync {_ids(state.isr)}" if state is not None else ""
        if replicas is None:
            report[key] = (False, "failed: the partition does not exist")
        elif key in pending:
            report[key] = (False, f"in progress (replicas {_ids(replicas)}{isr}; target {_ids(pending[key])})")
        elif tuple(replicas) == tuple(target):
            report[key] = (True, f"complete (replicas {_ids(replicas)}{isr})")
        else:
            report[key] = (False, f"failed: not in progress, and its replicas are {_ids(replicas)}, not {_ids(target)}")
    return report


# -- helpers ------------------------------------------------------------------------------------


def _replicas(value: Any, where: str) -> tuple[NodeId, ...]:
    if not isinstance(value, list):
        raise PlanError(f"{where}: 'replicas' must be a list of broker ids, got {_short(value)}")
    if not value:
        raise PlanError(f"{where}: the replica list is empty; a partition needs at least one replica")
    for broker in value:
        if not _is_int(broker) or broker < 0:
            raise PlanError(f"{where}: replica {_short(broker)} in {_short(value)} is not a broker id")
    return _distinct(tuple(NodeId(broker) for broker in value), where)


def _check_log_dirs(value: Any, count: int, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, list) or len(value) != count or any(d != "any" for d in value):
        raise PlanError(
            f"{where}: 'log_dirs' {_short(value)} is not supported: nodes choose the log dir "
            f'themselves (give ["any", ...] with one entry per replica, or leave it out)'
        )


def _distinct(ids: tuple[NodeId, ...], where: str) -> tuple[NodeId, ...]:
    seen: set[NodeId] = set()
    for broker in ids:
        if broker in seen:
            raise PlanError(f"{where}: broker {broker} appears more than once in {list(ids)}")
        seen.add(broker)
    return ids


def _broker_id(item: str, text: str) -> NodeId:
    if not item.isdigit():
        raise PlanError(f"--brokers {text!r}: {item!r} is not a broker id (a non-negative integer)")
    return NodeId(int(item))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ids(ids: Sequence[int] | Collection[int]) -> str:
    return "[" + ",".join(str(i) for i in ids) + "]"


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
