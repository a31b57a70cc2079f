"""A history written step by step for the checkers' tests: each entry 0.1 s after the last unless told."""

from __future__ import annotations

from typing import Any

from chaos.checkers import CHECKERS, CheckerResult
from chaos.history import FAILOVER, NEMESIS, History, Op

SECOND = 1_000_000_000
STEP = SECOND // 10


def rec(offset: int, value: str, topic: str = "t", partition: int = 0) -> dict[str, Any]:
    return {"topic": topic, "partition": partition, "offset": offset, "value": value}


def log(values: list[str], start: int = 0, topic: str = "t", partition: int = 0) -> list[dict[str, Any]]:
    """Records ``values`` at consecutive offsets from ``start``."""
    return [rec(start + n, value, topic, partition) for n, value in enumerate(values)]


class Builder:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.mono = 0

    def wait(self, seconds: float) -> Builder:
        self.mono += int(seconds * SECOND)
        return self

    def add(self, type: str, process: str, f: str, **fields: Any) -> Op:
        op: Op = {
            "index": len(self.ops),
            "type": type,
            "process": process,
            "f": f,
            "time": 1_700_000_000 + self.mono / SECOND,
            "mono": self.mono,
            **fields,
        }
        self.ops.append(op)
        self.mono += STEP
        return op

    # -- producers ---------------------------------------------------------------------------------

    def invoke(self, process: str, topic: str, value: str) -> Op:
        return self.add("invoke", process, "send", topic=topic, value=value)

    def ack(self, invoked: Op, offset: int, partition: int = 0, **fields: Any) -> Op:
        return self.add(
            "ok",
            invoked["process"],
            "send",
            topic=invoked["topic"],
            partition=partition,
            offset=offset,
            value=invoked["value"],
            **fields,
        )

    def send(self, process: str, value: str, offset: int, partition: int = 0, topic: str = "t") -> Op:
        """An acknowledged send: invoke, then ok at ``offset``."""
        return self.ack(self.invoke(process, topic, value), offset, partition)

    def sends(self, process: str, values: list[str], start: int = 0, partition: int = 0, topic: str = "t") -> None:
        for n, value in enumerate(values):
            self.send(process, value, start + n, partition, topic)

    def unacked(self, process: str, value: str, type: str = "info", topic: str = "t") -> Op:
        self.invoke(process, topic, value)
        return self.add(type, process, "send", topic=topic, value=value, error="timed out")

    # -- consumers ---------------------------------------------------------------------------------

    def poll(self, process: str, records: list[dict[str, Any]], group: str | None = "g", **fields: Any) -> Op:
        self.add("invoke", process, "poll", **({"group": group} if group else {}))
        return self.add("ok", process, "poll", records=records, **({"group": group} if group else {}), **fields)

    def assign(self, process: str, partitions: list[tuple[str, int]], group: str = "g") -> Op:
        return self.add(
            "info",
            process,
            "assign",
            group=group,
            partitions=[{"topic": t, "partition": p} for t, p in partitions],
        )

    def commit(self, process: str, offset: int, group: str = "g", partition: int = 0, type: str = "ok") -> Op:
        offsets = [{"topic": "t", "partition": partition, "offset": offset}]
        self.add("invoke", process, "commit", group=group, offsets=offsets)
        return self.add(type, process, "commit", group=group, offsets=offsets)

    def reset(self, process: str, offset: int, group: str = "g", partition: int = 0) -> Op:
        offsets = [{"topic": "t", "partition": partition, "offset": offset}]
        self.add("invoke", process, "reset", group=group, offsets=offsets)
        return self.add("ok", process, "reset", group=group, offsets=offsets)

    def drain(self, process: str, ends: dict[str, int], group: str = "g", error: str | None = None) -> Op:
        if error is None:
            return self.add("ok", process, "drain", group=group, ends=ends)
        return self.add("fail", process, "drain", group=group, ends=ends, error=error)

    # -- transactions ------------------------------------------------------------------------------

    def txn(
        self,
        process: str,
        number: int,
        inputs: list[dict[str, Any]],
        outcome: str = "ok",
        *,
        abort: bool = False,
        error: str | None = None,
    ) -> Op:
        """A ``txn`` moving ``inputs``: invoke, then ``outcome`` (None: never completed)."""
        offsets: dict[tuple[str, int], int] = {}
        for record in inputs:
            offsets[(record["topic"], record["partition"])] = record["offset"] + 1
        listed = [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())]
        about = {"transaction": number, "group": "tg", "input": "t", "output": "o"}
        invoked = self.add("invoke", process, "txn", **about, inputs=inputs, offsets=listed, abort=abort)
        if outcome is None:
            return invoked
        return self.add(outcome, process, "txn", **about, **({"error": error} if error else {}))

    def txn_read(
        self,
        records: list[dict[str, Any]],
        committed: dict[str, int],
        *,
        site: str = "east",
        isolation: str = "read_committed",
        ends: dict[str, list[int]] | None = None,
    ) -> Op:
        about = {"site": site, "input": "t", "output": "o", "group": "tg", "isolation": isolation}
        self.add("invoke", "txn-read", "txn-read", **about)
        return self.add(
            "ok", "txn-read", "txn-read", **about, records=records, ends=ends or {}, open={}, committed=committed
        )

    # -- reads, faults, failovers ------------------------------------------------------------------

    def read(
        self,
        site: str,
        records: list[dict[str, Any]],
        role: str = "primary",
        final: bool = True,
        ends: dict[str, list[int]] | None = None,
        process: str = "reader",
    ) -> Op:
        self.add("invoke", process, "read", site=site, topic="t")
        fields: dict[str, Any] = {"site": site, "records": records, "final": final, "role": role}
        if ends is not None:
            fields["ends"] = ends
        return self.add("ok", process, "read", **fields)

    def nemesis(self, f: str, name: str = "kill-leader", target: str = "east node 1") -> Op:
        return self.add("info", NEMESIS, f, nemesis=name, target=target)

    def promote(self, source: str = "east", target: str = "west", planned: bool = False) -> Op:
        value = {
            "link": f"{source}-to-{target}",
            "planned": planned,
            "rpo_records": 0,
            "source": source,
            "target": target,
        }
        return self.add("info", FAILOVER, "promote", value=value)

    def export(self, records: list[dict[str, Any]]) -> Op:
        return self.add("info", FAILOVER, "export", records=records)

    def history(self) -> History:
        return History.of(self.ops)


def run(name: str, builder: Builder) -> CheckerResult:
    return CHECKERS[name](builder.history())


def brief(result: CheckerResult) -> list[tuple[str, int, list[tuple[str, int, int, str]]]]:
    """Each anomaly as (name, count, [(topic, partition, offset, value-or-op) of its records])."""
    return [
        (
            a.name,
            a.count,
            [(r["topic"], r["partition"], r["offset"], r.get("value", r["op"])) for r in a.records],
        )
        for a in result.anomalies
    ]
