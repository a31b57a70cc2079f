"""An embedded single-node ZooKeeper server, run from the jars the pyspark wheel ships.

Used for local clusters (``strait up``, ``strait zookeeper start``) and tests; production
uses an external ensemble. The server is ``org.apache.zookeeper.server.ZooKeeperServerMain``
in a child JVM that:

- is a :class:`node.proc.Child`: it runs in its own session (a terminal's Ctrl-C reaches only
  us; we stop it explicitly) and dies with its parent: ``PR_SET_PDEATHSIG`` (Linux) sends it
  SIGKILL when the *thread* that started it exits, so call :meth:`EmbeddedZooKeeper.start`
  from a long-lived thread (the main thread), never from a short-lived worker thread such as
  ``trio.to_thread.run_sync``'s;
- logs (JVM output and log4j2 at WARN) to ``<data_dir>/zookeeper.log``; ``zoo.cfg`` and
  ``log4j2.properties`` are written next to it.

Readiness is observed with the ``srvr`` four-letter command (the server answers with a
``Mode:`` line once it serves requests), never by sleeping.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
from pathlib import Path
from types import TracebackType

from node.proc import Child, ChildExited, Deadline, NotReady, reserve_port, spawn, wait_until

from ._errors import ZooKeeperError

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
LOG_FILE = "zookeeper.log"
CONFIG_FILE = "zoo.cfg"
LOG4J_FILE = "log4j2.properties"

_TICK_TIME_MS = 2000
_LOG_TAIL_LINES = 30
_BIND_RETRIES = 3  # only when we picked the port ourselves (port 0) and lost the race for it

# Small, fast-starting JVM: ZooKeeper for a local cluster needs little heap and no JIT tiers.
_JVM_OPTIONS = (
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Dlog4j2.disable.jmx=true",
    "-Dzookeeper.jmx.log4j.disable=true",
)

_LOG4J2_PROPERTIES = """\
# Written by strait: ZooKeeper logs WARN and above to stdout, which is redirected to zookeeper.log.
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
"""


def find_zookeeper_jars() -> Path:
    """The ``jars`` directory of the installed pyspark wheel, holding ``zookeeper-*.jar``.

    pyspark is located without importing it (that takes seconds).

    Raises:
        ZooKeeperError: pyspark is not installed, or its jars dir has no ``zookeeper-*.jar``
            (the message names the directory searched).
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ZooKeeperError(
            "pyspark is not installed, so there are no ZooKeeper jars to run; install the 'spark' extra "
            "(pip install 'strait[spark]') or pass the jars dir explicitly (--jars / STRAIT_ZOOKEEPER_JARS)"
        )
    return check_zookeeper_jars(Path(spec.origin).parent / "jars")


def check_zookeeper_jars(jars: Path) -> Path:
    """Return ``jars`` if it is a directory holding ``zookeeper-*.jar``.

    Raises:
        ZooKeeperError: naming ``jars`` and what is missing.
    """
    if not jars.is_dir():
        raise ZooKeeperError(f"ZooKeeper jars dir {jars} does not exist or is not a directory")
    if not any(jars.glob("zookeeper-[0-9]*.jar")):
        raise ZooKeeperError(f"ZooKeeper jars dir {jars} holds no zookeeper-<version>.jar")
    return jars


