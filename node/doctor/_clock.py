"""Is the clock synchronised? The kernel's own answer, from ``adjtimex(2)`` (read-only: modes 0).

An NTP daemon (chrony, ntpd, systemd-timesyncd) that disciplines the clock clears ``STA_UNSYNC``
in the kernel's status and keeps ``maxerror`` (an upper bound on the clock's error, growing by
the drift allowance until the daemon updates it) small; with no daemon, the status keeps
``STA_UNSYNC`` and ``adjtimex`` returns ``TIME_ERROR``. Nothing here needs ``timedatectl``,
systemd or privileges.

Verdicts are **warnings** at worst: strait's correctness never rests on wall clocks
(replication uses offsets and leader epochs, the mirror appends at offsets), but record
timestamps (``LogAppendTime``), time-based retention and segment rolls, and the mirror's lag and
RPO in seconds compare clocks across hosts and sites, so they are only as good as the sync.
This test machine's clock is often unsynchronised: a warning, by design.

``struct timex`` (``<sys/timex.h>``), as declared below with C's alignment: ``modes`` (what to
set: 0 reads only), ``offset``, ``freq``, ``maxerror`` and ``esterror`` (microseconds),
``status`` (``STA_*`` bits), then fields read by nothing here, and padding to the kernel's size.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from dataclasses import dataclass

from ._findings import Finding, Status

__all__ = ["MAX_CLOCK_ERROR_MS", "STA_UNSYNC", "TIME_ERROR", "ClockState", "check_clock", "read_kernel_clock"]

STA_UNSYNC = 0x0040  # status bit: the clock is not synchronised
TIME_ERROR = 5  # adjtimex's return value when the clock is not synchronised
#: Above this bound on the clock's error (ms), a synchronised clock still warns.
MAX_CLOCK_ERROR_MS = 100.0


class _Timeval(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long))


class _Timex(ctypes.Structure):
    _fields_ = (
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time", _Timeval),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_reserved", ctypes.c_int * 11),
    )


@dataclass(frozen=True)
class ClockState:
    """What the kernel says about its clock: synchronised or not, and its error bounds (µs)."""

    synchronised: bool
    max_error_us: int
    est_error_us: int


def read_kernel_clock() -> ClockState:
    """The kernel's clock state from ``adjtimex`` with modes 0 (changes nothing).

    Raises OSError where the C library has no ``adjtimex`` (not Linux) or the call fails.
    """
    try:
        adjtimex = ctypes.CDLL(None, use_errno=True).adjtimex
    except (OSError, AttributeError) as exc:
        raise OSError(f"no adjtimex in the C library: {exc}") from None
    timex = _Timex()
    state = adjtimex(ctypes.byref(timex))
    if state < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    synchronised = state != TIME_ERROR and not timex.status & STA_UNSYNC
    return ClockState(synchronised, int(timex.maxerror), int(timex.esterror))


def check_clock(
    read: Callable[[], ClockState] = read_kernel_clock, max_error_ms: float = MAX_CLOCK_ERROR_MS
) -> Finding:
    """ok when the kernel's clock is synchronised with an error bound within ``max_error_ms``,
    else a warning (also when the kernel cannot be asked). Never raises."""
    expected = f"synchronised, max error <= {max_error_ms:g} ms"
    try:
        state = read()
    except OSError as exc:
        return Finding("clock", "kernel clock", Status.WARN, f"cannot ask the kernel: {exc}", None, expected)
    max_ms, est_ms = state.max_error_us / 1000, state.est_error_us / 1000
    if not state.synchronised:
        detail = (
            "not synchronised: no NTP daemon (chrony, ntpd, systemd-timesyncd) disciplines this clock, so "
            "timestamps, time-based retention and the mirror's lag in seconds drift from other hosts'"
        )
        return Finding("clock", "kernel clock", Status.WARN, detail, "unsynchronised", expected)
    errors = f"estimated error {est_ms:g} ms, max error {max_ms:g} ms"
    if max_ms > max_error_ms:
        detail = f"synchronised, but {errors}; expected max error <= {max_error_ms:g} ms"
        return Finding("clock", "kernel clock", Status.WARN, detail, max_ms, expected)
    return Finding("clock", "kernel clock", Status.OK, f"synchronised, {errors}", max_ms, expected)
