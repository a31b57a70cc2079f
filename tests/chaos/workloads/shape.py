"""What a workload's history must look like (chaos.history's docstring and the chaos spec), as assertions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from chaos.history import TYPES, Op

COMPLETIONS = frozenset({"ok", "fail", "info"})
#: Entries recorded without an invoke, and the types they may have.
UNINVOKED = {"assign": {"info"}, "lag": {"info"}, "drain": {"ok", "fail"}, "txn-drain": {"ok", "fail"}}


def _record(record: Any) -> None:
    assert set(record) == {"topic", "partition", "offset", "value"}, record
    assert isinstance(record["topic"], str) and isinstance(record["partition"], int), record
    assert isinstance(record["offset"], int) and record["offset"] >= 0, record
    assert record["value"] is None or isinstance(record["value"], str), record


def _offsets(offsets: Any) -> None:
    assert isinstance(offsets, list) and offsets, offsets
    for entry in offsets:
        assert set(entry) == {"topic", "partition", "offset"} and entry["offset"] >= 0, entry


def _completion(invoked: Op, done: Op) -> None:
    f, kind = done["f"], done["type"]
    assert done["process"] == invoked["process"] and f == invoked["f"] and done["index"] > invoked["index"]
    assert done["mono"] >= invoked["mono"]
    if kind in ("fail", "info"):
        assert isinstance(done.get("error"), str) and done["error"], done
    if f == "send":
        assert done["topic"] == invoked["topic"] and done["value"] == invoked["value"], (invoked, done)
        if kind == "ok":
            assert isinstance(done["partition"], int) and isinstance(done["offset"], int) and done["offset"] >= 0
    elif f == "poll":
        assert done["group"] == invoked["group"], done
        if kind == "ok":
            assert isinstance(done["records"], list) and done["records"], done
            for record in done["records"]:
                _record(record)
    elif f == "commit":
        assert done["group"] == invoked["group"] and done["offsets"] == invoked["offsets"], (invoked, done)
        _offsets(done["offsets"])
    elif f == "read":
        assert done["site"] == invoked["site"] and done["role"] in ("primary", "mirror", "old-primary"), done
        if kind == "ok":
            assert isinstance(done["final"], bool) and isinstance(done["ends"], dict), done
            for name, (first, end) in done["ends"].items():
                assert "/" in name and 0 <= first <= end, done["ends"]
            for record in done["records"]:
                _record(record)
    elif f == "txn":
        assert done["transaction"] == invoked["transaction"] and done["group"] == invoked["group"], (invoked, done)
        assert invoked["inputs"] and isinstance(invoked["abort"], bool), invoked
        for record in invoked["inputs"]:
            _record(record)
        _offsets(invoked["offsets"])
        if kind == "ok":
            assert not invoked["abort"] and len(done["outputs"]) == len(invoked["inputs"]), (invoked, done)
            for record in done["outputs"]:
                _record(record)
        if invoked["abort"]:
            assert kind != "ok", (invoked, done)
    elif f == "txn-read":
        assert {k: done[k] for k in invoked if k in ("site", "input", "output", "group", "isolation")} == {
            k: invoked[k] for k in ("site", "input", "output", "group", "isolation")
        }, done
        if kind == "ok":
            assert isinstance(done["ends"], dict) and isinstance(done["committed"], dict), done
            assert isinstance(done["open"], dict), done
            for record in done["records"]:
                _record(record)
    else:
        raise AssertionError(f"unknown operation {f!r}: {done}")


def _uninvoked(op: Op) -> None:
    f = op["f"]
    assert op["type"] in UNINVOKED[f], op
    if f == "assign":
        assert isinstance(op["group"], str), op
        for entry in op["partitions"]:
            assert set(entry) == {"topic", "partition"}, op
    elif f == "lag":
        assert isinstance(op["site"], str), op
        value = op["value"]
        assert set(value) == {"records", "partitions"} and value["records"] == sum(value["partitions"].values()), op
    else:
        assert isinstance(op["group"], str) and all(isinstance(end, int) for end in op["ends"].values()), op
        if op["type"] == "fail":
            assert op["error"], op


def check_shape(ops: Sequence[Op]) -> dict[str, list[tuple[Op, Op]]]:
    """Assert ``ops`` is a well-formed, complete workload history; return (invoke, completion) pairs by f.

    Every invoke is completed exactly once: a send by its value, any other operation (one at a time
    per process) by the next completion of its process.
    """
    assert [op["index"] for op in ops] == list(range(len(ops)))
    pairs: dict[str, list[tuple[Op, Op]]] = defaultdict(list)
    sends: dict[str, Op] = {}
    current: dict[str, Op] = {}
    for op in ops:
        assert op["type"] in TYPES and isinstance(op["time"], float) and isinstance(op["mono"], int), op
        if op["f"] in UNINVOKED:
            _uninvoked(op)
            continue
        key = op["value"] if op["f"] == "send" else None
        if op["type"] == "invoke":
            if key is not None:
                assert key not in sends and op["value"].endswith(f"-{op['process']}-{op['value'].rsplit('-', 1)[1]}")
                sends[key] = op
            else:
                assert op["process"] not in current, f"two operations pending at once: {current[op['process']]}, {op}"
                current[op["process"]] = op
            continue
        invoked = sends.pop(key) if key is not None else current.pop(op["process"])
        _completion(invoked, op)
        pairs[op["f"]].append((invoked, op))
    assert not sends and not current, f"invoked, never completed: {list(sends.values()) + list(current.values())}"
    values = [invoked["value"] for invoked, _ in pairs["send"]]
    assert len(values) == len(set(values)), "a value written twice"
    return pairs


def polls_increase_between_assigns(ops: Iterable[Op]) -> None:
    """Between two ``assign`` entries of one consumer, its polls of a partition go strictly forward."""
    last: dict[tuple[str, str, int], int] = {}
    for op in ops:
        if op["f"] == "assign":
            last = {k: v for k, v in last.items() if k[0] != op["process"]}
        elif op["f"] == "poll" and op["type"] == "ok":
            for record in op["records"]:
                key = (op["process"], record["topic"], record["partition"])
                assert record["offset"] > last.get(key, -1), f"poll went back without an assign: {record} in {op}"
                last[key] = record["offset"]


def acked(ops: Iterable[Op]) -> dict[str, tuple[str, int, int]]:
    """value -> (topic, partition, offset) of every acknowledged send."""
    return {
        op["value"]: (op["topic"], op["partition"], op["offset"])
        for op in ops
        if op["f"] == "send" and op["type"] == "ok"
    }


def polled(ops: Iterable[Op]) -> dict[str, tuple[str, int, int]]:
    """value -> (topic, partition, offset) of every record a group consumer recorded."""
    return {
        r["value"]: (r["topic"], r["partition"], r["offset"])
        for op in ops
        if op["f"] == "poll" and op["type"] == "ok"
        for r in op["records"]
    }
