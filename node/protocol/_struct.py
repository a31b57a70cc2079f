"""``Struct``, the value of a decoded (or to-be-encoded) message or nested struct, and ``Region``.

A decoded ``Struct`` has every field its schema declares, in any version: fields absent from the
version on the wire hold their declared default, so a handler can read ``req.max_bytes`` without
checking the version. Field values are plain Python: int, bool, float, str, bytes, uuid.UUID, lists,
nested ``Struct``; ``records`` are a zero-copy ``memoryview`` of the request frame (or None).
"""

from __future__ import annotations

from typing import Any, Protocol


class Struct:
    """Attribute access by snake_case field name; ``Struct(a=1, b=[Struct(c=2)])`` builds one by hand."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields; typed Any so handlers can read fields freely.
        if name.startswith("__"):
            raise AttributeError(name)
        known = ", ".join(self.__dict__) or "none"
        raise AttributeError(f"Struct has no field {name!r} (fields: {known})")

    def __setattr__(self, name: str, value: Any) -> None:
        # Declared so type checkers accept assignment to any field name, as they accept reads.
        self.__dict__[name] = value

    def to_dict(self) -> dict[str, Any]:
        """A plain dict; nested structs and lists are converted too, memoryviews become bytes."""
        return {name: _plain(value) for name, value in self.__dict__.items()}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Struct):
            return self.__dict__ == other.__dict__
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={_short_repr(value)}" for name, value in self.__dict__.items())
        return f"Struct({fields})"


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return value.tobytes()
    return value


def _short_repr(value: Any) -> str:
    if isinstance(value, memoryview):
        return f"<{value.nbytes} bytes>"
    return repr(value)


class Region(Protocol):
    """A byte range of an open file, written to the socket with ``os.sendfile`` by the server.

    ``storage.FileSlice`` is one. The encoder only reads these three attributes, never the file.
    """

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...
