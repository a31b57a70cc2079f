"""sasl.jaas.config: Kafka's JAAS entry, read for PLAIN users and the node's own credentials."""

from __future__ import annotations

import pytest

from node.security._jaas import PLAIN_MODULE, SCRAM_MODULE, parse_jaas_config

pytestmark = pytest.mark.unit


def test_a_plain_entry_gives_its_users_and_the_nodes_own_credentials() -> None:
    entry = parse_jaas_config(
        f'{PLAIN_MODULE} required username="admin" password="adm\\"in" user_admin="adm\\"in"\n'
        '  user_alice="alice-secret" user_="not a user";'
    )
    assert (entry.module, entry.flag, entry.username, entry.password) == (PLAIN_MODULE, "required", "admin", 'adm"in')
    assert entry.plain_users() == {"admin": 'adm"in', "alice": "alice-secret"}
    assert "alice-secret" not in repr(entry)


def test_a_scram_entry_has_no_plain_users_and_bare_values_are_read() -> None:
    entry = parse_jaas_config(f"{SCRAM_MODULE} required username=replicator password=s3cret ;")
    assert (entry.username, entry.password, entry.plain_users()) == ("replicator", "s3cret", {})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "expected '<LoginModule class> required"),
        (f'{PLAIN_MODULE} maybe user_a="b";', "flag 'maybe' is not one of"),
        (f'{PLAIN_MODULE} required user_a="b"', "cannot read the end (no ';')"),
        (f'{PLAIN_MODULE} required user_a="b" user_a="c";', "option 'user_a' is given twice"),
        (f'{PLAIN_MODULE} required user_a="b"; {SCRAM_MODULE} required;', "only one login module entry"),
        (f'{PLAIN_MODULE} required user_a "b";', "cannot read the option starting at 'user_a'"),
        (f'{PLAIN_MODULE} required "b";', "cannot read a value without a name"),
    ],
)
def test_what_does_not_parse_is_named_without_quoting_a_value(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_jaas_config(text)
    assert reason in str(err.value)
    assert '"c"' not in str(err.value) and 'b"' not in str(err.value).replace('user_a "b"', "")
