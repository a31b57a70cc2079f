"""Controller election (``/controller``, ``/controller_epoch``) against the session's real ZooKeeper."""

from __future__ import annotations

import pytest
import trio

from node.coordination import MalformedZnode, ZkState
from tests.node.coordination.zk_helpers import next_hint, raw_session, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


async def race(candidates: dict[int, ZkState]) -> dict[int, int | None]:
    """Every candidate (broker id -> its ZkState) runs elect_controller at once; their results."""
    results: dict[int, int | None] = {}
    async with trio.open_nursery() as nursery:
        for broker_id, zk in candidates.items():

            async def elect(broker_id: int = broker_id, zk: ZkState = zk) -> None:
                results[broker_id] = await zk.elect_controller(broker_id)

            nursery.start_soon(elect)
    return results


def winner_of(results: dict[int, int | None]) -> tuple[int, int]:
    winners = [(broker_id, epoch) for broker_id, epoch in results.items() if epoch is not None]
    assert len(winners) == 1, f"expected exactly one winner: {results}"
    return winners[0]


def test_two_brokers_race_and_exactly_one_wins(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect, clock_ms=lambda: 1700000000123) as a, ZkState(zk_connect) as b:
            assert await a.controller() is None
            winner, epoch = winner_of(await race({1: a, 2: b}))
            assert epoch == 1  # /controller_epoch did not exist: the first election creates it with 1
            zks = {1: a, 2: b}
            loser = 2 if winner == 1 else 1
            assert await a.controller() == await b.controller() == (winner, 1)
            async with raw_session(zk_connect) as raw:
                obj = await raw.json("/controller")
                assert obj == {"version": 1, "brokerid": winner, "timestamp": obj["timestamp"]}
                if winner == 1:
                    assert obj["timestamp"] == "1700000000123"
                assert await raw.data("/controller_epoch") == b"1"
                assert await raw.owner("/controller") == zks[winner]._client.client_id[0]

            assert await zks[loser].elect_controller(loser) is None  # still held
            assert await zks[winner].elect_controller(winner) == 1  # already ours: the same epoch
            assert await zks[winner].elect_controller(loser) is None  # ours, but not as that broker

            await zks[winner].close()  # the ephemeral /controller ends with the session
            assert await zks[loser].controller() is None
            assert await zks[loser].elect_controller(loser) == 2
            assert await zks[loser].controller() == (loser, 2)

    run(main)


def test_epochs_strictly_increase_across_elections(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b, ZkState(zk_connect) as c:
            zks = {1: a, 2: b, 3: c}
            epochs = []
            for _ in range(6):
                winner, epoch = winner_of(await race(zks))
                assert await a.controller() == (winner, epoch)
                epochs.append(epoch)
                assert await zks[winner].resign_controller(winner)
                assert await a.controller() is None
            assert epochs == [1, 2, 3, 4, 5, 6]

    run(main)


def test_churning_elections_never_share_an_epoch(zk_connect: str) -> None:
    """Three brokers elect and resign as fast as they can: every won epoch is unique, and they
    are exactly 1..n (an epoch is only taken by an election that won)."""

    async def main() -> None:
        won: list[tuple[int, int]] = []
        async with (
            ZkState(zk_connect) as a,
            ZkState(zk_connect) as b,
            ZkState(zk_connect) as c,
            trio.open_nursery() as nursery,
        ):
            for broker_id, zk in ((1, a), (2, b), (3, c)):

                async def churn(broker_id: int = broker_id, zk: ZkState = zk) -> None:
                    for _ in range(15):
                        epoch = await zk.elect_controller(broker_id)
                        if epoch is not None:
                            won.append((epoch, broker_id))
                            assert await zk.resign_controller(broker_id)

                nursery.start_soon(churn)
        epochs = sorted(epoch for epoch, _ in won)
        assert epochs == list(range(1, len(won) + 1)), won

    run(main)


def test_an_existing_epoch_is_continued(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as zk, raw_session(zk_connect) as raw:
            await raw.create("/controller_epoch", b"41")  # left by Kafka, say
            assert await zk.elect_controller(5) == 42
            assert await raw.data("/controller_epoch") == b"42"
            assert await zk.resign_controller(5)
            await raw.set("/controller_epoch", b"forty-two")
            with pytest.raises(MalformedZnode, match=r"/controller_epoch is malformed: expected a decimal epoch"):
                await zk.elect_controller(5)
            assert not await raw.exists("/controller")  # the failed election created nothing
            with pytest.raises(ValueError, match="broker id -1 is negative"):
                await zk.elect_controller(-1)

    run(main)


def test_resign_deletes_only_our_own_controller(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            assert not await a.resign_controller(1)  # nobody is controller
            assert await a.elect_controller(1) == 1
            assert not await b.resign_controller(1)  # the same broker id, another session
            assert not await a.resign_controller(2)  # our session, another broker id
            assert await b.controller() == (1, 1)
            assert await a.resign_controller(1)
            assert not await a.resign_controller(1)
            assert await b.controller() is None
            assert await b.elect_controller(2) == 2

    run(main)


def test_controller_changes_arrive_as_hints(zk_connect: str) -> None:
    async def main() -> None:
        async with ZkState(zk_connect) as watcher, ZkState(zk_connect) as a, ZkState(zk_connect) as b:
            events = watcher.events()
            assert await a.elect_controller(1) == 1
            await next_hint(events, "controller")  # created
            await a.resign_controller(1)
            await next_hint(events, "controller")  # deleted
            assert await b.elect_controller(2) == 2
            await next_hint(events, "controller")
            await b.close()
            await next_hint(events, "controller")  # gone with b's session
            assert await watcher.controller() is None

    run(main)
