"""The secrets of a secured appliance (``strait up --secure``): a CA, a certificate per node,
SCRAM passwords and a ZooKeeper digest credential per site, made once and reused.

Layout of the secrets directory (``DIR/secrets/``, mode 0700; every file 0600 but the CA's
certificate, which is public)::

    ca.pem                      the CA's certificate: what clients and nodes trust
                                (librdkafka's ssl.ca.location, Java's ssl.truststore.location)
    ca.key                      the CA's private key (PKCS#8 PEM, not encrypted)
    <site>-node-<id>.pem        node <id> of <site>'s keystore (ssl.keystore.location): its private
                                key, then its certificate, then the CA's (the chain, leaf first)
    <user>.password             one line, no line break: the user's SCRAM password
    <site>-zookeeper.digest     one line ``strait:<password>``: the site's ZooKeeper digest
                                credential (strait.zookeeper.digest.file)

:func:`ensure_material` creates what is missing and never touches what exists: a file is
written to a temp name and hard-linked into place, so two starts racing keep one version.
A node keystore that is deleted is issued again by the same CA (how a certificate is renewed;
the nodes re-read their keystore within a second). Keys are ECDSA P-256; certificates are
valid for :data:`VALID_DAYS` days. Node certificates name 127.0.0.1 and ``localhost`` (every
listener of the appliance is on loopback) and serve both TLS ends, since a node is a client of
the others when it replicates.

:func:`new_ca` and :func:`issue_certificate` are the certificate factory the tests' own CA
(``tests/tls.py``) is built on too.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from node.proc import atomic_write
from node.zkkit import ZkDigest, read_digest_file

VALID_DAYS = 3650  # a local appliance outlives a year; renew a node's certificate by deleting its keystore
PASSWORD_BYTES = 24  # secrets.token_urlsafe(24): 32 characters of [A-Za-z0-9_-]
ZOOKEEPER_USER = "strait"
CA_NAME = "strait appliance CA"
NODE_HOSTS = ("127.0.0.1", "localhost")  # the subject alternative names of every node certificate
DIRECTORY_MODE = 0o700
PRIVATE_MODE = 0o600
PUBLIC_MODE = 0o644
# Issued certificates start a little in the past: clocks of the processes that check them may lag.
_BACKDATE = datetime.timedelta(minutes=5)

SERVER_AND_CLIENT = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)


class MaterialError(Exception):
    """The secrets directory cannot be used as it is; the message names the file and what to do."""


# -- certificates -----------------------------------------------------------------------------------


def new_ca(
    name: x509.Name, *, not_before: datetime.datetime, not_after: datetime.datetime
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA certificate for ``name`` (a new P-256 key) that may sign certificates only."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def issue_certificate(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    name: x509.Name,
    *,
    not_before: datetime.datetime,
    not_after: datetime.datetime,
    hosts: Sequence[str] = (),
    usages: Sequence[x509.ObjectIdentifier] = SERVER_AND_CLIENT,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new P-256 key and its certificate for ``name``, signed by the CA. ``hosts`` become subject
    alternative names (an IP address as an IP entry, anything else as a DNS name); ``usages`` are
    the extended key usages. ValueError for a host that is neither."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        if not host or any(c.isspace() for c in host):
            raise ValueError(f"subject alternative name {host!r} is neither an IP address nor a DNS name") from None
        return x509.DNSName(host)


def key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    """The private key as PKCS#8 PEM, encrypted with ``password`` when given."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password is not None
        else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


# -- the appliance's material -----------------------------------------------------------------------


@dataclass(frozen=True)
class SecureMaterial:
    """Where the secrets of an appliance are (see the module docstring); reading a secret reads its file."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    def keystore(self, site: str, broker_id: int) -> Path:
        return self.directory / f"{site}-node-{broker_id}.pem"

    def password_file(self, user: str) -> Path:
        return self.directory / f"{user}.password"

    def zookeeper_digest_file(self, site: str) -> Path:
        return self.directory / f"{site}-zookeeper.digest"

    def password(self, user: str) -> str:
        """``user``'s SCRAM password. Raises MaterialError naming the file when it cannot be read."""
        path = self.password_file(user)
        try:
            password = path.read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise MaterialError(f"cannot read {path}: {exc}") from None
        if not password:
            raise MaterialError(f"{path} is empty; delete it and start again to make a new password")
        return password

    def zookeeper_digest(self, site: str) -> ZkDigest:
        """The site's ZooKeeper credential. Raises MaterialError naming the file (never its content)."""
        path = self.zookeeper_digest_file(site)
        try:
            return read_digest_file(path)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise MaterialError(f"{path}: {reason}") from None


