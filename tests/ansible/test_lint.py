"""ansible-lint (production profile) and ``ansible-playbook --syntax-check`` are clean on ansible/."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.ansible.harness import ANSIBLE_DIR, VENV_BIN, playbook_env

pytestmark = pytest.mark.ansible

PLAYBOOKS = sorted(p.name for p in ANSIBLE_DIR.glob("*.yml") if p.name != "requirements.yml")


def test_ansible_lint_production_profile_is_clean(tmp_path_factory: pytest.TempPathFactory) -> None:
    env = playbook_env(tmp_path_factory.mktemp("lint-home"))
    done = subprocess.run(
        [str(VENV_BIN / "ansible-lint"), "--profile", "production", "--offline", "--nocolor", "."],
        cwd=ANSIBLE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_playbook_syntax_check(playbook: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    env = playbook_env(tmp_path_factory.mktemp("syntax-home"))
    done = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "--syntax-check", playbook],
        cwd=ANSIBLE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"playbook: {playbook}" in done.stdout


def test_the_example_inventory_parses(tmp_path_factory: pytest.TempPathFactory) -> None:
    env = playbook_env(tmp_path_factory.mktemp("inventory-home"))
    done = subprocess.run(
        [str(VENV_BIN / "ansible-inventory"), "--list"],
        cwd=ANSIBLE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["mirror"]["hosts"] == ["west-1"]
