"""An unplanned failover: all of east (ZooKeeper and nodes) SIGKILLed under load, west
promoted, east brought back while its producers still point at it, reversed and failed back.

What must hold (the issue's acceptance): every acknowledged record of the ledger is on west at
its acknowledged offset, or in the divergence that ``reverse`` exported; the export holds
nothing but records east really had beyond the cut; the RPO printed at the promote is a lower
bound of that set and ``status`` after ``reverse`` gives it exactly; after failback both sites
hold identical records at identical offsets and the group resumes on east where it was on west.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from chaos.ledger import Ledger, check
from chaos.workload import ProducerWorkload, read_back
from tests.failover.appliance import (
    LINK,
    committed,
    create_topic,
    failover,
    kill_site,
    records,
    revive_site,
    start_appliance,
    wait_mirrored,
)
from tests.failover.test_switchover import GROUP, PARTITIONS, TOPIC, consume_and_commit, positions
from tests.node.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.chaos]


def exported(directory: Path) -> list[dict[str, object]]:
    (data,) = directory.glob(f"{LINK}/epoch-*/divergence.jsonl")
    return [json.loads(line) for line in data.read_text().splitlines()]


def value_of(line: dict[str, object]) -> bytes:
    text = str(line["value"])
    return base64.b64decode(text) if line["value_encoding"] == "base64" else text.encode()


def test_losing_east_promotes_west_and_every_acknowledged_record_is_kept_or_exported(tmp_path: Path) -> None:
    app = start_appliance(tmp_path)
    try:
        east, west = app.bootstrap("east"), app.bootstrap("west")
        create_topic(east, TOPIC, PARTITIONS)
        export_dir = tmp_path / "export"
        with Ledger(tmp_path / "ledger.jsonl") as ledger:
            on_east = ProducerWorkload(east, TOPIC, ledger, rate=300).start()
            try:
                on_east.wait_for_acks(600, timeout=60)
                wait_mirrored(app, TOPIC, 300)
                consume_and_commit(east, 150)
                time.sleep(6)  # a group offset sync pass (every 5 s) carries the commit to west
                kill_site(app, "east")

                started = time.monotonic()
                code, promoted, stderr = failover(app, "promote", LINK, "--unplanned")
                assert code == 0, stderr
                assert promoted["state"] == "promoted" and promoted["primary"] == "west"
                assert not promoted["rpo"]["exact"]
                rpo_at_promote = int(promoted["rpo"]["records"])
                # West takes writes at once (the RTO itself is measured by bench/failover_bench.py).
                with ProducerWorkload(west, TOPIC, ledger, rate=300) as on_west:
                    on_west.wait_for_acks(ledger.acked + 300, timeout=60)
                assert time.monotonic() - started < 120

                # East comes back with its producer still pointed at it: the mirror fences it.
                revive_site(app, "east")

                def fenced() -> bool:
                    code, status, _ = failover(app, "status", LINK)
                    fence = status["links"][0]["mirror"].get("fence") or {}
                    return code == 0 and fence.get("state") == "fenced"

                wait_for("the mirror to fence east", fenced, 90, interval=1)
            finally:
                on_east.stop(timeout=30)
            on_east_before_reverse = {(r.partition, r.offset): r.value for r in read_back(east, TOPIC, timeout=60)}

            code, reversed_, stderr = failover(app, "reverse", LINK, "--export", str(export_dir))
            assert code == 0, stderr
            lines = exported(export_dir)
            divergence = int(reversed_["divergence"]["records"])
            assert divergence == len(lines)
            # The export holds nothing but records east really has beyond the cut.
            code, status, stderr = failover(app, "status", LINK)
            assert code == 0, stderr
            (link_status,) = status["links"]
            assert link_status["dr"]["state"] == "reversed"
            assert link_status["divergence"]["records"] == divergence
            for line in lines:
                assert on_east_before_reverse[(int(line["partition"]), int(line["offset"]))] == value_of(line)
            # The RPO printed at the promote is a lower bound of what diverged.
            assert rpo_at_promote <= divergence

            # Every acknowledged record is on west at its offset, or in the export.
            result = check(ledger, read_back(west, TOPIC, timeout=60))
            assert not (result.moved or result.duplicates or result.conflicts), result.summary()
            kept = {(int(line["partition"]), int(line["offset"]), value_of(line)) for line in lines}
            for ack in result.lost:
                assert (ack.position.partition, ack.position.offset, ack.value) in kept, ack

            # Failback: identical logs, and the group resumes on east where it was on west.
            wait_for("east to mirror west", lambda: len(records(east, TOPIC)) == len(records(west, TOPIC)), 60, 0.5)
            on_west_group = consume_and_commit(west, 100)
            code, answer, stderr = failover(app, "failback", LINK, "--timeout", "120")
            assert code == 0, stderr
            assert answer["primary"] == "east"
            assert positions(east) == positions(west)
            assert committed(east, GROUP, TOPIC, PARTITIONS) == on_west_group
    finally:
        app.stop()
