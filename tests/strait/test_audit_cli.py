"""``strait audit``: the jobs are listed without importing PySpark, and a topology link becomes
reconcile's options (those given on the command line win)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from strait._audit_commands import JOBS, audit_group, resolve_link, with_topology
from strait.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_strait_help_does_not_import_pyspark() -> None:
    code = "import sys; from strait.cli import main; assert 'pyspark' not in sys.modules; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr


def test_audit_lists_the_jobs_that_are_installed_with_their_help() -> None:
    result = CliRunner().invoke(main, ["audit", "--help"])
    assert result.exit_code == 0, result.output
    assert "replay" in result.output and JOBS["replay"][:30] in result.output.replace("\n          ", " ")
    result = CliRunner().invoke(main, ["audit", "no-such-job"])
    assert result.exit_code == 2 and "no-such-job" in result.output


def write_topology(tmp_path: Path) -> Path:
    path = tmp_path / "appliance.json"
    path.write_text(
        json.dumps(
            {
                "sites": {
                    "east": {"bootstrap": "127.0.0.1:9001", "zookeeper": "127.0.0.1:2181", "zookeeper_chroot": "/e"},
                    "west": {"bootstrap": "127.0.0.1:9002", "zookeeper": "127.0.0.1:2181", "zookeeper_chroot": "/w"},
                },
                # A mirror admin URL nothing listens on: the mode cannot be learnt.
                "links": [{"name": "east-to-west", "source": "east", "target": "west", "admin": "http://127.0.0.1:9"}],
            }
        )
    )
    return path


def test_a_link_of_the_topology_fills_in_the_sites_the_user_did_not_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = write_topology(tmp_path)
    assert resolve_link(topology, "east-to-west", set()) == {"source": "127.0.0.1:9001", "target": "127.0.0.1:9002"}
    assert resolve_link(topology, "east-to-west", {"target"}) == {"source": "127.0.0.1:9001"}
    assert "did not say link east-to-west's mode" in capsys.readouterr().err


def test_a_bad_topology_or_link_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    topology = write_topology(tmp_path)
    with pytest.raises(click.UsageError, match="no link 'nope'"):
        resolve_link(topology, "nope", set())
    with pytest.raises(click.UsageError, match="--link"):
        resolve_link(topology, None, set())
    with pytest.raises(click.UsageError, match="no such topology file"):
        resolve_link(tmp_path / "missing.json", "east-to-west", set())


def test_with_topology_passes_the_resolved_options_to_the_job(tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    @click.command("reconcile")
    @click.option("--source")
    @click.option("--target")
    @click.option("--mode", default="offset")
    @click.option("--source-alias")
    @click.option("--link")
    def job(**kwargs: object) -> None:
        seen.update(kwargs)

    topology = write_topology(tmp_path)
    command = with_topology(job)
    result = CliRunner().invoke(
        command, ["--topology", str(topology), "--link", "east-to-west", "--target", "elsewhere:1"]
    )
    assert result.exit_code == 0, result.output
    assert seen == {
        "source": "127.0.0.1:9001",
        "target": "elsewhere:1",
        "mode": "offset",
        "source_alias": None,
        "link": "east-to-west",
    }
    assert audit_group.name == "audit"
