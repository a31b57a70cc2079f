"""``strait mirror``: bad values are refused naming them, before anything runs (no processes).

The commands against a running mirror are exercised in tests/mirror/test_service.py.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from strait.cli import main

LINKS = """
[[link]]
name = "east-to-west"
source = { name = "east", bootstrap = "127.0.0.1:9092" }
target = { name = "west", bootstrap = "127.0.0.1:9192" }
"""


def strait(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["mirror", *args])
    return result.exit_code, result.output


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_admin_url_is_named() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code, output = strait("list", "--admin", url)
    assert code == 1 and f"cannot reach the mirror admin API at {url}" in output, output
    code, output = strait("status", "east-to-west", "--admin", url)
    assert code == 1 and f"cannot reach the mirror admin API at {url}" in output, output


@pytest.mark.parametrize("url", ["localhost:8080", "ftp://h:1", "http://", "http://h:99999"])
def test_a_malformed_admin_url_is_refused(url: str) -> None:
    code, output = strait("list", "--admin", url)
    assert code == 2 and "--admin" in output and repr(url) in output, output


def test_the_token_file_must_exist_and_hold_a_token(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    missing = tmp_path / "missing.token"
    code, output = strait("pause", "east-to-west", "--admin", url, "--token-file", str(missing))
    assert code == 2 and "--token-file" in output and "missing.token" in output, output
    bad = tmp_path / "bad.token"
    bad.write_text("two words\n")
    code, output = strait("resume", "east-to-west", "--admin", url, "--token-file", str(bad))
    assert code == 2 and "bad.token" in output and "one line of 16-1024 characters" in output, output
    code, output = strait("delete", "east-to-west", "--admin", url)
    assert code == 2 and "--token-file" in output, output


def test_start_refuses_a_bad_link_file_admin_address_or_member_id(tmp_path: Path) -> None:
    links = tmp_path / "links.toml"
    links.write_text(LINKS + "sync_interval = 1\n")
    code, output = strait("start", "--config", str(links), "--state-dir", str(tmp_path / "s"))
    assert code == 1 and "links.toml: link 'east-to-west': unknown key 'sync_interval'" in output, output
    links.write_text(LINKS)
    code, output = strait("start", "--config", str(links), "--admin", "127.0.0.1")
    assert code == 2 and "--admin" in output and "'127.0.0.1' is not HOST:PORT" in output, output
    code, output = strait("start", "--config", str(links), "--member-id", "a/b")
    assert code == 1 and "member id 'a/b'" in output, output
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    level = logging.getLogger().level  # `start` got as far as setting up its logging: put it back
    try:
        code, output = strait(
            "start", "--config", str(links), "--state-dir", str(tmp_path / "s"), "--admin-token-file", str(empty)
        )
    finally:
        logging.getLogger().setLevel(level)
    assert code == 1 and "empty.token must be one line" in output, output
