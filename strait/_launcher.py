"""The foreground launcher of ``strait up`` and ``strait site up``: start the components in
order, watch them until a stop signal, then stop them in reverse order, every wait bounded.

The components are :class:`~strait._site.LocalSite` and the appliance's
:class:`~strait._appliance.LocalMirror`; the launcher knows them only as :class:`Component`.
Everything runs in the main thread (the children die with the thread that spawned them).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Protocol

from ._site import SiteError, SiteInterrupted

POLL_INTERVAL_S = 0.2  # between two looks at the components while they run
_SECOND_SIGNAL_AFTER_S = 1.0  # a signal this soon after the first is the same request


class Component(Protocol):
    """What ``serve`` runs: a LocalSite, or the appliance's LocalMirror."""

    name: str

    def start(self, stop_requested: Callable[[], bool] = ...) -> list[str]: ...

    def poll(self) -> list[str]: ...

    def stop(self, hurry: Callable[[], bool] = ...) -> list[str]: ...

    def announce(self) -> str: ...


def serve(
    sites: Sequence[Component],
    echo: Callable[..., None],
    *,
    on_ready: Callable[[], None] | None = None,
    on_tick: Callable[[Callable[[], bool]], None] | None = None,
    on_stop: Callable[[], None] | None = None,
) -> int:
    """Start ``sites`` (and other components) in order, print their addresses, call ``on_ready``,
    run until SIGINT, SIGTERM or SIGHUP, then call ``on_stop`` and stop them in reverse order.
    A second signal hurries the stop (SIGKILL instead of waiting);
    only one that comes a second or more after the first, because tools such as ``timeout``
    deliver their one SIGTERM twice (to the process and to its group).

    While they run, each component's news (a process that exited, a site lost) is printed as a
    warning, and ``on_tick(stop_requested)`` is called after every look (``strait up`` answers
    requests there); it may block as long as it polls ``stop_requested`` and raises
    :class:`~strait._site.SiteInterrupted` once that is true.

    Returns the exit code: 0 when everything started and stopped as asked (also when the stop
    came during startup), 1 otherwise; the problems are printed to stderr.
    """
    first_signal: float | None = None
    hurried = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal first_signal, hurried
        now = time.monotonic()
        if first_signal is None:
            first_signal = now
        elif now - first_signal >= _SECOND_SIGNAL_AFTER_S:
            hurried = True

    def stop_requested() -> bool:
        return first_signal is not None

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    started: list[Component] = []
    problems: list[str] = []
    try:
        try:
            for site in sites:
                started.append(site)
                warnings = site.start(stop_requested)
                echo(site.announce())
                for warning in warnings:
                    echo(f"warning: {warning}", err=True)
            if on_ready is not None:
                on_ready()
            echo("Ctrl-C (or SIGTERM) stops everything.")
            while not stop_requested():
                for site in sites:
                    for news in site.poll():
                        echo(f"warning: {news}", err=True)
                if on_tick is not None:
                    on_tick(stop_requested)
                time.sleep(POLL_INTERVAL_S)
        except SiteInterrupted:
            pass
        except SiteError as exc:
            problems.append(str(exc))
        finally:
            if on_stop is not None:
                on_stop()
            for site in reversed(started):
                echo(f"stopping {site.name} ...")
                problems += site.stop(lambda: hurried)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for problem in problems:
        echo(f"error: {problem}", err=True)
    echo("stopped" if not problems else "stopped, with the errors above")
    return 1 if problems else 0
