"""A real Spark standalone cluster for the tests: one master and one worker started from the pyspark
wheel's own distribution (``pyspark/bin/spark-class``), and ``spark-submit`` against it.

Use it from a test module with ``from tests.spark_jobs.cluster import spark_cluster  # noqa: F401``
(a session fixture: started on first use, stopped at the end of the session) and
:meth:`StandaloneCluster.submit`. Tests that use it start Java processes: run them under
``flock /tmp/strait-heavy.lock`` like every test that starts servers.

What it guarantees (TESTING.md):

- every process binds 127.0.0.1 only (``--host 127.0.0.1``, ``SPARK_LOCAL_IP``): RPC ports are 0
  (the kernel picks), the web UIs are bound to loopback on port 0, the master's REST submission
  server (a fixed port, 6066) is off;
- readiness is observed in the logs: the master's "New state: ALIVE" (its URL from "Starting Spark
  master at spark://..."), then the worker's "Successfully registered with master";
- master, worker and each ``spark-submit`` run in their own process group (``node.proc.spawn``),
  die with the test process, and are stopped by their own pid: the worker's executors are in
  its group and go with it;
- the worker offers 1 core and 1 GiB; an application asks for one 512 MiB executor;
- nothing on the executors comes from the test's environment: the packages an application
  needs are shipped with ``--py-files`` (:func:`ship_packages`: a zip of strait's packages, what
  a real cluster needs too when the wheel is not installed on its workers), ``PYTHONPATH`` is
  emptied, and the Python is the test's interpreter (the venv with the third-party packages).
"""

from __future__ import annotations

import os
import re
import sys
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from node.proc import Child, Deadline, spawn, wait_until

pyspark = pytest.importorskip("pyspark", reason="PySpark is the spark extra: pip install -e '.[spark]'")

SPARK_HOME = Path(pyspark.__file__).parent
REPO = Path(__file__).resolve().parents[2]
#: What spark_jobs needs of strait on the executors and the driver (ARCHITECTURE.md: storage, node.client).
PACKAGES = ("spark_jobs", "node", "storage")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"

_MASTER_URL = re.compile(r"Starting Spark master at (spark://[\d.]+:\d+)")


def _env(directory: Path) -> dict[str, str]:
    """What every process of the cluster (and spark-submit) runs with."""
    conf = directory / "conf"  # empty: no spark-defaults.conf of this machine's user applies
    conf.mkdir(parents=True, exist_ok=True)
    return {
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",  # the master's and the worker's own heaps (not the executors')
        "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": "",
    }


def _log_text(child: Child) -> str:
    try:
        with child.log_path.open("rb") as f:
            f.seek(child.log_offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def ship_packages(dest: Path, packages: Sequence[str] = PACKAGES) -> Path:
    """A zip of strait's ``packages`` (their ``.py`` files) for ``spark-submit --py-files``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in packages:
            for path in sorted((REPO / package).rglob("*.py")):
                zf.write(path, path.relative_to(REPO).as_posix())
    return dest


@dataclass
class Submitted:
    """How a ``spark-submit`` ended: its exit code and its output (stdout and stderr, interleaved)."""

    returncode: int
    output: str


@dataclass
class StandaloneCluster:
    url: str  # spark://127.0.0.1:PORT
    master: Child
    worker: Child
    directory: Path
    packages: Path  # the --py-files zip of strait's packages

    def submit(
        self,
        script: Path,
        args: Sequence[str] = (),
        *,
        conf: Mapping[str, str] | None = None,
        timeout: float = 240.0,
        name: str = "spark-submit",
    ) -> Submitted:
        """Run ``spark-submit --master <url> --py-files <packages> script args`` (client mode) and
        wait up to ``timeout`` seconds; a submit that is still running then is killed (its whole
        group: the driver's JVM and Python) and the test fails with its output."""
        settings = {
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": str(WORKER_CORES),
            "spark.cores.max": str(WORKER_CORES),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.sql.session.timeZone": "UTC",
            "spark.pyspark.python": sys.executable,
            **(conf or {}),
        }
        argv = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.url, "--py-files", str(self.packages)]
        for key, value in settings.items():
            argv += ["--conf", f"{key}={value}"]
        log = self.directory / "submits" / f"{name}-{os.urandom(4).hex()}.log"
        child = spawn([*argv, str(script), *args], log, name=name, cwd=self.directory, env=_env(self.directory))
        code = child.wait(timeout)
        if code is None:
            child.stop(STOP_TIMEOUT_S)
            pytest.fail(f"spark-submit still running after {timeout:g} s; it wrote:\n{_log_text(child)[-6000:]}")
        child.stop(STOP_TIMEOUT_S)  # reaps it (and anything left in its group)
        return Submitted(code, _log_text(child))

    def stop(self) -> None:
        self.worker.stop(STOP_TIMEOUT_S)
        self.master.stop(STOP_TIMEOUT_S)


def start_cluster(directory: Path, *, timeout: float = START_TIMEOUT_S) -> StandaloneCluster:
    """Start a master and one worker in ``directory`` and return once the worker has registered.

    Raises node.proc.ChildExited / NotReady (with the log tail) when either does not come up.
    """
    env = _env(directory)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_props = directory / "master.properties"
    master_props.write_text("spark.master.rest.enabled=false\n")
    master = spawn(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
         "--webui-port", "0", "--properties-file", str(master_props)],
        directory / "master.log", name="spark master", cwd=directory, env=env,
    )  # fmt: skip
    try:
        deadline = Deadline(timeout, "the Spark master to be elected (New state: ALIVE)")

        def elected() -> str | None:
            text = _log_text(master)
            found = _MASTER_URL.search(text)
            return found[1] if found and "New state: ALIVE" in text else None

        url = wait_until(elected, deadline, watch=[master])
        worker = spawn(
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
             "--webui-port", "0", "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
             "--work-dir", str(directory / "work"), url],
            directory / "worker.log", name="spark worker", cwd=directory, env=env,
        )  # fmt: skip
    except BaseException:
        master.stop(STOP_TIMEOUT_S)
        raise
    try:
        wait_until(
            lambda: f"Successfully registered with master {url}" in _log_text(worker),
            Deadline(deadline.remaining(), f"the Spark worker to register with {url}"),
            watch=[worker],
        )
    except BaseException:
        worker.stop(STOP_TIMEOUT_S)
        master.stop(STOP_TIMEOUT_S)
        raise
    return StandaloneCluster(url, master, worker, directory, ship_packages(directory / "strait-packages.zip"))


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and worker for the whole session (see the module docstring)."""
    cluster = start_cluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster
    finally:
        cluster.stop()
