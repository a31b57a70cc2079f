"""Kazoo watches that turn ZooKeeper changes into hints for trio (see :mod:`._hints`).

Four ``ChildrenWatch`` (topics, topic configs, broker ids, offline replicas) and these
``DataWatch``:

- one per topic assignment (hint ``topic:<name>``) and per topic config (``config:<name>``);
- one per offline-replicas znode (``offline``);
- ``/controller`` (``controller``) and ``/admin/reassign_partitions`` (``reassignment``):
  a ``DataWatch`` also reports creation and deletion.

and one plain watch per partition state (:class:`StateWatches`, hint ``states``), for every
partition in a topic's assignment as it appears; set from the topic's assignment, so partitions
added later are watched too.

kazoo re-arms its recipes after reconnects and session expiry; :class:`StateWatches` are set again
after a new session by the session. The callbacks run on kazoo's threads: they only mark the
session's snapshot cache (:mod:`._read_cache`) and post hints, which never blocks.

Each watch's first call reports the state at the moment the watch was set; it is not a
change, so it posts nothing, unless a snapshot read the znode before the watch was set (it may
have changed in between). A deleted znode's watch fires (hinting the deletion)
before its parent's ``ChildrenWatch``, which then stops it; a re-created name gets a new one.
A topic's partition-state watches share the topic's stop event and end with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kazoo.recipe.watchers import ChildrenWatch, DataWatch  # type: ignore[import-untyped]

from ._errors import MalformedZnode
from ._hints import Hints
from ._layout import (
    BROKER_IDS,
    CONFIG_TOPICS,
    CONTROLLER,
    OFFLINE_REPLICAS,
    REASSIGN_PARTITIONS,
    TOPICS,
    decode_topic,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from ._read_cache import ReadCache

OnData = Callable[[bytes | None], None]


class StateWatches:
    """The watches on partition states: plain ZooKeeper ``exists`` watches, re-armed without waiting.

    kazoo's ``DataWatch`` reads the znode again (one round trip, waited for in kazoo's one callback
    thread) before it reports a change; when the controller moves a thousand leaderships at once,
    the reports came one round trip apart, so the brokers learnt of them over seconds. Here an
    event marks the path at once and re-arms the watch with an ``exists`` whose answer nobody
    waits for; when the answer comes (the watch is set again, atomically with that read), the
    path is marked again and ``states`` hinted, so a re-read after the hint sees every change up to
    the re-arming and any later change fires the watch. A snapshot caches a path's value only
    while its watch is armed (:meth:`ReadCache.arm`): a value read while it was not may be stale.

    :meth:`watch_all` sets a topic's watches and waits for them (one pipelined round trip), so a
    hint posted after it is followed by reports of every later change. A new session loses every
    watch: :meth:`rearm` sets them all again. A watch whose topic's ``stop`` is set ends at its
    next event.
    """

    def __init__(
        self, client: Any, cache: ReadCache, changed: Callable[[str], None], closed: Callable[[], bool]
    ) -> None:
        self._client = client
        self._cache = cache
        self._changed = changed  # marks the path and posts the hint
        self._closed = closed
        self._lock = threading.Lock()
        self._stops: dict[str, threading.Event] = {}  # watched path -> its topic's stop event

    def watch_all(self, paths: list[str], stop: threading.Event) -> None:
        """Set the watches and wait for them to be set (blocking: kazoo's callback thread)."""
        with self._lock:
            for path in paths:
                self._stops[path] = stop
        if self._closed():
            return
        pending = [(path, self._client.exists_async(path, watch=self._on_event)) for path in paths]
        armed = []
        for path, result in pending:
            try:
                result.get()
                armed.append(path)
            except Exception:  # a lost connection: the cache is invalidated and rearm() follows
                continue
        self._cache.arm(armed)

    def rearm(self) -> None:
        """Set every watch again (a new session: ZooKeeper forgot them all)."""
        with self._lock:
            for path in [path for path, stop in self._stops.items() if stop.is_set()]:
                del self._stops[path]
            paths = list(self._stops)
        self._cache.disarm(paths)
        for path in paths:
            self._rearm(path)

    def _rearm(self, path: str) -> None:
        if self._closed():
            return

        def armed(result: Any) -> None:
            if result.successful():
                self._cache.arm([path])
            self._changed(path)

        self._client.exists_async(path, watch=self._on_event).rawlink(armed)

    def _on_event(self, event: Any) -> None:
        """kazoo's callback thread: mark the path, then re-arm (never waits for ZooKeeper)."""
        path = event.path
        if path is None or event.type == "NONE":
            return  # the session ended: rearm() follows the new one
        with self._lock:
            stop = self._stops.get(path)
            if stop is not None and stop.is_set():
                del self._stops[path]
                stop = None
        self._cache.disarm([path])
        if stop is None or self._closed():
            return
        self._cache.mark([path])
        self._rearm(path)


class ChangeWatches:
    """The watches behind ``ZkSession.events()``; they end when ``closed()`` turns true."""

    def __init__(self, client: Any, hints: Hints, closed: Callable[[], bool], cache: ReadCache | None = None) -> None:
        self._client = client
        self._hints = hints
        self._closed = closed
        self._cache = cache
        # The DataWatch of each existing topic / config / offline-replicas znode, by name, as the
        # event that stops it. Each dict is touched only by the callback of the ChildrenWatch that
        # owns it (kazoo runs one watch's callbacks one at a time).
        self._topic_watches: dict[str, threading.Event] = {}
        self._config_watches: dict[str, threading.Event] = {}
        self._offline_watches: dict[str, threading.Event] = {}
        self.states = StateWatches(client, cache or ReadCache(), self._state_changed, closed)

    def start(self) -> None:
        """Set the watches. Blocking (reads every topic, config and partition state once): run it
        in a worker thread."""
        self._watch_children(TOPICS, self._on_topics)
        self._watch_children(CONFIG_TOPICS, self._on_configs)
        self._watch_children(BROKER_IDS, self._on_brokers)
        self._watch_children(OFFLINE_REPLICAS, self._on_offline)
        self._watch_data(CONTROLLER, "controller")
        self._watch_data(REASSIGN_PARTITIONS, "reassignment")

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

    def _watch_data(
        self,
        path: str,
        hint: str,
        stop: threading.Event | None = None,
        on_data: OnData | None = None,
        topic: str | None = None,
    ) -> threading.Event:
        """DataWatch ``path``, hinting ``hint`` on every change; set the returned event (``stop``,
        or a new one) to end it. ``on_data`` sees the data of every call, the first included.

        With ``topic`` (a znode of that topic the snapshot cache holds), the watch arms the path in
        the cache (kazoo reads and watches in one request) and every change marks the whole topic
        to be read again before the hint is posted."""
        stop = stop or threading.Event()
        calls = 0
        cache = self._cache if topic is not None else None

        def watcher(data: bytes | None, stat: Any) -> bool | None:
            nonlocal calls
            initial, calls = calls == 0, calls + 1
            if self._closed() or stop.is_set():
                return False
            if on_data is not None:
                on_data(data)
            if cache is not None:
                cache.arm([path])  # kazoo read it and set the watch in one request
                if not initial:
                    # The assignment (maybe a topic deleted and made again) or the config: all of the topic.
                    cache.mark_topic(topic or "")
            if not initial:
                self._hints.post(hint)
            return None

        DataWatch(self._client, path, watcher)
        return stop

    def _watch_topic(self, name: str) -> threading.Event:
        """The topic's assignment, and the state of each partition it lists (from now on)."""
        stop = threading.Event()
        watched: set[int] = set()  # touched only by this topic's DataWatch callback

        def on_assignment(data: bytes | None) -> None:
            if data is None:
                return  # deleted: the topics ChildrenWatch stops everything
            try:
                partitions = decode_topic(name, data, 0).partitions
            except MalformedZnode:
                return  # a reader of the assignment reports it
            added = sorted(partitions.keys() - watched)
            watched.update(added)
            self.states.watch_all([partition_state_path(name, p) for p in added], stop)

        return self._watch_data(topic_path(name), f"topic:{name}", stop, on_assignment, topic=name)

    def _state_changed(self, path: str) -> None:
        """A partition state changed: mark it, then hint ``states``."""
        if self._cache is not None:
            self._cache.mark([path])
        self._hints.post("states")

    def _sync(
        self,
        watches: dict[str, threading.Event],
        children: list[str],
        watch: Callable[[str], threading.Event],
    ) -> list[str]:
        """Watch every child and stop watching the ones gone; returns the new names."""
        current = set(children)
        for name in [name for name in watches if name not in current]:
            watches.pop(name).set()
        added = sorted(current - watches.keys())
        for name in added:
            watches[name] = watch(name)
        return added

    def _on_topics(self, children: list[str], initial: bool) -> None:
        self._sync(self._topic_watches, children, self._watch_topic)
        if not initial:
            self._hints.post("topics")

    def _on_configs(self, children: list[str], initial: bool) -> None:
        added = self._sync(
            self._config_watches,
            children,
            lambda name: self._watch_data(topic_config_path(name), f"config:{name}", topic=name),
        )
        if not initial:
            for name in added:
                self._hints.post(f"config:{name}")

    def _on_brokers(self, children: list[str], initial: bool) -> None:
        if not initial:
            self._hints.post("brokers")

    def _on_offline(self, children: list[str], initial: bool) -> None:
        self._sync(
            self._offline_watches, children, lambda name: self._watch_data(f"{OFFLINE_REPLICAS}/{name}", "offline")
        )
        if not initial:
            self._hints.post("offline")
