"""One failover command's run on one link: the lock, the state, and steps that are never done twice.

:func:`link_run` opens the DR store in the link's original target ZooKeeper, takes the link's
lock, and yields a :class:`Run`. An operation is a list of named steps; :meth:`Run.step`
runs one unless the journal says it is done (then it returns the result recorded then), and
records it with its result in the same ZooKeeper transaction as the journal entry. A command
killed at any point and started again therefore resumes after the last completed step; a
step interrupted half way is run again, and every step is written to be idempotent (it
checks what is already so before changing anything).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from ._mirror import MirrorControl
from .errors import FailoverError, WrongState
from .state import DrState, DrStore, open_store
from .topology import Link, Site, Topology

Say = Callable[[str], None]


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Run:
    topology: Topology
    link: Link
    store: DrStore
    state: DrState
    mirror: MirrorControl
    say: Say
    timeout_s: float
    steps: list[dict[str, Any]] = field(default_factory=list)
    clock_ms: Callable[[], int] = wall_ms
    stall_after: str | None = None  # a fault point: stop for good once this step is recorded

    @property
    def source(self) -> Site:
        """The link's original source site."""
        return self.topology.site(self.link.source)

    @property
    def target(self) -> Site:
        """The link's original target site (where the DR state lives)."""
        return self.topology.site(self.link.target)

    def done(self, name: str) -> bool:
        return self.state.operation is not None and name in self.state.operation.done

    def result(self, name: str) -> dict[str, Any]:
        """The recorded result of a completed step (FailoverError if it is not done)."""
        if not self.done(name):
            raise FailoverError(f"link {self.link.name!r}: step {name!r} has not run yet")
        assert self.state.operation is not None
        return dict(self.state.operation.results[name])

    def resuming(self, name: str) -> bool:
        """True when operation ``name`` is in progress (this command resumes it).

        Raises:
            WrongState: another operation is unfinished (the message names the command to finish it).
        """
        operation = self.state.operation
        if operation is None:
            return False
        if operation.name != name:
            raise WrongState(
                f"link {self.link.name!r}: a {operation.name} is unfinished (started by {operation.by}): "
                f"finish it first with `strait failover {operation.name} {self.link.name}`"
            )
        return True

    async def begin(self, name: str, args: Mapping[str, Any]) -> None:
        resumed = self.state.operation is not None
        self.state = await self.store.begin(self.state, name, args)
        if resumed:
            assert self.state.operation is not None
            self.say(
                f"resuming `{name}` started by {self.state.operation.by}; done before: "
                f"{', '.join(self.state.operation.done) or 'nothing'}"
            )

    async def step(self, name: str, what: str, fn: Callable[[], Awaitable[Mapping[str, Any]]]) -> dict[str, Any]:
        """Run step ``name`` (``what`` says it in words) unless done before; record its result."""
        if self.done(name):
            self.say(f"  {what}: done before")
            result = self.result(name)
            self.steps.append({"step": name, "resumed": True, "result": result})
            return result
        self.say(f"  {what} ...")
        started = time.monotonic()
        result = dict(await fn())
        result.setdefault("seconds", round(time.monotonic() - started, 3))
        self.state = await self.store.record(self.state, name, result)
        self.steps.append({"step": name, "resumed": False, "result": result})
        if name == self.stall_after:
            self.say(f"  stalled after step {name!r} (fault point): kill this process and run the command again")
            await trio.sleep_forever()
        return result

    async def finish(self, **changes: Any) -> None:
        self.state = await self.store.finish(self.state, **changes)


@asynccontextmanager
async def link_run(
    topology: Topology,
    link_name: str,
    command: str,
    *,
    say: Say,
    timeout_s: float,
    lock_wait_s: float = 10.0,
    stall_after: str | None = None,
) -> AsyncIterator[Run]:
    """The :class:`Run` of ``command`` on link ``link_name``, holding the link's lock.

    Raises:
        TopologyError: no such link, or the target's zookeeper_digest_file cannot be read.
        FailoverError: the target's ZooKeeper is unreachable. ZooKeeperSecured: it refused a
        change (NoAuth: the topology gives no credential for it, or not its nodes' one).
        LinkBusy: another command holds the link.
    """
    link = topology.link(link_name)
    target = topology.site(link.target)
    digest = target.zookeeper_digest()
    async with open_store(
        target.zookeeper, link.name, link.source, link.target, timeout_s=timeout_s, digest=digest
    ) as store:
        await store.lock(command, wait_s=lock_wait_s)
        try:
            state = await store.state()
            mirror = MirrorControl(link, timeout=timeout_s)
            yield Run(topology, link, store, state, mirror, say, timeout_s, stall_after=stall_after)
        finally:
            await store.unlock()
