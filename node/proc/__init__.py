"""One process kit: spawn a child in its own session, observe it ready, stop it within a bound.

Used by everything that runs strait's processes: ``strait up`` and ``strait site up``
(strait/_site.py, strait/_appliance.py), the embedded ZooKeeper (node/coordination), the test
harnesses and the benchmarks, and by every writer of a file another process polls for. Only
the standard library is imported, so any package may use it (storage keeps its own
``write_atomically`` because storage imports nothing of ours).

- :func:`spawn` -> :class:`Child`: own session and process group, output appended to a log
  file, SIGKILLed by the kernel when the spawning thread dies (no orphans);
  :meth:`Child.stop` (SIGTERM, a bounded wait, then SIGKILL of the whole group) and
  :meth:`Child.kill`; :meth:`Child.signal` signals the group (chaos's nemeses pause and
  resume with it);
- readiness with a :class:`Deadline`: :func:`wait_ready_file`, :func:`wait_port`,
  :func:`wait_http_ok`, and :func:`wait_until` for any other condition; :func:`spawn_ready`
  spawns and waits for the ready file in one step (killing a child that is not ready); they raise
  :class:`ChildExited` or :class:`NotReady` (both :class:`ProcessError`), naming what was
  awaited, with the child's log tail; the probes (:func:`read_ready_file`, :func:`port_open`,
  :func:`http_ok`) look once and never raise;
- :func:`atomic_write` (temp file, fsync, rename, directory fsync) and :func:`log_tail`;
- :func:`reserve_port`: a port to configure a server with before it starts, below the kernel's
  ephemeral range so no other process's connection or port-0 bind takes it meanwhile.
"""

from ._child import Child as Child
from ._child import Stopped as Stopped
from ._child import spawn as spawn
from ._files import LOG_TAIL_LINES as LOG_TAIL_LINES
from ._files import atomic_write as atomic_write
from ._files import log_tail as log_tail
from ._ports import reserve_port as reserve_port
from ._ready import POLL_S as POLL_S
from ._ready import ChildExited as ChildExited
from ._ready import Deadline as Deadline
from ._ready import NotReady as NotReady
from ._ready import ProcessError as ProcessError
from ._ready import http_ok as http_ok
from ._ready import port_open as port_open
from ._ready import read_ready_file as read_ready_file
from ._ready import spawn_ready as spawn_ready
from ._ready import wait_http_ok as wait_http_ok
from ._ready import wait_port as wait_port
from ._ready import wait_ready_file as wait_ready_file
from ._ready import wait_until as wait_until
