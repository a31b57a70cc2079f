"""bench/'s layering: a benchmark script imports shared private modules (``bench._*``), never another script."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if not p.stem.startswith("_"))


def _runtime_bench_imports(path: Path) -> set[str]:
    """The ``bench`` modules a file imports when it runs (imports under ``if TYPE_CHECKING:`` left out)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    type_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
        for node in ast.walk(block)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                found.add(node.module or "")
                found.update(alias.name for alias in node.names if node.module is None)
            elif node.module and node.module.startswith("bench."):
                found.add(node.module.removeprefix("bench."))
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("bench.") for a in node.names if a.name.startswith("bench."))
    return found


def test_the_scripts_are_found() -> None:
    assert {"storage_bench", "node_bench", "replication_bench", "mirror_bench"} <= set(SCRIPTS)


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_no_bench_module_imports_a_benchmark_script(path: Path) -> None:
    scripts = sorted(_runtime_bench_imports(path) & set(SCRIPTS))
    assert scripts == [], f"{path.name} imports the benchmark script(s) {scripts}; share code through bench/_*.py"
