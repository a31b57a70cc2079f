"""Controller election in Kafka's layout: the ephemeral ``/controller`` and ``/controller_epoch``.

An election is one ZooKeeper transaction, as Kafka 2.2+ runs it
(``KafkaZkClient.registerControllerAndIncrementControllerEpoch``):

1. read ``/controller_epoch`` (its value E and znode version V; absent: E = 0);
2. commit ``create /controller`` (ephemeral) together with ``set /controller_epoch = E+1 if at
   version V`` (or ``create /controller_epoch = 1`` when it was absent);
3. if the create failed, someone holds ``/controller``: we lost, unless it is ours already
   (the same session and broker id, e.g. a retry after a lost reply), which returns the
   current epoch; if only the epoch write failed, the epoch moved under us: go to 1.

Invariant: while ``/controller`` exists, no election commits, so each epoch is given to exactly
one election and the epoch in ``/controller_epoch`` is that of the live controller.

``/controller`` is ephemeral but, unlike the broker registration, not kept across a session
expiry (see :mod:`._ephemeral`): controllership ends with the session, and a new election
decides. ``/controller`` holds ``{"version":1,"brokerid":1,"timestamp":"<ms since epoch>"}``
(the timestamp from the session's injected clock); ``/controller_epoch`` holds a decimal
string, not JSON.

All functions block (kazoo calls): run each in one worker thread (``ZkSession.run``).
"""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from node.ids import NodeId
from node.zkkit import session_of

from ._ephemeral import remove
from ._errors import CoordinationError
from ._layout import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    decode_controller,
    decode_controller_epoch,
    encode_controller,
    encode_controller_epoch,
)
from ._transactions import failure

_ATTEMPTS = 50  # the epoch only moves under us when a controller comes and goes meanwhile


def elect(client: Any, broker_id: NodeId, timestamp_ms: int) -> int | None:
    """Try to become controller: create the ephemeral ``/controller`` and bump
    ``/controller_epoch`` in one transaction. Returns the new controller epoch, or None when
    another broker holds ``/controller``.

    No two elections get the same epoch, and epochs only grow. If this session already is
    the controller as ``broker_id`` (say, a retry after a lost reply), returns the current
    epoch. Controllership ends with the session (or :func:`resign`).

    Raises:
        ValueError: ``broker_id`` is negative.
        MalformedZnode: ``/controller_epoch`` (or ``/controller``) does not decode.
        CoordinationError: the epoch kept changing under us.
    """
    _check_broker_id(broker_id)
    for _ in range(_ATTEMPTS):
        try:
            data, stat = client.get(CONTROLLER_EPOCH)
            epoch, epoch_version = decode_controller_epoch(data), stat.version
        except NoNodeError:
            epoch, epoch_version = 0, None
        tx = client.transaction()
        tx.create(CONTROLLER, encode_controller(broker_id, timestamp_ms), ephemeral=True)
        if epoch_version is None:
            tx.create(CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1))
        else:
            tx.set_data(CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1), version=epoch_version)
        error = failure(tx.commit())
        if error is None:
            return epoch + 1
        index, exc = error
        if index == 0 and isinstance(exc, NodeExistsError):
            return _epoch_if_ours(client, broker_id)
        if index == 1 and isinstance(exc, (BadVersionError, NodeExistsError, NoNodeError)):
            continue
        raise exc
    raise CoordinationError(f"could not elect broker {broker_id} controller: {CONTROLLER_EPOCH} kept changing")


def _epoch_if_ours(client: Any, broker_id: NodeId) -> int | None:
    """After losing the create: the current epoch if ``/controller`` is this session's for ``broker_id``."""
    current = read(client)
    if current is None:
        return None  # it vanished since: this election is lost anyway; the caller may run another
    holder, epoch, owner = current
    return epoch if holder == broker_id and owner == session_of(client) else None


def read(client: Any) -> tuple[NodeId, int, int] | None:
    """``(broker id, epoch, owner session)`` of the live controller, or None when there is none.

    The three reads are pipelined in one session, so ZooKeeper answers them in order: if
    ``/controller`` has the same creation zxid before and after reading the epoch, it existed
    throughout, and the epoch read is the one its election wrote.
    """
    for _ in range(_ATTEMPTS):
        first = client.get_async(CONTROLLER)
        epoch = client.get_async(CONTROLLER_EPOCH)
        again = client.exists_async(CONTROLLER)
        try:
            data, stat = first.get()
        except NoNodeError:
            return None
        try:
            epoch_data, _ = epoch.get()
        except NoNodeError:
            epoch_data = None  # a foreign writer's controller without an epoch: read below
        later = again.get()
        if later is None or later.czxid != stat.czxid:
            continue  # the controller changed while we read
        if epoch_data is None:
            raise CoordinationError(f"{CONTROLLER} exists but {CONTROLLER_EPOCH} does not")
        return decode_controller(data), decode_controller_epoch(epoch_data), int(stat.ephemeralOwner)
    raise CoordinationError(f"could not read the controller: {CONTROLLER} kept changing")


def current(client: Any) -> tuple[NodeId, int] | None:
    """``(controller broker id, controller epoch)``, or None while there is no controller."""
    controller = read(client)
    return None if controller is None else controller[:2]


def resign(client: Any, broker_id: NodeId) -> bool:
    """Delete ``/controller`` if this session holds it as ``broker_id``; True if it did.

    Anyone else's ``/controller`` is left alone (returns False).

    Raises:
        ValueError: ``broker_id`` is negative.
    """
    _check_broker_id(broker_id)
    what = f"resign controller {broker_id}"
    return remove(client, CONTROLLER, None, what, only_if=lambda data: decode_controller(data) == broker_id)


def _check_broker_id(broker_id: NodeId) -> None:
    if broker_id < 0:
        raise ValueError(f"broker id {broker_id} is negative")
