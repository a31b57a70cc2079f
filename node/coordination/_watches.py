"""Kazoo watches that turn ZooKeeper changes into hints for trio (see :mod:`._hints`).

Three ``ChildrenWatch`` (topics, topic configs, broker ids) plus one ``DataWatch`` per topic
assignment and per topic config. kazoo re-arms all of them after reconnects and session
expiry. The callbacks run on kazoo's threads: they only post hints, which never blocks.

Each watch's first call reports the state at the moment the watch was set; it is not a
change, so it posts nothing. A deleted znode's ``DataWatch`` fires (hinting the deletion)
before its parent's ``ChildrenWatch``, which then stops it; a re-created name gets a new one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kazoo.recipe.watchers import ChildrenWatch, DataWatch  # type: ignore[import-untyped]

from ._hints import Hints
from ._layout import BROKER_IDS, CONFIG_TOPICS, TOPICS, topic_config_path, topic_path


class ChangeWatches:
    """The watches behind ``ZkState.events()``; they end when ``closed()`` turns true."""

    def __init__(self, client: Any, hints: Hints, closed: Callable[[], bool]) -> None:
        self._client = client
        self._hints = hints
        self._closed = closed
        # The DataWatch of each existing topic / config znode, by name, as the event that stops it.
        # Each dict is touched only by the callback of the ChildrenWatch that owns it (kazoo runs
        # one watch's callbacks one at a time).
        self._topic_watches: dict[str, threading.Event] = {}
        self._config_watches: dict[str, threading.Event] = {}

    def start(self) -> None:
        """Set the watches. Blocking (reads every topic and config once): run it in a worker thread."""
        self._watch_children(TOPICS, self._on_topics)
        self._watch_children(CONFIG_TOPICS, self._on_configs)
        self._watch_children(BROKER_IDS, self._on_brokers)

    def _watch_children(self, path: str, on_change: Callable[[list[str], bool], None]) -> None:
        calls = 0

        def watcher(children: list[str]) -> bool | None:
            nonlocal calls
            initial, calls = calls == 0, calls + 1
            if self._closed():
                return False  # kazoo drops the watch
            on_change(children, initial)
            return None

        ChildrenWatch(self._client, path, watcher)

    def _watch_data(self, path: str, hint: str) -> threading.Event:
        """DataWatch ``path``, hinting ``hint`` on every change; set the returned event to end it."""
        stop = threading.Event()
        calls = 0

        def watcher(data: bytes | None, stat: Any) -> bool | None:
            nonlocal calls
            initial, calls = calls == 0, calls + 1
            if self._closed() or stop.is_set():
                return False
            if not initial:
                self._hints.post(hint)
            return None

        DataWatch(self._client, path, watcher)
        return stop

    def _sync(
        self, watches: dict[str, threading.Event], children: list[str], path: Callable[[str], str], kind: str
    ) -> list[str]:
        """Watch every child's data and stop watching the ones gone; returns the new names."""
        current = set(children)
        for name in [name for name in watches if name not in current]:
            watches.pop(name).set()
        added = sorted(current - watches.keys())
        for name in added:
            watches[name] = self._watch_data(path(name), f"{kind}:{name}")
        return added

    def _on_topics(self, children: list[str], initial: bool) -> None:
        self._sync(self._topic_watches, children, topic_path, "topic")
        if not initial:
            self._hints.post("topics")

    def _on_configs(self, children: list[str], initial: bool) -> None:
        added = self._sync(self._config_watches, children, topic_config_path, "config")
        if not initial:
            for name in added:
                self._hints.post(f"config:{name}")

    def _on_brokers(self, children: list[str], initial: bool) -> None:
        if not initial:
            self._hints.post("brokers")
