"""The import graph of strait's own packages, read from the source with ``ast`` (nothing is imported).

Every import counts: module level, inside functions, and under ``if TYPE_CHECKING:``, because
each one is an arrow a reader has to follow. ``from pkg import name`` is an arrow to
``pkg.name`` when that is a module of ours, else to ``pkg``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("storage", "node", "mirror", "failover", "chaos", "spark_jobs", "strait")


@dataclass(frozen=True, slots=True)
class Arrow:
    source: str  # importing module, dotted
    target: str  # imported module of ours, dotted
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def _resolve(current: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def arrows() -> list[Arrow]:
    """Every import from one of our modules to another, in file and line order."""
    known = modules()
    out: list[Arrow] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node.level, node.module)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in known else base)
            for imported in targets:
                target = imported
                while target and target not in known:
                    target = target.rpartition(".")[0]  # `import node.protocol.x` -> the module we own
                if target and target != name:
                    out.append(Arrow(name, target, node.lineno))
    return sorted(set(out), key=lambda a: (a.source, a.line, a.target))


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None (iterative depth-first search)."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    for start in sorted(graph):
        if colour[start] != WHITE:
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        path = [start]
        colour[start] = GREY
        while stack:
            node, pending = stack[-1]
            if not pending:
                colour[node] = BLACK
                stack.pop()
                path.pop()
                continue
            nxt = pending.pop(0)
            if colour.get(nxt, BLACK) == GREY:
                return [*path[path.index(nxt) :], nxt]
            if colour.get(nxt) == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                stack.append((nxt, sorted(graph[nxt])))
    return None
