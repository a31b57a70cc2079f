"""The roles' files agree with each other (unit tier: no processes).

Every role has its README, defaults, metadata, argument specs and tasks; every variable of
defaults/main.yml carries the role's prefix, is an option of the role's main entry point and is
named in its README; the options without a default are exactly the required ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.harness import ANSIBLE_DIR

ROLES = ("common", "xfs_disks", "zookeeper", "broker", "mirror")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("role", ROLES)
def test_role_has_its_files(role: str) -> None:
    base = ANSIBLE_DIR / "roles" / role
    for name in ("README.md", "defaults/main.yml", "meta/main.yml", "meta/argument_specs.yml", "tasks/main.yml"):
        assert (base / name).is_file(), f"{role}: {name} is missing"
    assert load(base / "meta/main.yml")["galaxy_info"]["role_name"] == role


@pytest.mark.parametrize("role", ROLES)
def test_defaults_are_the_documented_options(role: str) -> None:
    base = ANSIBLE_DIR / "roles" / role
    defaults = load(base / "defaults/main.yml")
    options = load(base / "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    every_option = {
        name for spec in load(base / "meta/argument_specs.yml")["argument_specs"].values() for name in spec["options"]
    }
    readme = (base / "README.md").read_text()
    for name in defaults:
        assert name.startswith(f"{role}_"), f"{role}: {name} does not carry the role's prefix"
        assert name in every_option, f"{role}: {name} has a default but no argument spec"
        assert f"`{name}`" in readme, f"{role}: README.md does not describe {name}"
    for name, spec in options.items():
        required = bool(spec.get("required"))
        assert required != (name in defaults), f"{role}: {name} must be required or have a default, not both"
        assert f"`{name}`" in readme, f"{role}: README.md does not describe {name}"