def server_status(host: str, port: int, timeout: float = 1.0) -> str | None:
    """The server's answer to ``srvr``, or None when it is not (yet) serving requests.

    Never raises for connection problems: refused, reset, timed out all mean "not serving".
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"srvr")
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return None
    text = b"".join(chunks).decode("utf-8", "replace")
    return text if "Mode:" in text else None


def _free_port(host: str) -> int:
    # Below the ephemeral range: a ZooKeeper restarted on its port finds it still free.
    return reserve_port(host)


class EmbeddedZooKeeper:
    """One standalone ZooKeeper server in a child JVM, serving on ``host:port``.

    ``port=0`` picks a free port on ``host`` (retrying if another process grabs it first);
    :attr:`port` holds the real one once started. Use as a context manager or call
    :meth:`start` / :meth:`stop`. Not thread-safe; blocking (wrap in a worker thread from trio,
    but mind the parent-death note in the module docstring).
    """

    def __init__(
        self,
        data_dir: Path,
        port: int = 2181,
        *,
        host: str = "127.0.0.1",
        jars: Path | None = None,
        java: str = "java",
    ) -> None:
        """Validate the arguments; nothing is started yet.

        Raises:
            ZooKeeperError: ``data_dir`` exists and is not a directory, ``port`` is out of range,
                ``java`` is not an executable (or not on PATH), or the jars are missing.
        """
        if data_dir.exists() and not data_dir.is_dir():
            raise ZooKeeperError(f"ZooKeeper data dir {data_dir} exists and is not a directory")
        if not 0 <= port <= 65535:
            raise ZooKeeperError(f"ZooKeeper port {port} is out of range 0..65535")
        java_path = shutil.which(java)
        if java_path is None:
            raise ZooKeeperError(f"java executable {java!r} not found (is a JRE installed and on PATH?)")
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.jars = check_zookeeper_jars(jars) if jars is not None else find_zookeeper_jars()
        self.java = java_path
        self._auto_port = port == 0
        self._child: Child | None = None
        self._exit_code: int | None = None

    @property
    def connect_string(self) -> str:
        """``host:port`` for ``zookeeper.connect`` (append ``/chroot`` as needed)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's log file (JVM output and log4j2 messages at WARN and above)."""
        return self.data_dir / LOG_FILE

    @property
    def pid(self) -> int | None:
        """The JVM's process id while started (also after it died, until :meth:`stop`)."""
        return self._child.pid if self._child is not None else None

    def poll(self) -> int | None:
        """The JVM's exit code if it has exited, else None (also None when never started)."""
        if self._child is None:
            return self._exit_code
        return self._child.poll()

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and block until it serves requests (observed with ``srvr``).

        Raises:
            ZooKeeperError: already started; the JVM exited during startup; or it was not serving
                within ``timeout`` seconds (the JVM is killed). The message carries the log tail.
        """
        if self._child is not None:
            raise ZooKeeperError(f"ZooKeeper on {self.connect_string} is already started (pid {self._child.pid})")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self._auto_port and server_status(self.host, self.port) is not None:
            raise ZooKeeperError(f"another ZooKeeper already serves on {self.connect_string}; choose another port")
        deadline = Deadline(timeout, f"ZooKeeper on {self.host} to serve")
        for attempt in range(_BIND_RETRIES):
            if self._auto_port:
                self.port = _free_port(self.host)
            self._spawn()
            try:
                self._wait_serving(deadline)
                return
            except _PortTaken:
                tail = self._log_tail()
                self._kill_and_reap()
                if attempt + 1 == _BIND_RETRIES:
                    raise ZooKeeperError(
                        f"ZooKeeper could not bind {self.connect_string} after {_BIND_RETRIES} attempts\n{tail}"
                    ) from None
            except BaseException:
                self._kill_and_reap()
                raise

    def stop(self, timeout: float = 10.0) -> int:
        """Stop the server: SIGTERM, wait up to ``timeout`` s, then SIGKILL. Idempotent.

        Returns the JVM's exit code (143 after a clean SIGTERM, negative for a signal kill;
        0 if it was never started). Waits for the process, so no zombie is left.
        """
        child = self._child
        if child is None:
            return self._exit_code if self._exit_code is not None else 0
        self._exit_code = child.stop(timeout).returncode
        self._child = None
        return self._exit_code

    def __enter__(self) -> EmbeddedZooKeeper:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedZooKeeper({self.connect_string}, data_dir={self.data_dir}, pid={self.pid})"

    # -- internals --------------------------------------------------------------------------

    def _write_config(self) -> Path:
        config = self.data_dir / CONFIG_FILE
        lines = {
            "tickTime": str(_TICK_TIME_MS),
            "dataDir": str(self.data_dir.resolve()),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "maxClientCnxns": "0",  # per client address: unlimited
            "maxCnxns": "0",  # in total: unlimited (set explicitly, or ZooKeeper warns at startup)
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "srvr,ruok",
        }
        config.write_text("".join(f"{key}={value}\n" for key, value in lines.items()), encoding="utf-8")
        (self.data_dir / LOG4J_FILE).write_text(_LOG4J2_PROPERTIES, encoding="utf-8")
        return config

    def _spawn(self) -> None:
        config = self._write_config()
        command = [
            self.java,
            *_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={(self.data_dir / LOG4J_FILE).resolve()}",
            "-cp",
            f"{self.jars.resolve()}/*",
            MAIN_CLASS,
            str(config.resolve()),
        ]
        self._child = spawn(command, self.log_path, name="ZooKeeper", cwd=self.data_dir)

    def _wait_serving(self, deadline: Deadline) -> None:
        child = self._child
        assert child is not None
        try:
            wait_until(lambda: server_status(self.host, self.port) is not None, deadline, watch=[child])
        except ChildExited as exc:
            if self._auto_port and "BindException" in self._log_tail():
                raise _PortTaken from None
            raise ZooKeeperError(
                f"ZooKeeper on {self.connect_string} exited with code {exc.returncode} during startup "
                f"(log {self.log_path}):\n{self._log_tail()}"
            ) from None
        except NotReady:
            raise ZooKeeperError(
                f"ZooKeeper on {self.connect_string} was not serving before the startup deadline; killed it "
                f"(log {self.log_path}):\n{self._log_tail()}"
            ) from None

    def _kill_and_reap(self) -> None:
        if self._child is not None:
            self._exit_code = self._child.kill()
            self._child = None

    def _log_tail(self) -> str:
        return self._child.log_tail(_LOG_TAIL_LINES) if self._child is not None else "(not started)"


class _PortTaken(Exception):
    """Internal: the port we picked was taken before the JVM could bind it."""
