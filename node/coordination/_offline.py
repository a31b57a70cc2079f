"""A broker's offline replicas: ``/strait/offline_replicas/<id>``, ephemeral (strait extension).

Data: ``{"version":1,"partitions":[["t",0],["t",3]]}``, the replicas of broker ``<id>`` on
failed log dirs; absent when there are none. When a log dir fails (JBOD), the broker publishes
which of its replicas were on it, so that leaders drop it from those ISRs and the controller
moves leadership away. A dead broker's offline replicas do not matter (it is gone from
``/brokers/ids`` too), hence ephemeral; like the registration it is kept across session expiry
(:class:`._ephemeral.KeptEphemerals`). Blocking: run :func:`publish` in one worker thread.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from node.ids import NodeId

from ._ephemeral import Ephemeral, KeptEphemerals
from ._errors import BrokerIdInUse
from ._layout import encode_offline_replicas, offline_replicas_path, validate_partition, validate_topic_name


def publish(client: Any, kept: KeptEphemerals, broker_id: NodeId, partitions: Iterable[tuple[str, int]]) -> None:
    """Publish the replicas of ``broker_id`` on failed log dirs, replacing what was published, and
    keep the znode across session expiry; an empty ``partitions`` deletes it.

    Raises:
        BrokerIdInUse: another session holds that broker's znode.
        ValueError: a negative broker id, an invalid topic name or partition.
    """
    if broker_id < 0:
        raise ValueError(f"broker id {broker_id} is negative")
    wanted = frozenset((topic, partition) for topic, partition in partitions)
    for topic, partition in wanted:
        validate_topic_name(topic)
        validate_partition(topic, partition)
    path, in_use = offline_replicas_path(broker_id), functools.partial(BrokerIdInUse, broker_id)
    if not wanted:
        kept.drop(client, path, in_use, f"clear offline replicas of broker {broker_id}")
        return
    data = encode_offline_replicas(wanted)
    kept.keep(
        client,
        Ephemeral(path, lambda: data, in_use, f"publish offline replicas of broker {broker_id}", makepath=True),
    )
