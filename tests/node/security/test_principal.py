"""ssl.principal.mapping.rules and the RFC 2253 subject of a client certificate."""

from __future__ import annotations

import re

import pytest

from node.security._principal import distinguished_name, map_principal_name, parse_principal_rules

pytestmark = pytest.mark.unit

# getpeercert()'s subject: relative names in certificate order (most general first).
ALICE = ((("countryName", "US"),), (("organizationName", "Acme"),), (("organizationalUnitName", "ops"),),
         (("commonName", "Alice"),))  # fmt: skip


def test_the_subject_reads_most_specific_first_with_kafkas_keywords() -> None:
    assert distinguished_name(ALICE) == "CN=Alice,OU=ops,O=Acme,C=US"


def test_special_characters_are_escaped_and_multi_valued_names_joined() -> None:
    odd = ((("organizationName", "Acme, Inc."),), (("commonName", " lead#"), ("userId", "a+b")))
    assert distinguished_name(odd) == "CN=\\ lead#+UID=a\\+b,O=Acme\\, Inc."
    assert distinguished_name(((("commonName", "#x "),),)) == "CN=\\#x\\ "


@pytest.mark.parametrize(
    ("rules", "name", "expected"),
    [
        ("DEFAULT", "CN=Alice,OU=ops,O=Acme,C=US", "CN=Alice,OU=ops,O=Acme,C=US"),
        ("RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/", "CN=Alice,OU=ops,O=Acme,C=US", "Alice@ops"),
        ("RULE:^CN=(.*?),OU=.*$/$1/L", "CN=Alice,OU=ops,O=Acme,C=US", "alice"),
        ("RULE:^CN=(.*?),OU=.*$/$1/U", "CN=Alice,OU=ops,O=Acme,C=US", "ALICE"),
        # the first rule that matches the whole name wins; a partial match does not count
        ("RULE:^CN=(.*?),OU=dev.*$/dev-$1/, RULE:^CN=(.*?),.*$/$1/,DEFAULT", "CN=Alice,OU=ops,O=Acme", "Alice"),
        ("RULE:CN=(\\w+)/$1/,DEFAULT", "CN=Alice,OU=ops", "CN=Alice,OU=ops"),
        ("RULE:^CN=([^,]*)\\/x.*$/$1/", "CN=a/x,O=b", "a"),  # an escaped slash in the pattern
    ],
)
def test_rules_map_as_kafka_does(rules: str, name: str, expected: str) -> None:
    assert map_principal_name(name, parse_principal_rules(rules)) == expected


def test_a_name_no_rule_matches_cannot_be_mapped() -> None:
    with pytest.raises(
        ValueError, match=re.escape("no rule of ssl.principal.mapping.rules matches 'CN=mallory,O=Evil'")
    ):
        map_principal_name("CN=mallory,O=Evil", parse_principal_rules("RULE:^CN=(.*?),O=Acme$/$1/"))


@pytest.mark.parametrize(
    ("rules", "reason"),
    [
        ("", "no rule given"),
        ("NONE", "is not DEFAULT nor RULE"),
        ("RULE:^CN=(.*$/$1/", "does not compile"),
        ("RULE:^CN=.*$/$1/", "$1 names a group the pattern does not have"),
        ("DEFAULT,", "ends with a comma"),
        ("RULE:x/y", "is not DEFAULT nor RULE"),
        ("DEFAULT DEFAULT", "expected a comma"),
    ],
)
def test_bad_rules_are_refused_naming_the_problem(rules: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        parse_principal_rules(rules)
