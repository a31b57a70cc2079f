"""What every nemesis is: ``start`` injects a fault, ``heal`` ends it; a ``with`` block does both."""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self


class Nemesis(Protocol):
    """A fault the chaos suite can inject and end, Jepsen's nemesis.

    ``start`` returns once the fault is in place; ``heal`` returns once the targets are back in
    service. Both are idempotent, and ``heal`` is safe after a ``start`` that failed halfway.
    """

    def start(self) -> None: ...

    def heal(self) -> None: ...


class NemesisContext:
    """Mixin: ``with nemesis:`` starts the fault on entry and heals it on exit, whatever happened inside."""

    def start(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.heal()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.heal()