def ensure_material(
    directory: Path, nodes: Mapping[str, Iterable[int]], users: Iterable[str]
) -> tuple[SecureMaterial, list[Path]]:
    """Make what is missing under ``directory``: the CA, a keystore for each node (``nodes``: site
    name -> broker ids), a password for each of ``users``, a ZooKeeper digest for each site.
    Returns the material and the files created now (empty on a restart).

    Raises:
        MaterialError: the CA's certificate or key is missing while the other (or a node's
            keystore) exists, a file does not load, or the directory cannot be written.
    """
    material = SecureMaterial(directory.absolute())
    created: list[Path] = []
    try:
        material.directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        os.chmod(material.directory, DIRECTORY_MODE)
        keystores = [(site, broker_id) for site, ids in nodes.items() for broker_id in ids]
        ca_key, ca_cert = _ensure_ca(material, keystores, created)
        for site, broker_id in keystores:
            path = material.keystore(site, broker_id)
            if path.exists():
                continue
            now = _now()
            key, cert = issue_certificate(
                ca_key,
                ca_cert,
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "strait"),
                        x509.NameAttribute(NameOID.COMMON_NAME, f"{site}-node-{broker_id}"),
                    ]
                ),
                not_before=now - _BACKDATE,
                not_after=now + datetime.timedelta(days=VALID_DAYS),
                hosts=NODE_HOSTS,
            )
            _create(path, key_pem(key) + cert_pem(cert) + cert_pem(ca_cert), PRIVATE_MODE, created)
        for user in users:
            _create(material.password_file(user), secrets.token_urlsafe(PASSWORD_BYTES), PRIVATE_MODE, created)
        for site in nodes:
            line = f"{ZOOKEEPER_USER}:{secrets.token_urlsafe(PASSWORD_BYTES)}\n"
            _create(material.zookeeper_digest_file(site), line, PRIVATE_MODE, created)
    except OSError as exc:
        raise MaterialError(f"cannot write the appliance's secrets in {material.directory}: {exc}") from None
    return material, created


def _ensure_ca(
    material: SecureMaterial, keystores: Sequence[tuple[str, int]], created: list[Path]
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """The CA, made when neither of its files nor any keystore exists, else loaded."""
    have_cert, have_key = material.ca_cert.exists(), material.ca_key.exists()
    if not have_cert and not have_key:
        issued = [str(material.keystore(s, i)) for s, i in keystores if material.keystore(s, i).exists()]
        if issued:
            raise MaterialError(
                f"{material.directory} holds node keystores ({', '.join(issued)}) but not the CA that issued "
                "them (ca.pem, ca.key); remove the directory to start over with new secrets"
            )
        now = _now()
        key, cert = new_ca(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)]),
            not_before=now - _BACKDATE,
            not_after=now + datetime.timedelta(days=VALID_DAYS),
        )
        # The key first: a certificate without its key would be refused on the next start.
        _create(material.ca_key, key_pem(key), PRIVATE_MODE, created)
        _create(material.ca_cert, cert_pem(cert), PUBLIC_MODE, created)
    elif have_cert != have_key:
        missing, present = (material.ca_key, material.ca_cert) if have_cert else (material.ca_cert, material.ca_key)
        raise MaterialError(
            f"{present} exists but {missing} does not; restore it, or remove {material.directory} "
            "to start over with new secrets"
        )
    return _load_ca(material)


def _load_ca(material: SecureMaterial) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    try:
        cert = x509.load_pem_x509_certificate(material.ca_cert.read_bytes())
    except ValueError as exc:
        raise MaterialError(f"{material.ca_cert} is not a PEM certificate: {exc}") from None
    try:
        key = serialization.load_pem_private_key(material.ca_key.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise MaterialError(f"{material.ca_key} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        raise MaterialError(f"{material.ca_key} is not the key of {material.ca_cert} (an ECDSA key is expected)")
    return key, cert


def _create(path: Path, data: str | bytes, mode: int, created: list[Path]) -> None:
    """Write ``path`` with ``mode`` unless it exists (then it is left as it is, even if another
    process created it a moment ago): a temp file, hard-linked into place."""
    if path.exists():
        return
    temp = path.with_name(f".{path.name}.{os.getpid()}.new")
    atomic_write(temp, data, mode=mode)
    try:
        os.link(temp, path)
    except FileExistsError:
        return
    finally:
        temp.unlink(missing_ok=True)
    created.append(path)
