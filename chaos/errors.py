"""The chaos suite's exceptions: one base, one subclass per thing that can go wrong, each naming its values.

The fault proxy raises these from its in-process API; its HTTP API turns them into toxiproxy's
status codes at the response boundary (``chaos._proxy_http``): not found 404, already exists 409,
invalid input 400.
"""

from __future__ import annotations

__all__ = [
    "ChaosError",
    "InvalidRequestError",
    "LedgerError",
    "NemesisError",
    "ProxyExistsError",
    "ProxyNotFoundError",
    "ToxicExistsError",
    "ToxicNotFoundError",
    "WorkloadError",
]


class ChaosError(Exception):
    """Base of every error the chaos package raises on purpose."""


class InvalidRequestError(ChaosError):
    """A proxy or toxic description is malformed: the message names the field and the bad value."""


class ProxyNotFoundError(ChaosError):
    def __init__(self, name: str) -> None:
        super().__init__(f"proxy not found: {name!r}")
        self.name = name


class ProxyExistsError(ChaosError):
    def __init__(self, name: str) -> None:
        super().__init__(f"proxy already exists: {name!r}")
        self.name = name


class ToxicNotFoundError(ChaosError):
    def __init__(self, proxy: str, toxic: str) -> None:
        super().__init__(f"toxic not found: {toxic!r} on proxy {proxy!r}")
        self.proxy = proxy
        self.toxic = toxic


class ToxicExistsError(ChaosError):
    def __init__(self, proxy: str, toxic: str) -> None:
        super().__init__(f"toxic already exists: {toxic!r} on proxy {proxy!r}")
        self.proxy = proxy
        self.toxic = toxic


class LedgerError(ChaosError):
    """A ledger file cannot be read back (the message names the file and line)."""


class NemesisError(ChaosError):
    """A nemesis could not inject or end its fault (the message names the target and why)."""


class WorkloadError(ChaosError):
    """A workload failed or did not reach its goal in time (the message gives the counters and errors)."""
