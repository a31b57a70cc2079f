"""``strait doctor``'s checks: is this host fit to run a broker node, as the Ansible roles set it up?

:func:`diagnose` takes a node's config (from :func:`node.config.load_config`; None for the
host-wide checks only) and returns a list of :class:`Finding` (check, subject, ok/warn/fail,
a detail naming the measured and the expected value). Any FAIL means the host is unfit
(``strait doctor`` exits 1); a WARN is advice. Where each line is drawn, and why:

- log dirs (``_disks``): missing or unwritable, not XFS, read-only, too little space or
  inodes: fail; not ``noatime``, on the root filesystem, sharing a disk, low space: warn;
- sysctls (``_tuning``): the one table :data:`SYSCTLS` that the common role mirrors; a
  different value warns (tuning, not correctness);
- open files (``_tuning``): a soft ``RLIMIT_NOFILE`` under 100000 fails;
- clock (``_clock``): not synchronised, or a large error bound, warns;
- ZooKeeper (``_network``): a server that is unreachable or not serving fails, unless a
  majority of the servers serve (then it warns);
- ports (``_network``): a port another process holds fails; one held by this node, running
  (its admin API answers ``/health`` with this ``broker.id``), is fine.

Every reading of the machine goes through :class:`Probes`, so tests reach every verdict with
fakes; the module docstrings say more about each check.
"""

from ._clock import ClockState as ClockState
from ._diagnose import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S
from ._diagnose import Probes as Probes
from ._diagnose import Thresholds as Thresholds
from ._diagnose import diagnose as diagnose
from ._disks import DiskLimits as DiskLimits
from ._disks import DiskUsage as DiskUsage
from ._findings import Finding as Finding
from ._findings import Status as Status
from ._findings import exit_code as exit_code
from ._findings import tally as tally
from ._network import SrvrReply as SrvrReply
from ._tuning import MIN_OPEN_FILES as MIN_OPEN_FILES
from ._tuning import SYSCTLS as SYSCTLS
from ._tuning import Sysctl as Sysctl
from ._tuning import open_files_limit as open_files_limit
