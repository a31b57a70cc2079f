"""ansible-lint (production profile) and ``ansible-playbook --syntax-check`` are clean on ansible/."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

from tests.ansible.harness import ANSIBLE_DIR, VENV_BIN, playbook_env

pytestmark = pytest.mark.ansible

Tool = Callable[..., subprocess.CompletedProcess[str]]
PLAYBOOKS = sorted(p.name for p in ANSIBLE_DIR.glob("*.yml") if p.name != "requirements.yml")


@pytest.fixture
def tool(tmp_path_factory: pytest.TempPathFactory) -> Tool:
    """Run one of the venv's Ansible tools in ansible/ (as an operator would), with a clean environment."""

    def run(*argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        env = playbook_env(tmp_path_factory.mktemp("ansible-home"))
        command = [str(VENV_BIN / argv[0]), *argv[1:]]
        return subprocess.run(
            command, cwd=ANSIBLE_DIR, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )

    return run


def test_ansible_lint_production_profile_is_clean(tool: Tool) -> None:
    done = tool("ansible-lint", "--profile", "production", "--offline", "--nocolor", ".")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_playbook_syntax_check(tool: Tool, playbook: str) -> None:
    done = tool("ansible-playbook", "--syntax-check", playbook)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"playbook: {playbook}" in done.stdout


def test_the_example_inventory_parses(tool: Tool) -> None:
    done = tool("ansible-inventory", "--list")
    assert done.returncode == 0, done.stdout + done.stderr
    groups = json.loads(done.stdout)
    assert groups["mirror"]["hosts"] == ["west-1"]
    assert sorted(groups["east"]["hosts"]) == ["east-1", "east-2", "east-3"]
