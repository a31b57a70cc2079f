"""Nemeses: the faults the chaos suite injects, each started and healed on purpose.

Jepsen's shape (see :class:`Nemesis`): ``start()`` injects the fault and returns once it is in
place (a killed process has exited, a paused one is stopped, a partition drops bytes);
``heal()`` ends it and returns once the targets are back in service (a killed node restarted
and ready). Both are idempotent; ``with nemesis:`` starts on entry and heals on exit. Tests and
the scenario runner choose *when* (after N acknowledgements, at a time), never by sleeping and
hoping.

- process: :class:`Kill` (kill -9 of each target's process group; heal starts it again),
  :class:`Pause` (SIGSTOP / SIGCONT of the group), and the one-shot :func:`kill_9`,
  :func:`pause` and :func:`resume` on a :class:`node.proc.Child`, and :func:`kill_9_pid` on a
  process another launcher spawned (a ``strait up``'s node or ZooKeeper: a site loss);
- network: :class:`Partition` over the proxies of a :mod:`chaos.proxy` server (``blackhole``
  or ``refuse``), and :func:`partitioned`, its form for trio code.
- disk: on a log dir that is a loop-mounted :class:`XfsImage`, :class:`DiskFull` (ENOSPC),
  :class:`ReadOnlyDir` (EROFS) and :class:`FailingDir` (EIO), each healed (and the node
  restarted) on heal; :class:`TornTail` cuts or garbles the end of active segments while the
  node is down (:func:`disk_faults_unavailable` says why the XFS ones cannot run here).

Failures raise :class:`chaos.errors.NemesisError` (a target that is not running, a signal that
did not take effect).
"""

from ._base import Nemesis as Nemesis
from ._base import NemesisContext as NemesisContext
from ._disk import DiskFull as DiskFull
from ._disk import FailingDir as FailingDir
from ._disk import ReadOnlyDir as ReadOnlyDir
from ._disk import TornFile as TornFile
from ._disk import TornTail as TornTail
from ._disk import XfsImage as XfsImage
from ._disk import disk_faults_unavailable as disk_faults_unavailable
from ._network import Partition as Partition
from ._network import PartitionMode as PartitionMode
from ._network import partitioned as partitioned
from ._process import Kill as Kill
from ._process import Pause as Pause
from ._process import ProcessTarget as ProcessTarget
from ._process import kill_9 as kill_9
from ._process import kill_9_pid as kill_9_pid
from ._process import pause as pause
from ._process import resume as resume
