"""Interoperability with Apache Kafka's own Java code (kafka-clients 4.3.0, Connect 4.3.0).

The Java programs in ``java/`` write segments with Kafka's ``MemoryRecordsBuilder`` and
``FileRecords`` and read segments back with Kafka's ``FileRecords``; drive a site with Kafka's
producer, consumer, Admin client and transactional producer (``Client*``); and run a Kafka
Connect worker (``ConnectWorker``). They are compiled once per session. The jars come from
``STRAIT_KAFKA_JARS`` (``make test`` sets it), else from ``<repo>/.cache/kafka-jars``; without
them the tier fails: it never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interop.javasite import three_node_site
from tests.node.harness import NodeProcess

REPO = Path(__file__).resolve().parents[2]
JAVA_SOURCES = Path(__file__).resolve().parent / "java"
JARS = (
    "kafka-clients-4.3.0.jar",
    "lz4-java-1.10.2.jar",
    "snappy-java-1.1.1.7.jar",
    "zstd-jni-1.5.6-10.jar",
    "slf4j-api-2.0.18.jar",
    # Kafka Connect's worker (ConnectWorker) and what its runtime loads.
    "connect-api-4.3.0.jar",
    "connect-runtime-4.3.0.jar",
    "connect-json-4.3.0.jar",
    "connect-file-4.3.0.jar",
    "connect-transforms-4.3.0.jar",
    "jackson-annotations-2.21.jar",
    "jackson-core-2.21.2.jar",
    "jackson-databind-2.21.2.jar",
    "jackson-module-blackbird-2.21.2.jar",
    "maven-artifact-3.9.15.jar",
    "classgraph-4.8.179.jar",
)
COMPILE_TIMEOUT_S = 180
RUN_TIMEOUT_S = 60


@dataclass(frozen=True)
class KafkaJava:
    """The compiled Java programs, runnable with Kafka's jars on the class path."""

    classpath: str
    tmpdir: Path

    def run(self, main: str, *args: str | Path | int, expect_ok: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``main`` (bounded by RUN_TIMEOUT_S); with ``expect_ok`` a non-zero exit fails the test."""
        cmd = [
            "java",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={self.tmpdir}",  # snappy and zstd unpack their native libraries here
            "-Dslf4j.internal.verbosity=ERROR",  # no "no SLF4J providers" notice on stderr
            "-cp",
            self.classpath,
            main,
            *(str(a) for a in args),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{main} did not finish within {RUN_TIMEOUT_S} s: {' '.join(cmd)}")
        if expect_ok and proc.returncode != 0:
            pytest.fail(
                f"{main} exited {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-4000:]}"
            )
        return proc


def _jar_dir() -> Path:
    configured = os.environ.get("STRAIT_KAFKA_JARS")
    return Path(configured).resolve() if configured else REPO / ".cache" / "kafka-jars"


@pytest.fixture(scope="session")
def kafka_java(tmp_path_factory: pytest.TempPathFactory) -> KafkaJava:
    jar_dir = _jar_dir()
    missing = [name for name in JARS if not (jar_dir / name).is_file()]
    if missing:
        pytest.fail(
            f"Apache Kafka's jars are missing from {jar_dir}: {', '.join(missing)}.\n"
            "Fetch them from the repository root with:\n"
            "    .ci/fetch-kafka-jars .cache/kafka-jars .venv/bin/pip\n"
            "(or point STRAIT_KAFKA_JARS at a directory that holds them).",
            pytrace=False,
        )
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.fail(
                f"{tool} is not on PATH: the Kafka interoperability tests need a JDK 17 or newer "
                "(on Debian: apt-get install openjdk-17-jdk-headless).",
                pytrace=False,
            )
    work = tmp_path_factory.mktemp("kafka-java")
    classes = work / "classes"
    classes.mkdir()
    jars = os.pathsep.join(str(jar_dir / name) for name in JARS)
    sources = sorted(str(p) for p in JAVA_SOURCES.glob("*.java"))
    cmd = ["javac", "-encoding", "UTF-8", "-Xlint:all", "-d", str(classes), "-cp", jars, *sources]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"javac did not finish within {COMPILE_TIMEOUT_S} s: {' '.join(cmd)}", pytrace=False)
    if proc.returncode != 0:
        pytest.fail(f"javac failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}", pytrace=False)
    return KafkaJava(classpath=os.pathsep.join([str(classes), jars]), tmpdir=work)


@pytest.fixture(scope="module")
def java_site(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[list[NodeProcess]]:
    """A three-node site for one test module (``javasite.three_node_site``)."""
    with three_node_site(tmp_path_factory.mktemp("java-site"), zookeeper) as nodes:
        yield nodes
