"""The mount table: mountinfo's fields, escapes and stacking, and which mount holds a path."""

from __future__ import annotations

from pathlib import Path

from node.doctor._mounts import Mount, mount_of, parse_mountinfo

MOUNTINFO = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
40 27 7:0 / /data/d1 rw,noatime shared:5 - xfs /dev/loop0 rw,attr2,inode64,noquota
41 27 7:1 / /data/with\\040space rw,nosuid,nodev master:1 propagate_from:2 - ext4 /dev/loop1 rw
42 40 0:50 / /data/d1 ro,relatime - xfs /dev/loop0 ro,attr2
this line is not mountinfo
43 27 0:51 / /mnt/ram rw - tmpfs
"""


def test_fields_escapes_and_optional_fields() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert [str(m.mount_point) for m in mounts] == ["/", "/data/d1", "/data/with space", "/data/d1"]
    root, xfs, spaced, stacked = mounts
    assert (root.fs_type, root.source, root.atime, root.read_only) == ("ext4", "/dev/vda", "relatime", False)
    assert xfs == Mount(
        Path("/data/d1"),
        "xfs",
        "/dev/loop0",
        frozenset({"rw", "noatime"}),
        frozenset({"rw", "attr2", "inode64", "noquota"}),
    )
    assert xfs.atime == "noatime"
    assert spaced.atime == "strictatime"  # neither noatime nor relatime: atime on every read
    assert stacked.read_only and stacked.atime == "relatime"


def test_a_line_without_super_options_still_parses() -> None:
    (mount,) = parse_mountinfo("43 27 0:51 / /mnt/ram rw,noatime - tmpfs tmpfs\n")
    assert mount.fs_type == "tmpfs" and mount.super_options == frozenset()


def test_the_longest_mount_point_holds_a_path_and_the_top_of_a_stack_wins() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    holder = mount_of(Path("/data/d1/topic-0"), mounts)
    assert holder is not None and holder.read_only  # the read-only mount stacked on top
    assert mount_of(Path("/data/d10"), mounts) == mounts[0]  # a name prefix is not a parent
    assert mount_of(Path("/data/with space/x"), mounts) == mounts[2]
    assert mount_of(Path("/"), mounts) == mounts[0]
    assert mount_of(Path("/anything"), parse_mountinfo("")) is None


def test_symlinks_are_resolved_before_the_lookup(tmp_path: Path) -> None:
    real = tmp_path.resolve() / "disk"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    text = f"1 0 0:1 / / rw - ext4 /dev/root rw\n2 1 7:0 / {real} rw,noatime - xfs /dev/loop0 rw\n"
    holder = mount_of(tmp_path / "link" / "logs", parse_mountinfo(text))
    assert holder is not None and holder.fs_type == "xfs"
