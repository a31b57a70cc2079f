"""Broker registrations: ``/brokers/ids/<id>``, ephemeral, one per live broker.

Data (Kafka 3.x, version 5)::

    {"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://host:9092"],
     "jmx_port":-1,"features":{},"host":"host","port":9092,"timestamp":"<ms since epoch>","rack":null,
     "version":5}

``timestamp`` is the injected wall clock's reading when the znode was (re)created. A session
registers at most one broker id; the registration is kept across session expiry (see
:class:`._ephemeral.KeptEphemerals`) and deleted when the session closes. Blocking (kazoo
calls): run each function in one worker thread (``ZkSession.run``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import Any

from node.ids import NodeId

from ._ephemeral import Ephemeral, KeptEphemerals
from ._errors import BrokerIdInUse
from ._layout import BROKER_IDS, BrokerRegistration, broker_path, decode_broker, encode_broker
from ._reads import read_many, retried


def register(client: Any, kept: KeptEphemerals, clock_ms: Callable[[], int], reg: BrokerRegistration) -> None:
    """Create the ephemeral ``/brokers/ids/<id>`` (or update it if this session holds it) and keep it.

    Raises:
        BrokerIdInUse: another session holds that broker id.
        ValueError: this session already registered a different broker id.
    """
    path = broker_path(reg.broker_id)

    def one_broker_per_session(kept_paths: Collection[str]) -> None:
        for other in sorted(p for p in kept_paths if p.startswith(f"{BROKER_IDS}/") and p != path):
            raise ValueError(
                f"this ZkState already registered broker {other.rsplit('/', 1)[1]}; "
                f"cannot also register {reg.broker_id}"
            )

    registration = Ephemeral(
        path,
        lambda: encode_broker(reg, clock_ms()),
        functools.partial(BrokerIdInUse, reg.broker_id),
        f"register broker {reg.broker_id}",
    )
    kept.keep(client, registration, one_broker_per_session)


def live(client: Any) -> dict[NodeId, BrokerRegistration]:
    """The live brokers, by broker id (ascending)."""
    ids = sorted(NodeId(int(c)) for c in retried(client.get_children, BROKER_IDS) if c.isdigit())
    found = read_many(client, ((broker_id, broker_path(broker_id)) for broker_id in ids))
    return {broker_id: decode_broker(broker_id, data) for broker_id, data, _ in found}  # left out: gone meanwhile
