"""``strait doctor`` in-process (unit): options, exit codes, the JSON list, bad input as exit 2.

The host-wide checks read this machine; they can only warn except the open-file limit, which
the tests pin with --min-open-files, so the exit codes below hold on any host.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from node.doctor import DEFAULT_TIMEOUT_S, MIN_OPEN_FILES, DiskLimits, Thresholds
from strait.cli import main

JSON_KEYS = ["check", "subject", "status", "detail", "measured", "expected"]


def doctor(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["doctor", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def write_config(path: Path, **props: str) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def test_the_option_defaults_are_node_doctors() -> None:
    command = main.commands["doctor"]
    defaults = {p.name: p.default for p in command.params if isinstance(p, click.Option)}
    disks, thresholds = DiskLimits(), Thresholds()
    assert defaults["filesystems"] == disks.filesystems
    assert defaults["min_free_space"] == disks.min_free_space_pct
    assert defaults["min_free_inodes"] == disks.min_free_inodes_pct
    assert defaults["min_open_files"] == thresholds.min_open_files == MIN_OPEN_FILES
    assert defaults["max_clock_error"] == thresholds.max_clock_error_ms
    assert defaults["timeout"] == thresholds.timeout_s == DEFAULT_TIMEOUT_S


def test_host_wide_checks_as_json_exit_0_with_warnings_only() -> None:
    code, output = doctor("--json", "--min-open-files", "1")
    assert code == 0, output
    findings = json.loads(output)
    assert {f["check"] for f in findings} == {"sysctl", "open-files", "clock"}
    assert all(list(f) == JSON_KEYS for f in findings)
    assert all(f["status"] in ("ok", "warn") for f in findings)


def test_a_failed_check_exits_1_in_the_table_too() -> None:
    code, output = doctor("--min-open-files", str(2**40))
    assert code == 1
    assert "FAIL" in output and "open-files" in output and "host-wide checks only" in output
    assert "1 failed," in output


def test_the_open_file_limit_of_another_process() -> None:
    code, output = doctor("--json", "--min-open-files", "1", "--pid", str(os.getppid()))
    assert code == 0, output
    (limit,) = [f for f in json.loads(output) if f["check"] == "open-files"]
    assert limit["subject"] == f"pid {os.getppid()}"


def test_an_unreachable_zookeeper_fails(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    with socket.socket() as bound:  # bound, not listening: connections to it are refused
        bound.bind(("127.0.0.1", 0))
        config = write_config(
            tmp_path / "server.properties",
            **{
                "broker.id": "1",
                "log.dirs": str(tmp_path / "logs"),
                "zookeeper.connect": f"127.0.0.1:{bound.getsockname()[1]}/strait",
                "listeners": "PLAINTEXT://127.0.0.1:0",
            },
        )
        code, output = doctor("--config", str(config), "--json", "--min-open-files", "1")
    assert code == 1
    findings = json.loads(output)
    (zookeeper,) = [f for f in findings if f["check"] == "zookeeper"]
    assert zookeeper["status"] == "fail" and "unreachable" in zookeeper["detail"]
    assert {f["check"] for f in findings} >= {"log-dir", "filesystem", "free-space", "port"}


@pytest.mark.parametrize(
    ("props", "words"),
    [
        ({"broker.id": "1", "zookeeper.connect": "zk:2181", "num.partitions": "many"}, "num.partitions='many'"),
        ({"broker.id": "1", "zookeeper.connect": "zk:2181", "log.dri": "/data"}, "log.dri"),
        ({"broker.id": "1"}, "zookeeper.connect: is required"),
    ],
)
def test_a_bad_config_is_a_usage_error_naming_the_value(tmp_path: Path, props: dict[str, str], words: str) -> None:
    code, output = doctor("--config", str(write_config(tmp_path / "server.properties", **props)))
    assert code == 2 and words in output and "--config" in output


def test_a_missing_config_file_a_bad_number_or_an_unknown_pid_is_a_usage_error(tmp_path: Path) -> None:
    code, output = doctor("--config", str(tmp_path / "nope.properties"))
    assert code == 2 and "nope.properties" in output and "does not exist" in output
    code, output = doctor("--min-free-space", "lots")
    assert code == 2 and "'lots'" in output
    code, output = doctor("--pid", str(2**22 + 1))  # above Linux's pid_max ceiling: never a process
    assert code == 2 and f"process {2**22 + 1}" in output
