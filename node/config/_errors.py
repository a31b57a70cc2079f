"""The one exception of node.config: a key or value strait cannot accept, named in the message."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A configuration key or value strait cannot accept.

    ``key``, ``value`` (the raw text) and ``source`` (file or origin) are kept as attributes
    and named in the message: ``server.properties: num.partitions='x': not an integer``.
    """

    def __init__(self, reason: str, *, key: str | None = None, value: str | None = None, source: str | None = None):
        self.reason, self.key, self.value, self.source = reason, key, value, source
        where = f"{source}: " if source else ""
        if key is not None and value is not None:
            what = f"{key}={value!r}: "
        elif key is not None:
            what = f"{key}: "
        else:
            what = ""
        super().__init__(f"{where}{what}{reason}")
