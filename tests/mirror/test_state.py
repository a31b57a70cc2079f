"""The mirror's state.json (unit): version 2 round trips, version 1 files read unchanged, bad entries named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mirror import MirrorError, parse_links
from mirror._failover import CutPartition, FailoverRecord
from mirror._state import LinkState, MirrorState, load_state, save_state

LINK = {
    "name": "added",
    "source": {"name": "east", "bootstrap": "127.0.0.1:9092"},
    "target": {"name": "west", "bootstrap": "127.0.0.1:9192"},
    "topics": {"include": ["orders.*"]},
}


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_a_version_1_file_is_read_as_it_is_and_saved_as_version_2(tmp_path: Path) -> None:
    path = write(
        tmp_path / "state.json",
        {
            "version": 1,
            "member_id": "host-1a2b3c",
            "links": {"east-to-west": {"paused": True}, "old": {"deleted": True}, "idle": {"paused": False}},
            "updated_ms": 1,
        },
    )
    state = load_state(path)
    assert state.member_id == "host-1a2b3c"
    assert state.links == {"east-to-west": LinkState(paused=True), "old": LinkState(deleted=True)}
    assert state.runtime_links == {}
    save_state(path, state)
    saved = json.loads(path.read_text())
    assert saved["version"] == 2 and saved["member_id"] == "host-1a2b3c"
    assert saved["links"] == {"east-to-west": {"paused": True}, "old": {"deleted": True}}
    assert saved["runtime_links"] == {}
    assert load_state(path).links == state.links


def test_a_version_1_file_with_a_non_flag_entry_is_refused_as_before(tmp_path: Path) -> None:
    path = write(tmp_path / "state.json", {"version": 1, "links": {"l": {"paused": "yes"}}})
    with pytest.raises(
        MirrorError, match=r"state\.json: links\.l: expected \{'paused': bool\} or \{'deleted': bool\}$"
    ):
        load_state(path)


def test_failed_over_links_and_runtime_links_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    (config,) = parse_links({"link": [LINK]})
    record = FailoverRecord(
        "site east was failed over to west", True, 1_761_200_000_000, (CutPartition("orders", 0, 1200, 1250, 17),)
    )
    state = MirrorState("m1", {"east-to-west": LinkState(paused=True, failed_over=record)}, {"added": config})
    save_state(path, state)
    saved = json.loads(path.read_text())
    assert saved["links"] == {
        "east-to-west": {
            "paused": True,
            "failed_over": {
                "fence": "site east was failed over to west",
                "auto_fence": True,
                "at_ms": 1_761_200_000_000,
                "cut": [
                    {
                        "topic": "orders",
                        "partition": 0,
                        "mirrored_offset": 1200,
                        "source_high_watermark": 1250,
                        "source_seen_ms": 17,
                    }
                ],
            },
        }
    }
    assert saved["runtime_links"]["added"] == config.to_dict()
    loaded = load_state(path)
    assert loaded.links == state.links and loaded.member_id == "m1"
    assert {n: c.to_dict() for n, c in loaded.runtime_links.items()} == {"added": config.to_dict()}

    # A failover without a measured cut yet, and the changes helper dropping default entries.
    changed = loaded.changed("east-to-west", paused=False, failed_over=FailoverRecord("f", False, 5))
    assert changed.links["east-to-west"] == LinkState(failed_over=FailoverRecord("f", False, 5))
    assert "east-to-west" not in changed.changed("east-to-west", failed_over=None).links
    assert loaded.links["east-to-west"].paused  # the original is not changed
    save_state(path, changed)
    assert json.loads(path.read_text())["links"]["east-to-west"] == {
        "failed_over": {"fence": "f", "auto_fence": False, "at_ms": 5}
    }
    assert load_state(path).links == changed.links


@pytest.mark.parametrize(
    ("links", "runtime", "expected"),
    [
        ({"l": {"paused": True, "frozen": True}}, {}, r"links\.l: unknown key 'frozen' \(known: paused, deleted"),
        ({"l": {"deleted": 1}}, {}, r"links\.l\.deleted: expected true or false, not 1$"),
        (
            {"l": {"failed_over": {"fence": "a\tb", "auto_fence": True, "at_ms": 1}}},
            {},
            r"links\.l\.failed_over\.fence: control character '\\t' at position 1",
        ),
        (
            {"l": {"failed_over": {"fence": "f", "auto_fence": "yes", "at_ms": 1}}},
            {},
            r"links\.l\.failed_over\.auto_fence: expected true or false, not 'yes'$",
        ),
        (
            {"l": {"failed_over": {"fence": "f", "auto_fence": True, "at_ms": 1, "cut": [{"topic": "t"}]}}},
            {},
            r"links\.l\.failed_over\.cut\[0\]\.partition: expected an integer of at least 0, not None$",
        ),
        (
            {},
            {"added": {**LINK, "topicz": {}}},
            r"state\.json: runtime_links\.added: link 'added': unknown key 'topicz' \(did you mean 'topics'\?\) "
            r"\(fix or remove the entry",
        ),
        ({}, {"other": LINK}, r"runtime_links\.other: the definition names link 'added'$"),
    ],
)
def test_a_bad_version_2_entry_is_named(
    tmp_path: Path, links: dict[str, Any], runtime: dict[str, Any], expected: str
) -> None:
    path = write(tmp_path / "state.json", {"version": 2, "links": links, "runtime_links": runtime})
    with pytest.raises(MirrorError, match=expected):
        load_state(path)


@pytest.mark.parametrize("version", [None, 0, 3, True, "2"])
def test_an_unknown_version_is_refused(tmp_path: Path, version: object) -> None:
    path = write(tmp_path / "state.json", {"version": version, "links": {}})
    with pytest.raises(MirrorError, match=r"state\.json: not a version 1 or 2 mirror state file$"):
        load_state(path)


def test_no_file_is_an_empty_state(tmp_path: Path) -> None:
    assert load_state(tmp_path / "state.json") == MirrorState()
