"""The chaos workloads: Kafka clients that record what they do in a :class:`chaos.history.History`.

Each workload is a named *process* of the history, works from a background thread and has the
same lifecycle: ``start()`` (a bad configuration raises :class:`chaos.errors.WorkloadError`
there), ``stop(timeout)`` (bounded: operations still pending after ``timeout`` seconds complete as
``info``; a client that will not close is abandoned after a few more seconds and named in
``errors``), ``errors`` (the exceptions that ended it), ``client_errors`` (the latest non-fatal
client errors: expected under faults), ``running``, ``pending`` and ``count(f, type)``; ``with``
starts and stops it. Counters are safe to read from any thread.

- :class:`Producer` -- writes unique values ``"<run id>-<process>-<seq>"``: ``send`` invoke, then
  ``ok`` (partition, offset), ``fail`` (proven absent) or ``info`` (indeterminate). Idempotent with
  ``acks=all`` by default; ``idempotent=False`` with ``acks`` of your choice is the plain producer.
  ``repoint(bootstrap)`` continues against another site after a failover.
- :class:`GroupConsumer` -- a consumer-group member: ``poll`` (the records it processed),
  ``assign`` (each rebalance), ``commit``; ``commit="before"`` with ``restart_every`` is the
  positive control that skips records; ``drain(ends, timeout)`` records ``drain``.
- :class:`MirrorReader` -- ``lag`` samples of a mirror and ``read`` entries (role "mirror") of
  what the target holds.
- :func:`final_read` -- the complete ``read`` (``final: true``) of a site at the end of a run.
- :class:`TransactionalLoop` -- a consume-transform-produce loop in transactions (``txn``), some
  aborted on purpose; :func:`final_txn_read` records the ``txn-read`` of its output and its
  group's offsets that the exactly-once checker judges.

Which client errors are ``fail`` and which ``info``: :mod:`chaos.workloads._outcomes`.
The entries and fields are those of :mod:`chaos.history` and the chaos spec.
"""

from ._base import Workload as Workload
from ._group import GroupConsumer as GroupConsumer
from ._mirror import MirrorReader as MirrorReader
from ._outcomes import commit_outcome as commit_outcome
from ._outcomes import send_outcome as send_outcome
from ._producer import Producer as Producer
from ._read import final_read as final_read
from ._txn import TransactionalLoop as TransactionalLoop
from ._txn import final_txn_read as final_txn_read
from ._txn import output_topic as output_topic
from ._txn import output_value as output_value
from ._txn import transactional_id as transactional_id
from ._txn import txn_group as txn_group
