"""The codec's exceptions: one base, subclasses that carry the header values involved.

The broker's answer depends on the subclass: a ``MalformedRequest`` closes the connection,
``UnknownApi`` and ``UnsupportedVersion`` are answered (or the connection closed) using the header
values they carry. ``EncodeError`` is a programming error in a handler or client: a value that does
not fit its declared type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._header import RequestHeader


class ProtocolError(Exception):
    """Base of every error the codec raises on purpose."""


class MalformedRequest(ProtocolError):
    """A request frame does not parse. The message names the field path and byte offset.

    ``header`` is the request header when the header itself parsed, else ``None``.
    """

    def __init__(self, message: str, *, header: RequestHeader | None = None) -> None:
        super().__init__(message)
        self.header = header


class MalformedResponse(ProtocolError):
    """A response frame does not parse. The message names the field path and byte offset."""


class UnknownApi(ProtocolError):
    """A request for an API key that has no schema here.

    Carries ``api_key``, ``api_version`` and ``correlation_id`` (the latter two None when the key came
    from a lookup rather than a request), and ``header`` when the request header parsed.
    """

    def __init__(
        self,
        api_key: int,
        api_version: int | None = None,
        correlation_id: int | None = None,
        *,
        header: RequestHeader | None = None,
    ) -> None:
        context = "" if api_version is None else f" (version {api_version}, correlation id {correlation_id})"
        super().__init__(f"unknown api key {api_key}{context}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.header = header


class UnsupportedVersion(ProtocolError):
    """A known API at a version outside the range declared here. ``header`` is the parsed request header.

    For an ApiVersions request the broker answers with ``api_versions_fallback`` (error 35) so the
    client retries with a lower version.
    """

    def __init__(self, api_name: str, api_version: int, max_version: int, *, header: RequestHeader | None) -> None:
        super().__init__(f"{api_name} version {api_version} is not supported (supported: 0-{max_version})")
        self.api_version = api_version
        self.max_version = max_version
        self.header = header


class EncodeError(ProtocolError):
    """A value cannot be encoded as its declared field type. The message names the field path and value."""


class DecodeFailure(Exception):
    """Internal: raised while reading a frame; entry points turn it into MalformedRequest/MalformedResponse.

    ``path`` is built innermost-first as the exception passes through struct and array readers.
    """

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset
        self.path: list[str] = []

    def describe(self) -> str:
        where = "".join(self.path).lstrip(".") or "<frame>"
        return f"field {where} at byte offset {self.offset}: {self.reason}"


class EncodeFailure(Exception):
    """Internal: raised while writing a frame; entry points turn it into EncodeError."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []

    def describe(self) -> str:
        where = "".join(self.path).lstrip(".") or "<body>"
        return f"field {where}: {self.reason}"
