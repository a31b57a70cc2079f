"""The mirror's admin API over HTTPS: ``strait mirror start --admin-tls-keystore``, and the clients'
``--admin-ca`` / ``$STRAIT_MIRROR_ADMIN_CA``. A real mirror process (no links: the admin API is
what is tested), certificates from the test's own CA."""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mirror._admin import AdminApiError, MirrorAdminClient
from tests.mirror.test_service import MirrorProcess
from tests.node.harness import STRAIT
from tests.tls import TestCa, subject

pytestmark = pytest.mark.integration


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STRAIT, "mirror", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        check=False,
    )


def test_the_admin_api_serves_https_only_to_clients_that_trust_its_ca(tmp_path: Path) -> None:
    ca = TestCa(tmp_path / "pki")
    server = ca.issue("mirror", subject(CN="mirror"), ip="127.0.0.1", key_password="k3y-pass")
    password = tmp_path / "key.pw"
    password.write_text("k3y-pass\n")
    links = tmp_path / "links.toml"
    links.write_text("")
    mirror = MirrorProcess(
        tmp_path / "m",
        links,
        args=["--admin-tls-keystore", str(server.pem), "--admin-tls-password-file", str(password)],
    ).start()
    try:
        assert mirror.url.startswith("https://127.0.0.1:"), mirror.url
        token = mirror.token_file.read_text().strip()

        # Trusting the CA: reads, and a state change with the token.
        client = MirrorAdminClient(mirror.url, token=token, ca=str(ca.pem))
        assert client.links()["links"] == []
        with pytest.raises(AdminApiError) as unknown:
            client.pause("no-such-link")
        assert unknown.value.status == 404, unknown.value
        listed = cli("list", "--admin", mirror.url, "--admin-ca", str(ca.pem))
        assert listed.returncode == 0, listed.stderr
        by_env = cli("list", "--admin", mirror.url, env={"STRAIT_MIRROR_ADMIN_CA": str(ca.pem)})
        assert by_env.returncode == 0, by_env.stderr

        # Not trusting it: refused before any request is sent.
        with pytest.raises(AdminApiError, match="CERTIFICATE_VERIFY_FAILED"):
            MirrorAdminClient(mirror.url).links()
        untrusted = cli("list", "--admin", mirror.url)
        assert untrusted.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr, untrusted.stderr

        # Plain HTTP to the TLS port gets no answer.
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(mirror.url.replace("https://", "http://") + "/health", timeout=5)

    finally:
        mirror.stop()


def test_a_bad_keystore_or_password_is_refused_before_anything_starts(tmp_path: Path) -> None:
    ca = TestCa(tmp_path / "pki")
    server = ca.issue("mirror", subject(CN="mirror"), ip="127.0.0.1", key_password="right")
    links = tmp_path / "links.toml"
    links.write_text("")
    wrong = tmp_path / "wrong.pw"
    wrong.write_text("wrong\n")
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    base = ["start", "--config", str(links), "--state-dir", str(tmp_path / "state")]

    refused = cli(*base, "--admin-tls-keystore", str(not_pem))
    assert refused.returncode == 2 and "--admin-tls-keystore" in refused.stderr, refused.stderr
    assert "not.pem" in refused.stderr, refused.stderr
    refused = cli(*base, "--admin-tls-keystore", str(server.pem), "--admin-tls-password-file", str(wrong))
    assert refused.returncode == 2 and "--admin-tls-keystore" in refused.stderr, refused.stderr
    assert "wrong" not in refused.stderr.replace(str(wrong), ""), refused.stderr  # never the password
    refused = cli(*base, "--admin-tls-password-file", str(wrong))
    assert refused.returncode == 2 and "needs --admin-tls-keystore" in refused.stderr, refused.stderr
    assert not (tmp_path / "state").exists()  # nothing started
