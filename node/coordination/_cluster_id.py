"""The cluster id: ``/cluster/id``, persistent, ``{"version":"1","id":"<22-char base64url uuid>"}``.

Created by the first broker that asks for it; every broker after that reads the same id.
Blocking (kazoo calls): run :func:`read_or_create` in one worker thread (``ZkSession.run``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from ._layout import CLUSTER_ID, decode_cluster_id, encode_cluster_id, new_uuid
from ._reads import retried


def read_or_create(client: Any) -> str:
    """The cluster id in ``/cluster/id``, created on first use; concurrent creators agree on one."""
    try:
        data, _ = retried(client.get, CLUSTER_ID)
        return decode_cluster_id(data)
    except NoNodeError:
        pass
    with contextlib.suppress(NodeExistsError):  # another creator won; everyone reads the winner's id
        client.create(CLUSTER_ID, encode_cluster_id(new_uuid()), makepath=True)
    data, _ = retried(client.get, CLUSTER_ID)
    return decode_cluster_id(data)
