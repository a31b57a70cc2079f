"""Fetch sizing by the bandwidth-delay product (unit): mirror._fetch_size.FetchSizer."""

from __future__ import annotations

import pytest

from mirror._fetch_size import GRANULE, MIN_FETCH_BYTES, FetchSizer

MIB = 1024 * 1024


def test_it_starts_at_the_maximum() -> None:
    assert FetchSizer(8 * MIB).size == 8 * MIB


def test_it_doubles_while_fetches_come_back_full_up_to_the_maximum() -> None:
    sizer = FetchSizer(8 * MIB, size=MIN_FETCH_BYTES)
    sizes = []
    now = 0.0
    for _ in range(6):
        sizes.append(sizer.observe(sizer.size, now, now + 0.001))  # a fast link: the size is the limit
        now += 0.001
    assert sizes == [2 * MIB, 4 * MIB, 8 * MIB, 8 * MIB, 8 * MIB, 8 * MIB]


def test_a_fetch_covers_twice_rate_times_round_trip() -> None:
    sizer = FetchSizer(64 * MIB, size=MIN_FETCH_BYTES)
    now = 0.0
    for _ in range(40):  # 512 KiB arrive per 100 ms round trip: 5 MiB/s, a BDP of 512 KiB
        sizer.observe(512 * 1024, now, now + 0.1)
        now += 0.1
    assert sizer.rtt_s == pytest.approx(0.1)
    assert sizer.bdp_bytes == pytest.approx(512 * 1024, rel=0.01)
    assert sizer.size == MIB  # 2 x BDP, and never below the minimum


def test_a_long_round_trip_asks_for_more_than_the_minimum() -> None:
    sizer = FetchSizer(64 * MIB, size=MIN_FETCH_BYTES)
    now = 0.0
    for _ in range(40):  # 1.5 MiB per 200 ms: 7.5 MiB/s x 0.2 s = 1.5 MiB
        sizer.observe(3 * MIB // 2, now, now + 0.2)
        now += 0.2
    assert sizer.size == 3 * MIB  # 2 x 1.5 MiB, a multiple of the granule
    assert sizer.size % GRANULE == 0


def test_empty_long_polls_do_not_count_as_round_trips_and_the_size_falls_back() -> None:
    sizer = FetchSizer(16 * MIB, size=16 * MIB)
    sizer.observe(MIB, 0.0, 0.05)
    assert sizer.rtt_s == pytest.approx(0.05)
    now = 0.05
    for _ in range(30):  # idle: every fetch waits out its max wait and returns nothing
        sizer.observe(0, now, now + 0.5)
        now += 0.5
    assert sizer.rtt_s == pytest.approx(0.05)
    assert sizer.size == MIN_FETCH_BYTES


def test_a_maximum_below_the_minimum_is_the_size_and_below_the_granule_is_refused() -> None:
    assert FetchSizer(256 * 1024).size == 256 * 1024
    with pytest.raises(ValueError, match="the largest fetch \\(1000 bytes\\) must be at least 65536 bytes"):
        FetchSizer(1000)
