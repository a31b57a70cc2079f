"""The clock check's verdicts, and the real adjtimex call (read-only)."""

from __future__ import annotations

import ctypes
import sys

import pytest

from node.doctor import ClockState, Status
from node.doctor._clock import _Timex, check_clock, read_kernel_clock


def test_a_synchronised_clock_with_a_small_error_passes() -> None:
    finding = check_clock(lambda: ClockState(True, max_error_us=20_000, est_error_us=500))
    assert (finding.check, finding.subject, finding.status) == ("clock", "kernel clock", Status.OK)
    assert finding.measured == 20.0 and "estimated error 0.5 ms, max error 20 ms" in finding.detail


def test_an_unsynchronised_clock_only_warns() -> None:
    finding = check_clock(lambda: ClockState(False, max_error_us=16_000_000, est_error_us=16_000_000))
    assert finding.status is Status.WARN and finding.measured == "unsynchronised"
    assert "not synchronised" in finding.detail and "chrony" in finding.detail


def test_a_large_error_bound_warns_above_the_threshold() -> None:
    state = ClockState(True, max_error_us=250_000, est_error_us=1_000)
    assert check_clock(lambda: state).status is Status.WARN
    assert check_clock(lambda: state, max_error_ms=500).status is Status.OK


def test_a_kernel_that_cannot_be_asked_warns() -> None:
    def broken() -> ClockState:
        raise OSError("no adjtimex in the C library")

    finding = check_clock(broken)
    assert finding.status is Status.WARN and "no adjtimex" in finding.detail and finding.measured is None


@pytest.mark.skipif(sys.platform != "linux", reason="adjtimex is Linux's")
def test_the_kernel_answers_adjtimex_without_privileges() -> None:
    if ctypes.sizeof(ctypes.c_long) == 8:
        assert ctypes.sizeof(_Timex) == 208  # the kernel's struct timex on LP64
    state = read_kernel_clock()
    assert state.max_error_us >= 0 and state.est_error_us >= 0
    assert check_clock(read_kernel_clock).status in (Status.OK, Status.WARN)  # never a failure
