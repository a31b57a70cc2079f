"""reconcile's command line without sites: options, bad input (exit 2, naming the option), an
unreachable site (exit 3), never a summary.json left in --out."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from spark_jobs.jobs._reconcile_sides import parse_side
from spark_jobs.jobs.reconcile import command


def invoke(*args: str) -> Any:
    return CliRunner().invoke(command, list(args))


def closed_port() -> int:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_help_names_every_option_and_how_a_side_is_read() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for option in (
        "--source",
        "--target",
        "--topics",
        "--mode",
        "--source-alias",
        "--target-alias",
        "--link",
        "--out",
        "--overwrite",
        "--master",
        "--require-caught-up",
        "--continuous",
        "--checkpoint",
        "--trigger-seconds",
        "--until-idle",
    ):
        assert option in result.output, option
    text = " ".join(result.output.split())
    assert "host:port" in text and "segment paths" in text and "a value whose entries all exist is paths" in text


def test_a_side_is_paths_when_they_exist_else_a_bootstrap_list(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    side = parse_side("--source", f"{tmp_path / 'a'},{tmp_path / 'b'}")
    assert (side.kind, side.entries) == ("segments", (str(tmp_path / "a"), str(tmp_path / "b")))
    side = parse_side("--target", "127.0.0.1:9092, east-2:9092")
    assert (side.kind, side.value) == ("kafka", "127.0.0.1:9092,east-2:9092")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--target", "127.0.0.1:9"], "--source: required"),
        (["--source", "{tmp}/nowhere", "--target", "127.0.0.1:9"], "--source: '{tmp}/nowhere' is neither"),
        (["--source", "{tmp}/here,{tmp}/nowhere", "--target", "{tmp}/here"], "--source: {tmp}/nowhere does not exist"),
        (["--source", "127.0.0.1:9", "--target", "west:x"], "--target: 'west:x' is neither"),
        (["--source", "127.0.0.1:9", "--target", " , "], "--target: empty"),
        (["--source", "h:1", "--target", "h:2", "--mode", "mm2"], "--source-alias: required with --mode mm2"),
        (["--source", "h:1", "--target", "h:2", "--source-alias", "east"], "only with --mode mm2"),
        (["--source", "h:1", "--target", "h:2", "--mode", "fast"], "'fast' is not one of 'offset', 'mm2'"),
        (["--source", "h:1", "--target", "h:2", "--continuous"], "--checkpoint: required with --continuous"),
        (["--source", "h:1", "--target", "h:2", "--until-idle", "5"], "--until-idle: only with --continuous"),
        (["--source", "h:1", "--target", "h:2", "--topics", ","], "--topics: ',' names no topic"),
        (["--source", "h:1", "--target", "h:2", "--trigger-seconds", "0"], "--trigger-seconds"),
        (
            ["--source", "h:1", "--target", "{tmp}/here", "--continuous", "--checkpoint", "{tmp}/ck"],
            "--target must be a live site",
        ),
    ],
)
def test_bad_options_exit_2_naming_the_option_and_write_nothing(tmp_path: Path, args: list[str], expected: str) -> None:
    (tmp_path / "here").mkdir()
    out = tmp_path / "out"
    result = invoke(*(a.replace("{tmp}", str(tmp_path)) for a in args), "--out", str(out))
    assert result.exit_code == 2, result.output
    assert expected.replace("{tmp}", str(tmp_path)) in result.output
    assert not out.exists()


def test_command_configs_give_each_live_side_its_security_and_their_errors_name_the_option(tmp_path: Path) -> None:
    from node.client import ClientSecurity
    from spark_jobs.jobs._security import load_command_config

    both = tmp_path / "both.properties"
    both.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nbootstrap.servers=ignored:1\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="a" password="s3cr3t";\n'
    )
    assert load_command_config("--command-config", str(both)) == ClientSecurity(
        "SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_username="a", sasl_password="s3cr3t"
    )
    (tmp_path / "here").mkdir()
    jks = tmp_path / "jks.properties"
    jks.write_text("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n")
    cases = [
        (["--source-command-config", str(jks)], "--source-command-config", "ssl.truststore.type 'JKS'"),
        (["--command-config", str(jks)], "--command-config", "strait reads PEM files only"),
        (["--target-command-config", str(tmp_path / "none")], "--target-command-config", "does not exist"),
        (
            ["--target", str(tmp_path / "here"), "--target-command-config", str(both)],
            "--target-command-config",
            "--target is segment paths",
        ),
        (
            ["--source", str(tmp_path / "here"), "--target", str(tmp_path / "here"), "--command-config", str(both)],
            "--command-config",
            "both sides are segment paths",
        ),
    ]
    for args, option, message in cases:
        sides = ["--source", "h:1", "--target", "h:2"]
        result = invoke(*sides, *args, "--out", str(tmp_path / "out"))
        assert result.exit_code == 2 and option in result.output and message in result.output, (args, result.output)
        assert "s3cr3t" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.spark
def test_an_unreachable_site_exits_3_naming_the_option(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    source = f"127.0.0.1:{closed_port()}"
    result = invoke("--source", source, "--target", "127.0.0.1:9", "--out", str(out), "--timeout", "2")
    assert result.exit_code == 3, result.output
    assert f"error: reconcile: --source {source}: the site did not answer" in result.output
    assert not (out / "summary.json").exists()
    assert list(out.iterdir()) == []  # the staging dir is gone too


@pytest.mark.spark
def test_strait_audit_reconcile_takes_the_link_of_a_topology(spark: Any, tmp_path: Path) -> None:
    """The lead's ``--topology FILE --link NAME`` fills --source/--target in: a pure translation."""
    from strait.cli import main

    east, west = closed_port(), closed_port()
    topology = tmp_path / "appliance.json"
    sites = {
        name: {"bootstrap": f"127.0.0.1:{port}", "zookeeper": "127.0.0.1:9", "zookeeper_chroot": f"/{name}"}
        for name, port in (("east", east), ("west", west))
    }
    link = {"name": "east-to-west", "source": "east", "target": "west", "admin": "http://127.0.0.1:9"}
    topology.write_text(json.dumps({"sites": sites, "links": [link]}))
    out = tmp_path / "out"
    args = ["audit", "reconcile", "--topology", str(topology), "--link", "east-to-west", "--out", str(out)]
    result = CliRunner().invoke(main, [*args, "--timeout", "2"])
    assert result.exit_code == 3, result.output
    assert f"--source 127.0.0.1:{east}: the site did not answer" in result.output
    assert not (out / "summary.json").exists()
