"""Principals from TLS client certificates: the subject as Kafka writes it, and ``ssl.principal.mapping.rules``.

Kafka names an SSL client by its certificate's subject in RFC 2253 form, the most specific
attribute first (``CN=alice,OU=eng,O=Acme,C=US``), as Java's ``X500Principal.getName()`` writes
it; ``ssl.principal.mapping.rules`` may rewrite it (KIP-371):

- ``DEFAULT`` keeps the name as it is;
- ``RULE:<pattern>/<replacement>/[L|U]``: when the regular expression matches the *whole* name,
  the name becomes the replacement, where ``$1``, ``$2``... are the pattern's groups; a trailing
  ``L`` or ``U`` lower- or upper-cases the result.

Rules are tried in order; the first that matches wins. A name no rule matches cannot be
mapped: the connection is refused (as Kafka refuses it), so an operator who lists only RULEs
decides exactly who gets in. The principal is ``User:<mapped name>``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PrincipalRule", "distinguished_name", "map_principal_name", "parse_principal_rules"]

# Java's X500Principal RFC 2253 keywords for the attributes Python's ssl module names.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_RULE = re.compile(r"RULE:((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/([LU]?)")


@dataclass(frozen=True)
class PrincipalRule:
    """One rule of ``ssl.principal.mapping.rules``; ``pattern`` None is ``DEFAULT``."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, name: str) -> str | None:
        """The mapped name, or None when this rule does not match ``name``."""
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        mapped = re.sub(r"\$(\d+)", lambda m: match.group(int(m.group(1))) or "", self.replacement)
        return mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped


def parse_principal_rules(text: str) -> tuple[PrincipalRule, ...]:
    """The rules of ``text``; ValueError naming the rule that does not parse (or whose pattern does not
    compile, or whose replacement names a group the pattern lacks)."""
    rules: list[PrincipalRule] = []
    rest = text.strip()
    while rest:
        if rest.startswith("DEFAULT"):
            rules.append(PrincipalRule(None))
            rest = rest[len("DEFAULT") :]
        else:
            match = _RULE.match(rest)
            if match is None:
                raise ValueError(f"{rest.split(',')[0]!r} is not DEFAULT nor RULE:pattern/replacement/[LU]")
            pattern, replacement, case = match.groups()
            try:
                compiled = re.compile(pattern.replace("\\/", "/"))
            except re.error as exc:
                raise ValueError(f"rule {match.group(0)!r}: the pattern does not compile: {exc}") from None
            for group in re.findall(r"\$(\d+)", replacement):
                if int(group) > compiled.groups:
                    raise ValueError(f"rule {match.group(0)!r}: ${group} names a group the pattern does not have")
            rules.append(PrincipalRule(compiled, replacement.replace("\\/", "/"), case))
            rest = rest[match.end() :]
        rest = rest.lstrip()
        if rest.startswith(","):
            rest = rest[1:].lstrip()
            if not rest:
                raise ValueError(f"{text!r} ends with a comma")
        elif rest:
            raise ValueError(f"expected a comma before {rest!r}")
    if not rules:
        raise ValueError("no rule given (DEFAULT keeps the certificate's name)")
    return tuple(rules)


def map_principal_name(name: str, rules: Sequence[PrincipalRule]) -> str:
    """``name`` rewritten by the first rule that matches; ValueError when none does."""
    for rule in rules:
        mapped = rule.apply(name)
        if mapped is not None:
            return mapped
    raise ValueError(f"no rule of ssl.principal.mapping.rules matches {name!r}")


def _escape(value: str) -> str:
    """RFC 2253 escaping of an attribute value."""
    out = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The RFC 2253 name of a certificate subject as :meth:`ssl.SSLSocket.getpeercert` gives it
    (relative names in certificate order, each a sequence of (attribute, value)): the last
    relative name first, multi-valued ones joined with ``+``."""
    parts = []
    for rdn in reversed(subject):
        parts.append("+".join(f"{_KEYWORDS.get(attr, attr)}={_escape(value)}" for attr, value in rdn))
    return ",".join(parts)
