"""docs/compatibility.md is exactly what ``strait.compat`` makes of the served version table and
docs/client-usage.json, and the usage file only names test files, clients and versions that exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.handlers import served_ranges
from node.protocol import ApiKey
from strait.compat import (
    CLIENTS,
    PAGE_PATH,
    REPO,
    USAGE_PATH,
    dump_usage,
    family_of,
    file_of,
    function_of,
    load_usage,
    main,
    merge_usage,
    render,
    versions_text,
)


def test_the_page_is_what_the_generator_makes() -> None:
    assert PAGE_PATH.read_text() == render(served_ranges(), load_usage()), (
        "docs/compatibility.md is out of date: run `python -m strait.compat` "
        "(after `pytest --client-usage docs/client-usage.json ...` if the clients' tests changed)"
    )


def test_the_usage_file_names_existing_tests_known_clients_and_served_versions() -> None:
    usage = load_usage()
    served = served_ranges()
    assert set(usage) <= {c.name for c in CLIENTS}
    for family, tests in usage.items():
        for test, apis in tests.items():
            path = REPO / file_of(test)
            assert path.is_file(), f"{USAGE_PATH.name}: {family} names {test}, whose file does not exist"
            assert f"def {function_of(test)}(" in path.read_text(), f"{USAGE_PATH.name}: {test} does not exist"
            for key, versions in apis.items():
                lo, hi = served[key]
                assert all(lo <= v <= hi for v in versions), f"{family} in {test}: API {key} v{versions} not served"
    assert dump_usage(usage) == USAGE_PATH.read_text(), "the usage file is not in its canonical form"


def test_every_client_appears_in_the_usage_file() -> None:
    usage = load_usage()
    assert [c.name for c in CLIENTS if not usage.get(c.name)] == []


def test_clients_are_told_apart_by_software_name_or_client_id() -> None:
    assert family_of("apache-kafka-java") == "java"
    assert family_of("confluent-kafka-python") == "confluent-kafka"
    assert family_of("librdkafka") == "kcat"
    assert family_of("kafka-python") == "kafka-python"
    assert family_of("aiokafka-0.14.0") == "aiokafka"
    assert family_of("strait-broker-1") is None
    assert family_of("other") is None


def test_versions_are_shown_as_ranges() -> None:
    assert versions_text([]) == ""
    assert versions_text([3]) == "3"
    assert versions_text([0, 1, 2, 5, 7, 8]) == "0\u20132, 5, 7\u20138"


def test_the_table_marks_what_each_client_sent_and_what_none_did() -> None:
    served = {ApiKey.PRODUCE: (0, 8), ApiKey.FETCH: (0, 11), ApiKey.OFFSET_DELETE: (0, 0), 1000: (0, 0)}
    usage = {
        "java": {"tests/a.py::test_a": {ApiKey.PRODUCE: [8], ApiKey.FETCH: [11]}},
        "kcat": {
            "tests/b.py::test_b[x]": {ApiKey.PRODUCE: [7]},
            "tests/b.py::test_b[y]": {ApiKey.PRODUCE: [7]},
            "tests/c.py::test_c": {ApiKey.PRODUCE: [3]},
        },
    }
    page = render(served, usage)
    produce = next(line for line in page.splitlines() if line.startswith("| Produce (0)"))
    cells = [c.strip() for c in produce.strip("|").split("|")]
    titles = [c.name for c in CLIENTS]
    assert cells[1:3] == ["0\u20138", "9"]
    assert cells[3 + titles.index("java")] == "8"
    assert cells[3 + titles.index("kcat")] == "3, 7"
    assert cells[3 + titles.index("aiokafka")] == ""
    assert cells[-1] == "0\u20132, 4\u20136"
    never = page.split("## APIs strait serves that no client test sent")[1].split("##")[0]
    assert "- OffsetDelete (47)" in never and "Produce" not in never and "Fetch" not in never
    assert "MirrorAppend (1000)" in page and "| MirrorAppend" not in page
    assert "`tests/b.py`, `tests/c.py`" in page


def test_a_run_replaces_the_entries_of_the_tests_it_ran_and_keeps_the_others() -> None:
    old = {
        "java": {"tests/a.py::test_1": {0: [8]}, "tests/a.py::test_2": {1: [11]}},
        "kcat": {"tests/a.py::test_1": {0: [3]}},
    }
    observed = {"java": {"tests/a.py::test_1": {0: [7, 8]}}, "aiokafka": {"tests/x.py::test_x": {0: [1]}}}
    merged = merge_usage(old, observed, ["tests/a.py::test_1"])
    # test_1 now drives only Java (kcat's entry for it is gone); test_2 did not run and stays;
    # test_x's observation is dropped because test_x did not run (it cannot have been observed).
    assert merged == {"java": {"tests/a.py::test_2": {1: [11]}, "tests/a.py::test_1": {0: [7, 8]}}}


def test_node_ids_name_their_file_and_function() -> None:
    assert file_of("tests/a.py::test_b[gzip]") == "tests/a.py"
    assert function_of("tests/a.py::test_b[gzip]") == "test_b"
    assert function_of("tests/a.py::TestX::test_c") == "test_c"


def test_a_malformed_usage_file_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "usage.json"
    bad.write_text('{"clients": {"java": {"t.py": {"zero": [1]}}}}')
    with pytest.raises(ValueError, match=r"usage\.json: not a client usage file"):
        load_usage(bad)


def test_check_fails_when_the_page_differs_and_writing_fixes_it(tmp_path: Path) -> None:
    usage, page = tmp_path / "usage.json", tmp_path / "compatibility.md"
    usage.write_text(dump_usage({"java": {"tests/a.py::test_a": {ApiKey.PRODUCE: [8]}}}))
    page.write_text("stale\n")
    args = ["--usage", str(usage), "--out", str(page)]
    assert main([*args, "--check"]) == 1
    assert main(args) == 0
    assert main([*args, "--check"]) == 0
    assert "| Produce (0) |" in page.read_text()
