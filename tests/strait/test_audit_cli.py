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

from strait._audit_commands import JOBS, audit_group, resolve_link, with_site_topology, with_topology
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


def write_secured_topology(tmp_path: Path, tls: str) -> Path:
    """A TOML topology whose site ``east`` is SASL_SSL (``tls`` its table) and ``west`` PLAINTEXT."""
    (tmp_path / "ca.pem").write_text("not read here\n")
    (tmp_path / "ops.pw").write_text("ops-secret\n")
    path = tmp_path / "sites.toml"
    path.write_text(
        f"""
[sites.east]
bootstrap = "127.0.0.1:9093"
zookeeper = "127.0.0.1:2181/east"
tls = {tls}
sasl = {{ mechanism = "SCRAM-SHA-512", username = "ops", password_file = "ops.pw" }}

[sites.west]
bootstrap = "127.0.0.1:9094"
zookeeper = "127.0.0.1:2181/west"

[[link]]
name = "east-to-west"
source = "east"
target = "west"
mirror_admin = "http://127.0.0.1:9"
"""
    )
    return path


def test_a_secured_site_of_the_topology_is_reached_with_its_tls_and_sasl(tmp_path: Path) -> None:
    from node.client import ClientSecurity

    topology = write_secured_topology(tmp_path, '{ ca = "ca.pem", check_hostname = false }')
    found = resolve_link(topology, "east-to-west", set())
    assert found["source_command_config"] == ClientSecurity(
        "SASL_SSL",
        truststore=str(tmp_path / "ca.pem"),
        check_hostname=False,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="ops",
        sasl_password="ops-secret",
    )
    assert "target_command_config" not in found  # west is PLAINTEXT: nothing to say
    assert "source_command_config" not in resolve_link(topology, "east-to-west", {"command_config"})
    two_files = write_secured_topology(tmp_path, '{ ca = "ca.pem", cert = "ca.pem", key = "ops.pw" }')
    with pytest.raises(click.UsageError, match=r"site east: tls\.cert and tls\.key are two files") as caught:
        resolve_link(two_files, "east-to-west", set())
    assert "ops-secret" not in str(caught.value)


def test_ledger_and_replay_take_a_site_of_the_topology_by_name(tmp_path: Path) -> None:
    from spark_jobs.jobs._security import command_config_option

    seen: dict[str, object] = {}

    def bootstrap(ctx: click.Context, param: click.Parameter, value: str) -> str:
        if ":" not in value:
            raise click.BadParameter(f"{value!r} is not host:port")
        return value

    @click.command("replay")
    @click.option("--site", required=True, callback=bootstrap)
    @command_config_option("--command-config", "security", help="--site is secured")
    def job(**kwargs: object) -> None:
        seen.clear()
        seen.update(kwargs)

    command = with_site_topology(job)
    topology = write_secured_topology(tmp_path, '{ ca = "ca.pem" }')
    result = CliRunner().invoke(command, ["--site", "east", "--topology", str(topology)])
    assert result.exit_code == 0, result.output
    assert seen["site"] == "127.0.0.1:9093"
    security = seen["security"]
    assert security is not None and (security.protocol, security.sasl_username) == ("SASL_SSL", "ops")  # type: ignore[attr-defined]
    result = CliRunner().invoke(command, ["--topology", str(topology), "--site", "west"])
    assert result.exit_code == 0 and seen == {"site": "127.0.0.1:9094", "security": None}, result.output
    plain = tmp_path / "plain.properties"
    plain.write_text("security.protocol=PLAINTEXT\n")
    result = CliRunner().invoke(
        command, ["--topology", str(topology), "--site", "east", "--command-config", str(plain)]
    )
    assert result.exit_code == 0 and seen["security"].protocol == "PLAINTEXT", result.output  # type: ignore[attr-defined]
    result = CliRunner().invoke(command, ["--topology", str(topology), "--site", "north"])
    assert result.exit_code == 2 and "--site:" in result.output and "no site 'north'" in result.output
    result = CliRunner().invoke(command, ["--site", "east"])  # without --topology, --site is host:port
    assert result.exit_code == 2 and "'east' is not host:port" in result.output
