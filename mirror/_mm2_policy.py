"""MirrorMaker 2's topic naming (``DefaultReplicationPolicy``, separator ".") and which topics an mm2 link copies.

Naming:

- a remote topic is ``<source alias>.<topic>``: ``orders`` from ``east`` is ``east.orders``;
  ``topic_source("east.orders")`` is ``east`` and ``upstream_topic`` is ``orders``. A topic
  copied over several hops keeps every alias: ``west.east.orders`` came from west, which had
  it from east; its ``original_topic`` is ``orders``.
- internal topics: ``heartbeats`` (on every target), ``mm2-offset-syncs.<target>.internal``
  (kept on the source, MM2's default), ``<source>.checkpoints.internal`` (on the target).
- internal topics are never copied: names ending ``.internal`` or ``-internal``, or starting
  with ``__`` or ``.``; that covers the ``mm2-*.internal`` and ``*.checkpoints.internal`` topics.

Selection (``MirrorSourceConnector.shouldReplicateTopic``): a topic is copied from source to
target when the link's filter selects it **or** it is a heartbeats topic (``heartbeats``,
``east.heartbeats``, ...: always copied, so every hop can be monitored), it is not internal,
and it is not a **cycle**: none of the aliases in its chain is the target's. On west,
``east.orders`` is never copied back to east, nor is ``north.east.orders``; ``east.heartbeats``
is not copied to east either.
"""

from __future__ import annotations

from ._config import NameFilter

SEPARATOR = "."
HEARTBEATS_TOPIC = "heartbeats"
OFFSET_SYNCS_PREFIX = "mm2-offset-syncs"
INTERNAL_SUFFIX = SEPARATOR + "internal"
CHECKPOINTS_SUFFIX = SEPARATOR + "checkpoints" + INTERNAL_SUFFIX
MAX_TOPIC_NAME = 249  # Kafka's limit: a remote name longer than this cannot be created


def remote_topic(source_alias: str, topic: str) -> str:
    """The name ``topic`` from ``source_alias`` has on the target: ``<alias>.<topic>``."""
    return f"{source_alias}{SEPARATOR}{topic}"


def topic_source(topic: str) -> str | None:
    """The alias a remote topic came from, or None when ``topic`` is not a remote topic.

    As Java's ``String.split``: the name is split on the separator, trailing empty parts are
    dropped, and fewer than two parts means "not remote" (so ``east.`` is not remote, while
    ``.orders`` has the empty alias).
    """
    parts = topic.split(SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    if len(parts) < 2:
        return None
    return parts[0]


def upstream_topic(topic: str) -> str | None:
    """The topic's name one hop upstream (``east.orders`` -> ``orders``), None when not remote."""
    source = topic_source(topic)
    if source is None:
        return None
    return topic[len(source) + len(SEPARATOR) :]


def original_topic(topic: str) -> str:
    """The name at the first hop (``west.east.orders`` -> ``orders``); ``topic`` itself when not remote."""
    while True:
        upstream = upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        topic = upstream


def offset_syncs_topic(target_alias: str) -> str:
    """``mm2-offset-syncs.<target>.internal``: written on the source cluster (MM2's default location)."""
    return f"{OFFSET_SYNCS_PREFIX}{SEPARATOR}{target_alias}{INTERNAL_SUFFIX}"


def checkpoints_topic(source_alias: str) -> str:
    """``<source>.checkpoints.internal``: written on the target cluster."""
    return f"{source_alias}{CHECKPOINTS_SUFFIX}"


def is_heartbeats_topic(topic: str) -> bool:
    """``heartbeats`` or any remote copy of it (``east.heartbeats``, ``west.east.heartbeats``)."""
    return original_topic(topic) == HEARTBEATS_TOPIC


def is_checkpoints_topic(topic: str) -> bool:
    return topic.endswith(CHECKPOINTS_SUFFIX)


def is_mm2_internal_topic(topic: str) -> bool:
    """MM2's own topics (offset syncs, checkpoints, and the Connect ``mm2-*.internal`` topics)."""
    return topic.endswith(INTERNAL_SUFFIX)


def is_internal_topic(topic: str) -> bool:
    """Never copied: MM2's topics, Kafka's (``__consumer_offsets``, ``__transaction_state``), hidden ones
    (``.`` prefix), and Connect's (``-internal`` suffix)."""
    return (
        is_mm2_internal_topic(topic)
        or topic.startswith("__")
        or topic.startswith(".")
        or topic.endswith("-internal")
        or topic.endswith(".internal")
    )


def is_cycle(topic: str, target_alias: str) -> bool:
    """True when ``target_alias`` appears anywhere in ``topic``'s chain of source aliases.

    ``east.orders`` and ``north.east.orders`` are cycles for target ``east``: copying them
    there would bring east's own records back.
    """
    while True:
        source = topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream


def mm2_selects(link_topic_filter: NameFilter, source_alias: str, target_alias: str, topic: str) -> bool:
    """Whether an mm2 link from ``source_alias`` to ``target_alias`` copies source topic ``topic``.

    MM2's rule: (the filter selects it, or it is a heartbeats topic) and it is not internal and
    not a cycle. Besides, a topic whose remote name would exceed Kafka's 249 characters is not
    selected (the target could not create it).
    """
    if len(remote_topic(source_alias, topic)) > MAX_TOPIC_NAME:
        return False
    wanted = link_topic_filter.matches(topic) or is_heartbeats_topic(topic)
    return wanted and not is_internal_topic(topic) and not is_cycle(topic, target_alias)


def checkpoint_topic_name(source_alias: str, target_alias: str, topic: str) -> str:
    """The target-side name a checkpoint for source topic ``topic`` carries (MM2's ``renameTopicPartition``).

    Normally the remote name (``orders`` from east -> ``east.orders``); a topic that itself
    came from the target (``west.orders`` seen on east, target west) is named by its original
    name (``orders``), where the group's offsets on the target belong.
    """
    if topic_source(topic) == target_alias:
        return original_topic(topic)
    return remote_topic(source_alias, topic)
