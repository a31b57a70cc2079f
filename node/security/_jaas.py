"""Kafka's ``sasl.jaas.config`` value: one JAAS login module entry, read for what strait needs from it.

The form (Kafka's, from Java's JAAS configuration syntax)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="s3cret" user_admin="s3cret" user_alice="alice-secret";

- ``username`` / ``password``: the broker's own credentials when it is a client (replication,
  the controller) on a SASL inter-broker listener;
- ``user_<name>="<password>"`` (PlainLoginModule only): the PLAIN users the broker accepts.

Values are double-quoted (``\\"`` and ``\\\\`` escape inside them) or bare words; the entry ends
with ``;``. :func:`parse_jaas_config` raises ValueError naming what does not parse, without
ever quoting a password; :func:`format_jaas_config` writes an entry it reads back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PLAIN_MODULE", "SCRAM_MODULE", "JaasEntry", "format_jaas_config", "parse_jaas_config"]

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(
    r'\s*(?:(?P<key>[A-Za-z0-9_.\-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s";]+))|(?P<end>;))'
)


@dataclass(frozen=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict, repr=False)  # passwords: never in a repr

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """The ``user_<name>`` options of a PlainLoginModule entry: name -> password."""
        if self.module != PLAIN_MODULE:
            return {}
        return {k[len("user_") :]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def parse_jaas_config(text: str) -> JaasEntry:
    """The single login module entry of ``text``; ValueError naming the problem (never a value)."""
    rest = text.strip()
    head = re.match(r"([A-Za-z_$][\w$.]*)\s+(\w+)", rest)
    if head is None:
        raise ValueError("expected '<LoginModule class> required key=\"value\" ...;'")
    module, flag = head.groups()
    if flag not in _FLAGS:
        raise ValueError(f"login module flag {flag!r} is not one of {', '.join(_FLAGS)}")
    options: dict[str, str] = {}
    pos = head.end()
    while True:
        match = _TOKEN.match(rest, pos)
        if match is None:
            left = rest[pos:].strip()
            name = re.match(r"[A-Za-z0-9_.\-]+", left)  # a name is shown, never a value
            where = (
                f"the option starting at {name.group(0)[:40]!r}"
                if name
                else ("the end (no ';')" if not left else "a value without a name")
            )
            raise ValueError(f'cannot read {where}: key="value" ... ; expected')
        pos = match.end()
        if match.group("end"):
            break
        key = match.group("key")
        if key in options:
            raise ValueError(f"option {key!r} is given twice")
        quoted = match.group("quoted")
        options[key] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else match.group("bare")
    if rest[pos:].strip():
        raise ValueError("only one login module entry is supported; text follows its ';'")
    return JaasEntry(module, flag, options)


def format_jaas_config(module: str, options: dict[str, str], flag: str = "required") -> str:
    """The entry ``module flag key="value" ...;`` with every value quoted (``"`` and ``\\`` escaped):
    what :func:`parse_jaas_config` reads back as ``JaasEntry(module, flag, options)``."""

    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return " ".join([module, flag, *(f"{key}={quoted(value)}" for key, value in options.items())]) + ";"
