"""The import graph holds to docs/architecture.md: no cycle, no arrow pointing up.

Each test names the offending arrows with their lines, so a failure says what to move.
"""

from __future__ import annotations

import re

import pytest

from tests.architecture.imports import ROOT, Arrow, arrows, find_cycle, modules

pytestmark = pytest.mark.unit

DOC = ROOT / "docs" / "architecture.md"


def _tables() -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """(package -> allowed prefixes, node module prefix -> layer) parsed from the doc's two tables."""
    packages: dict[str, tuple[str, ...]] = {}
    layers: dict[str, int] = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not line.startswith("|"):
            continue
        names = re.findall(r"`([a-z_.]+)`", cells[1])
        if cells[0].isdigit():
            layers.update(dict.fromkeys(names, int(cells[0])))
        elif cells[0].startswith("`"):
            packages[cells[0].strip("`")] = tuple(names)
    return packages, layers


PACKAGES, LAYERS = _tables()


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _row(module: str, table: dict[str, object]) -> str | None:
    rows = [p for p in table if _within(module, p)]
    return max(rows, key=len) if rows else None


def test_the_doc_has_both_tables() -> None:
    assert {"storage", "node", "node.protocol", "mirror", "strait"} <= set(PACKAGES)
    assert LAYERS["node.protocol"] == 0 and LAYERS["node.broker"] == max(LAYERS.values())


def test_no_import_cycle_even_counting_type_checking_imports() -> None:
    graph: dict[str, set[str]] = {name: set() for name in modules()}
    for arrow in arrows():
        graph[arrow.source].add(arrow.target)
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph) or [])}"


def test_no_arrow_points_up_the_package_table() -> None:
    bad: list[Arrow] = []
    for arrow in arrows():
        row = _row(arrow.source, PACKAGES)
        assert row is not None, f"{arrow.source} is in no row of {DOC.name}'s package table"
        allowed = (row, *PACKAGES[row])
        if not any(_within(arrow.target, prefix) for prefix in allowed):
            bad.append(arrow)
    assert bad == [], "arrows the package table does not allow:\n" + "\n".join(map(str, bad))


def test_every_node_module_has_a_layer_and_imports_only_its_layer_or_below() -> None:
    unplaced = sorted(m for m in modules() if _within(m, "node") and m != "node" and _row(m, LAYERS) is None)
    assert unplaced == [], f"node modules in no layer of {DOC.name}: {unplaced}"
    bad: list[str] = []
    for arrow in arrows():
        if not (_within(arrow.source, "node") and _within(arrow.target, "node")) or "node" in (
            arrow.source,
            arrow.target,
        ):
            continue
        source, target = _row(arrow.source, LAYERS), _row(arrow.target, LAYERS)
        assert source is not None and target is not None
        if LAYERS[target] > LAYERS[source]:
            bad.append(f"{arrow} (layer {LAYERS[source]} imports layer {LAYERS[target]})")
    assert bad == [], "arrows up the node layers:\n" + "\n".join(bad)


def test_handlers_import_no_server_broker_or_other_handler() -> None:
    bad = []
    for arrow in arrows():
        if not arrow.source.startswith("node.handlers.") or arrow.source == "node.handlers._services":
            continue
        if arrow.target.startswith("node.handlers") and arrow.target != "node.handlers._services":
            bad.append(arrow)
        if arrow.target in ("node.server", "node.broker", "node.broker_view", "node.admin_http"):
            bad.append(arrow)
    assert bad == [], "\n".join(map(str, bad))


def test_the_protocol_package_never_touches_sockets_or_trio() -> None:
    offenders = []
    for name, path in modules().items():
        if _within(name, "node.protocol"):
            text = path.read_text()
            if re.search(r"^\s*(import|from)\s+(trio|socket|asyncio)\b", text, re.MULTILINE):
                offenders.append(name)
    assert offenders == []


def test_the_checker_finds_a_planted_cycle_and_an_upward_arrow() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert _row("node.handlers.fetch", LAYERS) == "node.handlers"
    assert LAYERS["node.broker"] > LAYERS["node.handlers"]  # handlers -> broker would be flagged
    assert not any(_within("node.broker", p) for p in ("storage", *PACKAGES["mirror"]))
