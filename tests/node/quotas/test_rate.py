"""SampledRate: Kafka's sampled windows, the span a rate is measured over, and the throttle time."""

from __future__ import annotations

import pytest

from node.quotas import SampledRate

pytestmark = pytest.mark.unit


def test_a_first_burst_is_spread_over_all_but_one_window() -> None:
    rate = SampledRate(11, 1.0)
    rate.record(1000, now=100.0)
    # Nothing older than the first record: the span is the 10 windows Kafka counts at least.
    assert rate.span(100.0) == pytest.approx(10.0)
    assert rate.rate(100.0) == pytest.approx(100.0)


def test_the_span_grows_with_the_oldest_window_up_to_all_of_them() -> None:
    rate = SampledRate(3, 1.0)
    for second in range(5):
        rate.record(100, now=float(second))
    # Windows started at 2, 3 and 4 are kept (0 and 1 were reused); the span runs from 2 to 4.5.
    assert rate.span(4.5) == pytest.approx(2.5)
    assert rate.rate(4.5) == pytest.approx(300 / 2.5)


def test_windows_older_than_the_whole_span_count_for_nothing() -> None:
    rate = SampledRate(2, 1.0)
    rate.record(500, now=0.0)
    assert rate.rate(10.0) == 0.0
    rate.record(10, now=10.0)
    assert rate.rate(10.0) == pytest.approx(10 / 1.0)


def test_throttle_is_the_silence_that_brings_the_rate_back_to_the_quota() -> None:
    rate = SampledRate(11, 1.0)
    rate.record(2000, now=0.0)  # 2000 over a 10 s span: 200/s
    assert rate.throttle_s(100.0, now=0.0) == pytest.approx(10.0)  # 2000 / (10 + 10) = 100/s
    assert rate.throttle_s(200.0, now=0.0) == 0.0
    assert rate.throttle_s(1000.0, now=0.0) == 0.0


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one window"):
        SampledRate(0, 1.0)
    with pytest.raises(ValueError, match="positive length"):
        SampledRate(11, 0.0)
