"""A bad variable stops a role before any task, with a message naming it.

The roles' meta/argument_specs.yml check types, choices and required variables; each role's
first task (common's check_vars.yml) refuses a variable carrying the role's prefix that is none
of its variables, such as a misspelling, which Ansible would otherwise ignore. One
ansible-playbook run in check mode (tests/ansible/playbooks/roles.yml) applies a role to several
local "hosts", each with one mistake.
"""

from __future__ import annotations

import re

import pytest

from tests.ansible.harness import PLAYBOOKS, PlaybookRun, run_playbook, write_inventory

pytestmark = pytest.mark.ansible

TOKEN = "variables-test-token-0123456789"

#: host -> (its role, its variables, what the failure must name)
CASES: dict[str, tuple[str, dict[str, object], list[str]]] = {
    "wrong-type": ("broker", {"broker_id": 1, "broker_port": "ninety-two"}, ["broker_port", "int"]),
    "misspelt": ("broker", {"broker_id": 1, "broker_porrt": 9093}, ["Unknown variable broker_porrt"]),
    "missing": ("broker", {}, ["missing required arguments: broker_id"]),
    "bad-choice": ("common", {"common_service_manager": "upstart"}, ["common_service_manager", "upstart"]),
    "zookeeper-id": ("zookeeper", {"zookeeper_id": "one"}, ["zookeeper_id", "int"]),
    "no-token": ("mirror", {}, ["missing required arguments: mirror_admin_token"]),
    "link-key": (
        "mirror",
        {"mirror_admin_token": TOKEN, "mirror_links": [{"name": "a", "sorce": "east", "target": "west"}]},
        ["sorce"],
    ),
    "short-token": ("mirror", {"mirror_admin_token": "short"}, ["mirror_admin_token must be"]),
}


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> PlaybookRun:
    root = tmp_path_factory.mktemp("variables")
    hosts = {
        name: {"strait_test_role": role, "common_prefix": str(root / name), **variables}
        for name, (role, variables, _) in CASES.items()
    }
    inventory = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_become": False, "common_site": "east"},
            "children": {"east": {"hosts": hosts}},
        }
    }
    return run_playbook(
        PLAYBOOKS / "roles.yml",
        write_inventory(root / "hosts.json", inventory),
        home=root / "ansible-home",
        timeout=240,
        args=["--check"],
    )


def failure_of(run: PlaybookRun, host: str) -> str:
    """The text of ``host``'s fatal line ('' when it did not fail)."""
    match = re.search(rf"^fatal: \[{re.escape(host)}\]: FAILED! => (.*)$", run.output, re.MULTILINE)
    return match[1] if match else ""


@pytest.mark.parametrize("host", CASES)
def test_bad_variable_fails_early_naming_it(failed_run: PlaybookRun, host: str) -> None:
    recap = failed_run.recap()
    assert recap[host]["failed"] == 1, failed_run.output
    assert recap[host]["changed"] == 0
    failure = failure_of(failed_run, host)
    for words in CASES[host][2]:
        assert words in failure, failure or failed_run.output
