#!/usr/bin/python
"""Ansible module: look at each data disk and decide what the xfs_disks role may do with it.

Read only. For each device (with the mount point the role gives it) it finds what the device
holds -- filesystem and partition-table signatures (``blkid -p``, which probes the device itself,
not blkid's cache), whether its first MiB is zeros, where it is mounted, which UUID the fstab
names at its mount point -- and decides, in this order:

1. ``refuse``: not a block device; or mounted anywhere but its mount point (even if listed in
   ``wipe``: a mounted filesystem is in use).
2. ``keep``: an XFS filesystem that is this host's log disk already: mounted at its mount point,
   or the fstab names its UUID there. Never formatted again, whatever ``wipe`` says.
3. ``format``: empty: no signature at all and its first MiB is zeros.
4. ``wipe``: anything else, and the operator listed it in ``wipe``: its signatures are erased and
   it is formatted (everything on it is lost).
5. ``refuse``: anything else: a filesystem, a partition table, or data without a signature.
"""

from __future__ import annotations

import os
import stat
import subprocess

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: xfs_disks_probe
short_description: What each data disk holds, and whether the xfs_disks role may format it
description:
  - Probes each device with blkid -p, reads its first MiB, /proc/self/mountinfo and the fstab.
  - Never changes anything.
options:
  devices:
    description: The block devices, in the order of their mount points.
    type: list
    elements: path
    required: true
  mount_points:
    description: The mount point of each device.
    type: list
    elements: path
    required: true
  wipe:
    description: Devices the operator allows to be formatted although they hold something.
    type: list
    elements: path
    default: []
  fstab:
    description: The fstab file the role writes.
    type: path
    default: /etc/fstab
author: strait
"""

RETURN = r"""
disks:
  description: One entry per device, in order.
  type: list
  elements: dict
  returned: always
  contains:
    device: {description: The device as given., type: str}
    path: {description: The device with symbolic links resolved., type: str}
    mount_point: {description: Where the role mounts it., type: str}
    holds: {description: "What it holds, in words (empty: nothing).", type: str}
    fstype: {description: The filesystem type found (empty if none)., type: str}
    uuid: {description: The filesystem's UUID (empty if none)., type: str}
    action: {description: keep, format, wipe or refuse., type: str}
    reason: {description: Why, in words., type: str}
"""

ZERO_CHECK_BYTES = 1 << 20


def probe_signatures(path: str) -> dict[str, str]:
    """``blkid -p -o export``'s KEY=value pairs for ``path`` ({} when it finds nothing)."""
    done = subprocess.run(["blkid", "-p", "-o", "export", path], capture_output=True, text=True, check=False)
    if done.returncode == 2:  # nothing found
        return {}
    if done.returncode != 0:
        raise OSError(f"blkid -p {path} failed (exit {done.returncode}): {done.stderr.strip()}")
    pairs = (line.partition("=") for line in done.stdout.splitlines() if "=" in line)
    return {key: value for key, _, value in pairs}


def starts_with_zeros(path: str, size: int = ZERO_CHECK_BYTES) -> bool:
    """True when the first ``size`` bytes of ``path`` are all zeros (a shorter device: those it has)."""
    with open(path, "rb") as device:
        data = device.read(size)
    return data.count(0) == len(data)


def mount_targets(path: str, mountinfo: str) -> list[str]:
    """Where the device ``path`` is mounted, from the text of /proc/self/mountinfo."""
    targets = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        source = line.split(" - ", 1)[1].split()[1]
        if source == path or (source.startswith("/dev/") and os.path.realpath(source) == path):
            targets.append(fields[4].replace("\\040", " "))
    return targets


def fstab_uuid(mount_point: str, fstab: str) -> str:
    """The UUID the fstab text names for ``mount_point`` ('' when it names none)."""
    for line in fstab.splitlines():
        fields = line.split()
        if len(fields) >= 2 and not fields[0].startswith("#") and fields[1] == mount_point:
            spec = fields[0]
            return spec[5:] if spec.startswith("UUID=") else ""
    return ""


def describe(signatures: dict[str, str], zeroed: bool) -> str:
    """What the device holds, in words ('' for nothing)."""
    held = []
    if signatures.get("TYPE"):
        usage, uuid = signatures.get("USAGE", "filesystem"), signatures.get("UUID")
        what = "a filesystem" if usage == "filesystem" else f"a {usage} signature"
        held.append(f"{what} of type {signatures['TYPE']}" + (f" (UUID {uuid})" if uuid else ""))
    if signatures.get("PTTYPE"):
        held.append(f"a partition table of type {signatures['PTTYPE']}")
    if not held and not zeroed:
        held.append(f"data (its first {ZERO_CHECK_BYTES >> 20} MiB are not zeros, though no signature was found)")
    return " and ".join(held)


def decide(
    *,
    is_block: bool,
    signatures: dict[str, str],
    zeroed: bool,
    mounted_at: list[str],
    mount_point: str,
    fstab_uuid: str,
    wipe: bool,
) -> tuple[str, str]:
    """(action, reason) for one device: see the module's docstring for the rules."""
    if not is_block:
        return "refuse", "it is not a block device"
    elsewhere = [target for target in mounted_at if target != mount_point]
    if elsewhere:
        return "refuse", f"it is mounted at {', '.join(elsewhere)}: unmount it first"
    fstype, uuid = signatures.get("TYPE", ""), signatures.get("UUID", "")
    if fstype == "xfs" and (mount_point in mounted_at or (uuid and uuid == fstab_uuid)):
        return "keep", f"it is this host's XFS log disk already (UUID {uuid})"
    holds = describe(signatures, zeroed)
    if not holds:
        return "format", "it is empty"
    if wipe:
        return "wipe", f"it holds {holds} and is listed in xfs_disks_wipe"
    return "refuse", f"it holds {holds}"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "devices": {"type": "list", "elements": "path", "required": True},
            "mount_points": {"type": "list", "elements": "path", "required": True},
            "wipe": {"type": "list", "elements": "path", "default": []},
            "fstab": {"type": "path", "default": "/etc/fstab"},
        },
        supports_check_mode=True,
    )
    devices, mount_points = module.params["devices"], module.params["mount_points"]
    if len(devices) != len(mount_points):
        module.fail_json(msg=f"{len(devices)} devices but {len(mount_points)} mount points")
    wipe = {os.path.realpath(d) for d in module.params["wipe"]}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            mountinfo = f.read()
        try:
            with open(module.params["fstab"], encoding="utf-8") as f:
                fstab = f.read()
        except FileNotFoundError:
            fstab = ""
        disks = []
        for device, mount_point in zip(devices, mount_points, strict=True):
            path = os.path.realpath(device)
            try:
                is_block = stat.S_ISBLK(os.stat(path).st_mode)
            except FileNotFoundError:
                is_block = False
            signatures = probe_signatures(path) if is_block else {}
            zeroed = starts_with_zeros(path) if is_block else False
            mounted_at = mount_targets(path, mountinfo)
            action, reason = decide(
                is_block=is_block,
                signatures=signatures,
                zeroed=zeroed,
                mounted_at=mounted_at,
                mount_point=mount_point,
                fstab_uuid=fstab_uuid(mount_point, fstab),
                wipe=path in wipe,
            )
            disks.append(
                {
                    "device": device,
                    "path": path,
                    "mount_point": mount_point,
                    "holds": describe(signatures, zeroed) if is_block else "",
                    "fstype": signatures.get("TYPE", ""),
                    "uuid": signatures.get("UUID", ""),
                    "action": action,
                    "reason": reason,
                }
            )
    except OSError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, disks=disks)


if __name__ == "__main__":
    main()
