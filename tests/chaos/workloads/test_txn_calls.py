"""The transactional loop's guard around librdkafka calls that may never return (librdkafka#5456)."""

from __future__ import annotations

import threading

import pytest

from chaos.workloads import _txn

pytestmark = pytest.mark.unit


def test_a_call_that_returns_or_raises_in_time_is_passed_through() -> None:
    assert _txn._bounded("commit_transaction", lambda timeout: timeout * 2, 0.5) == 1.0
    with pytest.raises(ValueError, match="refused"):
        _txn._bounded("abort_transaction", lambda _timeout: (_ for _ in ()).throw(ValueError("refused")), 0.5)


def test_a_call_that_overruns_its_timeout_is_given_up_on_and_left_to_its_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_txn, "_OVERRUN_S", 0.2)
    release = threading.Event()
    try:
        with pytest.raises(_txn._Stuck, match=r"send_offsets_to_transaction did not return within 0 s"):
            _txn._bounded("send_offsets_to_transaction", lambda _timeout: release.wait(30), 0.1)
        assert issubclass(_txn._Stuck, _txn._Broken)  # the producer is replaced, as after a fatal error
    finally:
        release.set()
