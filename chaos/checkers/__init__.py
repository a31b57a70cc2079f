"""The chaos suite's offline checkers: pure functions from a history to the anomalies it shows.

``check(history)`` runs every checker on a :class:`chaos.history.History` (``chaos.history.load``
reads a saved one) and returns one :class:`CheckerResult` per checker, in the order below:
verdict ``fail`` (it found an anomaly), ``pass``, or ``skipped`` (the history held nothing it
could examine: no consumer group, no mirror read, no promote; never a silent ``pass``).
``CHECKERS[name](history)`` runs one. No checker does I/O or reads a clock.

Each :class:`Anomaly` has a ``name`` (Jepsen's, where it means the same thing), a sentence
saying what is wrong, its ``records`` (topic, partition, offset, value, process, ``index`` of
the history entry, ``op``, site) and ``near``: the nemesis and failover entries whose interval
(a nemesis's start to its stop) covers, or lies within 5 s of, the operations of those records
(by the monotonic clock). Consecutive records with one fault are one anomaly with a ``count``
(a run that lost 10,000 writes in a row reads as one anomaly); an anomaly lists at most 10
records, a result at most 100 anomalies; counts stay exact.

Terms. An *acknowledged* value: a ``send`` completed ``ok`` (with its topic, partition,
offset). A value never acknowledged (``fail``, ``info``, no completion) may appear once.
The *final read* of a site: its ``read`` entries with ``final`` true (reading the same record
twice is one record). The *primary*: the site whose final read has the role ``primary`` (after
a failover, the promoted site); a *mirror*: role ``mirror``. A *site's* records: what its
reads, its polls and its acknowledgements hold; reads name their site, other entries the site
serving producers when they happened (see ``_view.py``: by the promotes before them, or the
old primary for a record the failover exported). The *export*: the records a failover
exported as divergence. *Consecutive*: adjacent among the offsets concerned.

==================== ========================= ==============================================================
checker              anomaly (Jepsen's name)   definition
==================== ========================= ==============================================================
lost-write           ``lost``                  an acknowledged value that no final read of the primary
                     (lost-write)              holds at any position, and that no export holds (those are
                                               rpo-accuracy's); acknowledgements below the primary's log
                                               start are not examined
duplicate            ``duplicate``             one value at two or more positions among one site's records
                                               from reads and polls
inconsistent-offsets ``inconsistent-offsets``  two different values at one position of one site, across
                                               acknowledgements, polls and reads (the old primary's
                                               exported records are not compared with what replaced them)
moved                ``moved``                 an acknowledged value the primary's final read holds, but
                                               never at the acknowledged topic, partition and offset
nonmonotonic-send    ``nonmonotonic-send``     one producer's acknowledged offsets of a partition on one
                                               site, in the order of its invokes, not increasing
nonmonotonic-poll    ``nonmonotonic-poll``     one consumer's (or plain reader's) polled offsets of a
                                               partition on one site, between two of its ``assign`` entries
                                               (or a ``reset`` of its group), not strictly increasing
skipped-read         ``poll-skip``             a group's polls jumped over offsets that the final read
                                               shows hold records: one consumer polled *a* then *b* within
                                               an assignment with records between; or no consumer of the
                                               group polled a record of the primary between the lowest and
                                               highest offsets the group polled (between resets)
commit-regression    ``commit-regression``     a group's acknowledged committed offset of a partition on
                                               one site below its previous commit, with no ``reset`` between
unseen               ``unseen``                for a group that recorded a ``drain``: an acknowledged value
                                               in the primary's final read, in a drained partition below
                                               the end drained to, that no consumer of the group polled
                     ``incomplete-drain``      a ``drain`` that failed
mirror-divergence    ``divergent``             a mirror's final read holds, at an offset, a value the
                                               primary's does not hold there (or holds nothing, at or above
                                               its log start)
                     ``missing``               an offset within a mirror's [log start, end) that the
                                               primary holds a record at and the mirror does not
rpo-accuracy         ``unexported-loss``       after a promote with ``planned`` false: an acknowledged value
                                               missing from the new primary that no export holds
                     ``exported-present``      an exported value the new primary holds
                     ``planned-loss``          an acknowledged value exported after a planned promote
exactly-once         ``aborted-read`` (G1a),   a transactional consume-transform-produce loop's output (the
                     ``txn-duplicate``,        last ``txn-read``) against its ``txn`` operations, the group's
                     ``txn-lost``, ``txn-gap``, committed offsets and the primary's final read of its input:
                     ``offsets-mismatch``,     see ``_txn.py``'s docstring for each definition
                     ``phantom-output``
==================== ========================= ==============================================================

The checkers that read the primary's final read are skipped without one; unseen without a
drain; mirror-divergence without a mirror's final read; rpo-accuracy without a promote that is
unplanned (or planned and followed by an export); exactly-once without a ``txn-read``.
"""

from ._anomaly import ANOMALY_LIMIT as ANOMALY_LIMIT
from ._anomaly import RECORD_LIMIT as RECORD_LIMIT
from ._anomaly import Anomaly as Anomaly
from ._anomaly import CheckerResult as CheckerResult
from ._anomaly import Verdict as Verdict
from ._registry import CHECKERS as CHECKERS
from ._registry import Checker as Checker
from ._registry import check as check
from ._view import WINDOW_NS as WINDOW_NS
from ._view import CheckerError as CheckerError
