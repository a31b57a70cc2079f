"""node.client's one reader of Kafka client security properties: what it accepts, what it refuses
(naming the key, never a password), the TLS context and SASL credentials it builds, and the
properties it writes back."""

from __future__ import annotations

import pickle
import ssl
from pathlib import Path

import pytest

from node.client import (
    ClientSecurity,
    SaslCredentials,
    SecurityConfigError,
    parse_client_security,
    read_client_properties,
)
from tests.tls import TestCa, subject

SECRET = 'pa"ss\\word;'  # quotes, a backslash and a semicolon: the JAAS value must be escaped
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="ops" password="pa\\"ss\\\\word;";'


def test_plaintext_is_the_default_and_needs_nothing() -> None:
    security = parse_client_security({})
    assert security == ClientSecurity()
    assert security.site_client_kwargs() == {} and security.properties() == {"security.protocol": "PLAINTEXT"}


def test_sasl_ssl_with_a_prefix_is_read_and_written_back(tmp_path: Path) -> None:
    ca = TestCa(tmp_path)
    client = ca.issue("client", subject(CN="ops"))
    props = {
        "kafka.security.protocol": "sasl_ssl",
        "kafka.ssl.truststore.type": "pem",
        "kafka.ssl.truststore.location": str(ca.pem),
        "kafka.ssl.keystore.location": str(client.pem),
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.sasl.mechanism": "scram-sha-512",
        "kafka.sasl.jaas.config": JAAS,
        "kafka.bootstrap.servers": "not looked at",
    }
    security = parse_client_security(props, prefix="kafka.")
    assert (security.protocol, security.truststore, security.keystore, security.check_hostname) == (
        "SASL_SSL",
        str(ca.pem),
        str(client.pem),
        False,
    )
    assert (security.sasl_mechanism, security.sasl_username, security.sasl_password) == ("SCRAM-SHA-512", "ops", SECRET)
    assert SECRET not in repr(security) and "password" not in repr(security).replace("_password", "")
    kwargs = security.site_client_kwargs()
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext) and not kwargs["ssl_context"].check_hostname
    assert kwargs["ssl_context"].minimum_version == ssl.TLSVersion.TLSv1_2
    assert kwargs["sasl"] == SaslCredentials("SCRAM-SHA-512", "ops", SECRET)
    # What it writes back reads as the same settings (the password escaped in the JAAS entry).
    assert parse_client_security(security.properties()) == ClientSecurity(**{**security.__dict__, "prefix": ""})
    assert pickle.loads(pickle.dumps(security)) == security  # Spark ships it to its executors


def test_plain_gets_the_plain_login_module_and_the_hostname_check_by_default(tmp_path: Path) -> None:
    security = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p")
    assert security.properties()["sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule"
    )
    assert security.site_client_kwargs().keys() == {"sasl"}
    tls = parse_client_security({"security.protocol": "SSL"})
    context = tls.ssl_context()
    assert context is not None and context.check_hostname  # the system's CAs, the host name checked


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"security.protocol": "TLS"}, "kafka.security.protocol 'TLS' is not one of PLAINTEXT, SSL"),
        (
            {"security.protocol": "SSL", "ssl.truststore.type": "JKS"},
            "kafka.ssl.truststore.type 'JKS': strait reads PEM files only \\(convert with keytool",
        ),
        ({"security.protocol": "SSL", "ssl.keystore.type": "PKCS12"}, "kafka.ssl.keystore.type 'PKCS12'"),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"},
            "kafka.ssl.endpoint.identification.algorithm 'http'",
        ),
        ({"security.protocol": "SASL_SSL"}, "kafka.sasl.mechanism is missing; strait speaks PLAIN, SCRAM"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "kafka.sasl.mechanism is 'GSSAPI'"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "kafka.sasl.jaas.config is missing"),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'x.Login required password="s3";',
            },
            "kafka.sasl.jaas.config needs both username and password",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'x.L required password="s3"',
            },
            "kafka.sasl.jaas.config: cannot read the end",
        ),
    ],
)
def test_a_bad_value_is_an_error_naming_the_key_never_the_password(props: dict[str, str], message: str) -> None:
    with pytest.raises(SecurityConfigError, match=message) as caught:
        parse_client_security({f"kafka.{k}": v for k, v in props.items()}, prefix="kafka.")
    assert "s3" not in str(caught.value)


def test_files_that_cannot_be_used_are_named_when_the_context_is_built(tmp_path: Path) -> None:
    missing = parse_client_security({"security.protocol": "SSL", "ssl.truststore.location": str(tmp_path / "no.pem")})
    with pytest.raises(SecurityConfigError, match=f"ssl.truststore.location {tmp_path / 'no.pem'}"):
        missing.site_client_kwargs()
    ca = TestCa(tmp_path)
    locked = ca.issue("locked", subject(CN="c"), key_password="key-secret")
    wrong = ClientSecurity("SSL", truststore=str(ca.pem), keystore=str(locked.pem), key_password="not-it")
    with pytest.raises(SecurityConfigError, match=f"ssl.keystore.location {locked.pem}") as caught:
        wrong.ssl_context()
    assert "not-it" not in str(caught.value)
    right = ClientSecurity("SSL", truststore=str(ca.pem), keystore=str(locked.pem), key_password="key-secret")
    assert right.ssl_context() is not None


def test_a_properties_file_is_read_with_javas_syntax_and_its_problems_name_it(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol = SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=a.B required \\\n  username=u password=p;\n"
    )
    props = read_client_properties(path)
    assert parse_client_security(props).sasl_username == "u"
    with pytest.raises(SecurityConfigError, match=f"cannot read {tmp_path / 'none'}"):
        read_client_properties(tmp_path / "none")
    path.write_text("a=1\na=2\n")
    with pytest.raises(SecurityConfigError, match="duplicate key"):
        read_client_properties(path)
