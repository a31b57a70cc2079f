"""Certificates for TLS tests, made in the test with ``cryptography``: a CA and what it signs.

:class:`TestCa` issues server certificates (for an IP address, as the tests' listeners are on
127.0.0.1) and client certificates (a subject of the test's choosing), valid from now or
already expired. Each certificate is written as three PEM files under the CA's directory:
``<name>.crt`` (the certificate), ``<name>.key`` (its private key, optionally encrypted) and
``<name>.pem`` (key and certificate together: what ``ssl.keystore.location`` takes).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from strait._secure_material import SERVER_AND_CLIENT, cert_pem, issue_certificate, key_pem, new_ca

_NAME_OIDS = {
    "CN": NameOID.COMMON_NAME,
    "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
    "O": NameOID.ORGANIZATION_NAME,
    "L": NameOID.LOCALITY_NAME,
    "ST": NameOID.STATE_OR_PROVINCE_NAME,
    "C": NameOID.COUNTRY_NAME,
}


def subject(**attributes: str) -> x509.Name:
    """``subject(C="US", O="Acme", OU="ops", CN="alice")``: attributes in certificate order (most general first)."""
    return x509.Name([x509.NameAttribute(_NAME_OIDS[k], v) for k, v in attributes.items()])


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    pem: Path  # key + certificate, for ssl.keystore.location


class TestCa:
    """A self-signed CA that writes what it issues under ``directory`` (made by strait's own
    certificate factory, :mod:`strait._secure_material`)."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, name: str = "strait test CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        self.name = subject(CN=name)
        self.key, self.cert = new_ca(
            self.name, not_before=now - datetime.timedelta(minutes=5), not_after=now + datetime.timedelta(days=2)
        )
        self.pem = directory / f"{name.replace(' ', '-')}.crt"
        self.pem.write_bytes(cert_pem(self.cert))

    def issue(
        self,
        file_name: str,
        name: x509.Name,
        *,
        ip: str | None = None,
        client: bool = False,
        expired: bool = False,
        key_password: str | None = None,
    ) -> Issued:
        """A certificate for ``name`` (with ``ip`` as its subject alternative name for a server), for
        TLS clients only when ``client`` (else for servers and clients: a node is both); ``expired``:
        valid only until yesterday."""
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=3), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=2))
        )
        key, cert = issue_certificate(
            self.key,
            self.cert,
            name,
            not_before=start,
            not_after=end,
            hosts=() if ip is None else (ip,),
            usages=(ExtendedKeyUsageOID.CLIENT_AUTH,) if client else SERVER_AND_CLIENT,
        )
        key_bytes, cert_bytes = key_pem(key, key_password), cert_pem(cert)
        issued = Issued(
            self.directory / f"{file_name}.crt",
            self.directory / f"{file_name}.key",
            self.directory / f"{file_name}.pem",
        )
        issued.cert.write_bytes(cert_bytes)
        issued.key.write_bytes(key_bytes)
        issued.pem.write_bytes(key_bytes + cert_bytes)
        return issued
