"""reconcile's command line, checked: what the job module and the streaming follower share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._reconcile_sides import Side
from ._security import describe


@dataclass
class Options:
    """The command line, checked (sides parsed) before any output is made."""

    source: Side
    target: Side
    topics: list[str] | None
    mode: str
    source_alias: str | None
    target_alias: str | None
    link: str | None
    require_caught_up: bool
    continuous: bool
    checkpoint: Path | None
    trigger_seconds: float
    until_idle: float | None
    by_record: bool = False
    _source_held: dict[str, list[int]] | None = None

    def source_held(self) -> dict[str, list[int]]:
        """The source's topics and partitions (asked once)."""
        if self._source_held is None:
            self._source_held = self.source.partitions()
        return self._source_held

    def inputs(self) -> dict[str, Any]:
        return {
            "source": self.source.value,
            "source_kind": self.source.kind,
            "target": self.target.value,
            "target_kind": self.target.kind,
            **{
                f"{side.option.lstrip('-')}_security": describe(side.security)
                for side in (self.source, self.target)
                if side.kind == "kafka"
            },
            "link": self.link,
            "mode": self.mode,
            "source_alias": self.source_alias,
            "target_alias": self.target_alias,
            "topics": self.topics,
            "require_caught_up": self.require_caught_up,
            "continuous": self.continuous,
            "by_record": self.by_record,
        }
