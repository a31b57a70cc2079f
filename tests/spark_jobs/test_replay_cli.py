"""``replay``'s command line: input it refuses before any Spark starts, with the option named,
exit status 2 (bad input) or 3 (the new primary unreachable), and nothing in --out."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from spark_jobs.jobs.replay import command
from tests.spark_jobs.divergence_files import T0, write_export


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(command, list(args))
    return result.exit_code, result.output


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return write_export(tmp_path / "exports", {("orders", 0): (5, [(T0, b"k", b"v")])})


def test_help_names_every_option_and_the_exit_statuses() -> None:
    code, text = run("--help")
    assert code == 0
    for option in ("--export", "--site", "--out", "--topics", "--from", "--to", "--execute", "--overwrite", "--master"):
        assert option in text
    assert "Exit status:" in text and "1  a dry run found records to replay" in text


def test_an_incomplete_export_is_refused_and_out_is_left_alone(export: Path, tmp_path: Path) -> None:
    (export / "summary.json").unlink()
    out = tmp_path / "out"
    code, text = run("--export", str(export.parent.parent), "--site", "127.0.0.1:9", "--out", str(out))
    assert code == 2, text
    assert f"error: replay: --export {export}: incomplete export: summary.json is missing" in text
    assert not out.exists()


def test_a_missing_export_directory_is_refused(tmp_path: Path) -> None:
    code, text = run("--export", str(tmp_path / "nowhere"), "--site", "127.0.0.1:9", "--out", str(tmp_path / "o"))
    assert code == 2 and "--export" in text and "no such directory" in text


def test_topics_the_export_does_not_hold_are_refused(export: Path, tmp_path: Path) -> None:
    code, text = run("--export", str(export), "--site", "127.0.0.1:9", "--out", str(tmp_path / "o"), "--topics", "nope")
    assert code == 2
    assert "--topics nope: not in the export (it holds orders)" in text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--from", "yesterday"], "Invalid value for '--from'"),
        (["--from", "2026-11-26T04:00:00Z", "--to", "2026-11-26T03:00:00+00:00"], "is not before --to"),
        (["--site", "no-port"], "Invalid value for '--site'"),
        (["--present-from", "latest"], "Invalid value for '--present-from'"),
    ],
)
def test_bad_option_values_are_refused_naming_the_option(
    export: Path, tmp_path: Path, args: list[str], expected: str
) -> None:
    base = {"--export": str(export), "--site": "127.0.0.1:9", "--out": str(tmp_path / "o")}
    for name, value in zip(args[::2], args[1::2], strict=True):
        base[name] = value
    code, text = run(*(item for pair in base.items() for item in pair))
    assert code == 2 and expected in text, text
    assert not (tmp_path / "o").exists()


def test_an_unreachable_new_primary_is_exit_status_3_naming_site(export: Path, tmp_path: Path) -> None:
    site = f"127.0.0.1:{closed_port()}"
    code, text = run("--export", str(export), "--site", site, "--out", str(tmp_path / "o"))
    assert code == 3, text
    assert f"error: replay: --site {site}:" in text
    assert not (tmp_path / "o" / "summary.json").exists()
