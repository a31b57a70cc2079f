"""QuotaManager: which rate a request is recorded on, the throttle it asks for, its bounds."""

from __future__ import annotations

import pytest

from node.quotas import QuotaKind, QuotaManager, Quotas, QuotaSettings, Usage
from node.quotas._manager import MAX_BYTE_THROTTLE_S

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def manager(quotas: Quotas, settings: QuotaSettings | None = None) -> tuple[QuotaManager, Clock]:
    clock = Clock()
    quotas_manager = QuotaManager(settings or QuotaSettings(), clock)
    quotas_manager.update(quotas)
    return quotas_manager, clock


def test_no_quota_records_nothing() -> None:
    quotas, _ = manager({})
    assert not quotas.active
    assert quotas.record("alice", "c1", Usage(produce_bytes=10**9)) == 0.0
    assert quotas.rates() == []


def test_a_producer_over_its_byte_rate_is_throttled_until_the_rate_is_back() -> None:
    quotas, clock = manager({(("client-id", "c1"),): {"producer_byte_rate": 1000.0}})
    assert quotas.record("", "c1", Usage(produce_bytes=5000)) == 0.0  # 5000 over 10 s: 500/s
    throttle = quotas.record("", "c1", Usage(produce_bytes=15000))  # 20000 over 10 s: 2000/s
    assert throttle == pytest.approx(10.0)  # 20000 / (10 + 10) s = 1000/s
    assert quotas.throttled[QuotaKind.PRODUCE] == 1
    # Kafka's measure: the burst leaves the rate once its window is older than the whole span.
    clock.now += quotas.settings.span_s
    assert quotas.record("", "c1", Usage(produce_bytes=1)) == 0.0
    assert quotas.record("", "other", Usage(produce_bytes=10**6)) == 0.0  # another client id: no quota


def test_fetch_bytes_and_handler_time_count_on_their_own_quotas() -> None:
    quotas, _ = manager({(("user", "alice"),): {"consumer_byte_rate": 100.0, "request_percentage": 10.0}})
    assert quotas.record("alice", "c", Usage(produce_bytes=10**6)) == 0.0  # no producer quota
    assert quotas.record("alice", "c", Usage(fetch_bytes=2000)) == pytest.approx(10.0)
    # 1.1 s of handler time over 10 s is 11% of a thread: 1 s over request_percentage 10.
    assert quotas.record("alice", "c", Usage(handler_s=1.1)) == pytest.approx(1.0)
    kinds = {row[0] for row in quotas.rates()}
    assert kinds == {"fetch", "request"}


def test_a_default_entity_gives_each_user_a_rate_of_its_own() -> None:
    quotas, _ = manager({(("user", None),): {"producer_byte_rate": 1000.0}})
    assert quotas.record("alice", "c", Usage(produce_bytes=9000)) == 0.0
    assert quotas.record("bob", "c", Usage(produce_bytes=9000)) == 0.0
    assert quotas.record("alice", "d", Usage(produce_bytes=9000)) > 0  # alice's two clients share hers
    assert sorted(row[1] for row in quotas.rates()) == ["alice", "bob"]


def test_the_user_quota_overrides_the_client_id_one() -> None:
    quotas, _ = manager(
        {
            (("client-id", "c1"),): {"producer_byte_rate": 10.0},
            (("user", "alice"),): {"producer_byte_rate": 10**6},
        }
    )
    assert quotas.quota(QuotaKind.PRODUCE, "alice", "c1") == 10**6
    assert quotas.record("alice", "c1", Usage(produce_bytes=10**5)) == 0.0
    assert quotas.record("bob", "c1", Usage(produce_bytes=10**5)) > 0


def test_request_throttles_are_bounded_by_a_window_and_byte_throttles_follow_the_formula() -> None:
    settings = QuotaSettings(window_num=5, window_s=2.0)
    limits = {"consumer_byte_rate": 10.0, "producer_byte_rate": 10.0, "request_percentage": 1.0}
    quotas, _ = manager({(("client-id", "c"),): limits}, settings)
    # 1000 bytes over a span of 4 windows (8 s): 1000 / 10 - 8 s of silence, as Kafka asks (unbounded).
    assert quotas.record("", "c", Usage(produce_bytes=1000)) == pytest.approx(92.0)
    assert quotas.record("", "c", Usage(produce_bytes=10**12)) == MAX_BYTE_THROTTLE_S
    assert quotas.record("", "c", Usage(handler_s=100.0)) == 2.0  # one window, as Kafka bounds request quotas
    assert quotas.fetch_cap("", "c") == 20
    assert quotas.fetch_cap("", "other") is None


def test_an_update_applies_to_the_next_request() -> None:
    quotas, _ = manager({})
    quotas.update({(("client-id", "c"),): {"producer_byte_rate": 1.0}})
    assert quotas.record("", "c", Usage(produce_bytes=1000)) > 0
    quotas.update({})
    assert quotas.record("", "c", Usage(produce_bytes=1000)) == 0.0
    assert [row[0] for row in quotas.throttle_totals()] == ["produce", "fetch", "request"]


def test_the_node_metrics_show_throttling_and_rates() -> None:
    from node.metrics import NodeMetrics

    quotas, _ = manager({(("user", "alice"),): {"producer_byte_rate": 100.0}})
    metrics = NodeMetrics()
    metrics.attach_quotas(quotas)
    quotas.record("alice", "c1", Usage(produce_bytes=2000))
    text = metrics.render().decode()
    assert 'strait_quota_throttle_seconds_total{quota="produce"} 10.0' in text
    assert 'strait_quota_throttled_total{quota="produce"} 1.0' in text
    assert 'strait_quota_rate{client_id="",quota="produce",user="alice"} 200.0' in text
    assert 'strait_quota_limit{client_id="",quota="produce",user="alice"} 100.0' in text
