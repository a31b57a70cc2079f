"""The xfs_disks role's decision for each device (its probe module's pure functions; unit tier)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.ansible.harness import ANSIBLE_DIR


def load_probe() -> ModuleType:
    path = ANSIBLE_DIR / "roles/xfs_disks/library/xfs_disks_probe.py"
    spec = importlib.util.spec_from_file_location("xfs_disks_probe", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


probe = load_probe()
MOUNT = "/data/d1"
XFS = {"TYPE": "xfs", "UUID": "1111-aaaa", "USAGE": "filesystem"}
EXT4 = {"TYPE": "ext4", "UUID": "2222-bbbb", "USAGE": "filesystem"}


def decide(signatures: dict[str, str], **given: object) -> tuple[str, str]:
    arguments: dict[str, object] = {
        "is_block": True,
        "signatures": signatures,
        "zeroed": not signatures,
        "mounted_at": [],
        "mount_point": MOUNT,
        "fstab_uuid": "",
        "wipe": False,
    }
    arguments.update(given)
    return probe.decide(**arguments)  # type: ignore[no-any-return]


def test_an_empty_device_is_formatted() -> None:
    assert decide({})[0] == "format"


@pytest.mark.parametrize(
    ("signatures", "zeroed", "holds"),
    [
        (EXT4, False, "a filesystem of type ext4 (UUID 2222-bbbb)"),
        ({"PTTYPE": "gpt"}, False, "a partition table of type gpt"),
        ({"TYPE": "crypto_LUKS", "USAGE": "crypto"}, False, "a crypto signature of type crypto_LUKS"),
        ({}, False, "data (its first 1 MiB are not zeros, though no signature was found)"),
        (XFS, False, "a filesystem of type xfs (UUID 1111-aaaa)"),  # an XFS disk from elsewhere
    ],
)
def test_a_device_holding_something_is_refused_unless_marked(
    signatures: dict[str, str], zeroed: bool, holds: str
) -> None:
    assert decide(signatures, zeroed=zeroed) == ("refuse", f"it holds {holds}")
    action, reason = decide(signatures, zeroed=zeroed, wipe=True)
    assert action == "wipe" and holds in reason


@pytest.mark.parametrize("evidence", [{"mounted_at": [MOUNT]}, {"fstab_uuid": "1111-aaaa"}])
def test_this_hosts_xfs_disk_is_kept_even_when_marked_for_wiping(evidence: dict[str, object]) -> None:
    assert decide(XFS, **evidence)[0] == "keep"
    assert decide(XFS, wipe=True, **evidence)[0] == "keep"


def test_a_device_mounted_elsewhere_is_refused_even_when_marked() -> None:
    assert decide(EXT4, mounted_at=["/home"], wipe=True) == ("refuse", "it is mounted at /home: unmount it first")


def test_a_path_that_is_no_block_device_is_refused() -> None:
    assert decide({}, is_block=False) == ("refuse", "it is not a block device")


def test_mount_targets_reads_mountinfo() -> None:
    mountinfo = (
        "36 25 7:0 / /data/d1 rw,noatime shared:1 - xfs /dev/loop0 rw,inode64\n"
        "37 25 7:1 / /data/with\\040space rw shared:2 - xfs /dev/loop1 rw\n"
        "38 25 0:5 / /proc rw - proc proc rw\n"
    )
    assert probe.mount_targets("/dev/loop0", mountinfo) == ["/data/d1"]
    assert probe.mount_targets("/dev/loop1", mountinfo) == ["/data/with space"]
    assert probe.mount_targets("/dev/loop2", mountinfo) == []


def test_fstab_uuid_reads_the_entry_at_the_mount_point() -> None:
    fstab = "# a comment\nUUID=abc /data/d1 xfs noatime 0 0\n/dev/sdc /data/d2 xfs noatime 0 0\n"
    assert probe.fstab_uuid("/data/d1", fstab) == "abc"
    assert probe.fstab_uuid("/data/d2", fstab) == ""  # not by UUID: not the role's entry
    assert probe.fstab_uuid("/data/d3", fstab) == ""


def test_starts_with_zeros(tmp_path: Path) -> None:
    zeros, data = tmp_path / "zeros", tmp_path / "data"
    zeros.write_bytes(bytes(4096))
    data.write_bytes(bytes(4000) + b"x")
    assert probe.starts_with_zeros(str(zeros))
    assert not probe.starts_with_zeros(str(data))
