"""``python -m node.config docs/configuration.md``: rewrite the page's generated key references."""

from __future__ import annotations

import sys
from pathlib import Path

from ._docs import update_docs


def main(argv: list[str]) -> int:
    """Rewrite the generated sections of each file named in ``argv``; 2 (and usage) when none is named."""
    if not argv:
        print("usage: python -m node.config docs/configuration.md", file=sys.stderr)
        return 2
    for name in argv:
        path = Path(name)
        path.write_text(update_docs(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
