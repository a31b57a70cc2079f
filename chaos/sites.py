"""What faults and the runner need from the sites under test, whoever runs them.

:class:`~chaos.appliance.ChaosAppliance` (a local appliance the run starts, behind the fault
proxy) and :class:`~chaos.existing.ExistingSites` (sites the operator runs, driven by commands)
both provide it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from chaos.proxy import ProxyHandle


class NodeControl(Protocol):
    """One broker a fault can take down and bring back."""

    @property
    def name(self) -> str: ...

    @property
    def broker_id(self) -> int: ...

    @property
    def running(self) -> bool: ...

    def kill(self) -> None:
        """kill -9; returns once it is dead."""

    def spawn(self) -> None:
        """Start it again on its data (without waiting)."""

    def wait_ready(self) -> None:
        """Until it serves again."""

    def start(self) -> None:
        """spawn() and wait_ready()."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class SiteControl(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def bootstrap(self) -> str: ...

    @property
    def nodes(self) -> Sequence[NodeControl]: ...

    def node(self, broker_id: int) -> NodeControl: ...

    def kill_zookeeper(self) -> None: ...

    def start_zookeeper(self) -> None: ...


class Sites(Protocol):
    """The two sites of the link under test, and how to reach the tools that act on them."""

    @property
    def source(self) -> SiteControl: ...

    @property
    def target(self) -> SiteControl: ...

    @property
    def link_name(self) -> str: ...

    @property
    def topology_file(self) -> Path: ...

    @property
    def node_count(self) -> int: ...

    @property
    def proxy(self) -> ProxyHandle: ...

    def start(self) -> None: ...

    def stop(self) -> list[str]: ...

    def supports(self, fault: str) -> str | None:
        """None when ``fault`` can run on these sites, else why not."""
