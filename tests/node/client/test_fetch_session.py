"""The fetcher's side of an incremental fetch session (KIP-227): a full fetch opens it, then each
fetch names only what changed and what to forget, the epoch moves on with every answer, and
every session error or failed exchange goes back to a full fetch that restates everything."""

from __future__ import annotations

from node.client import FetcherSession
from node.client._fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INT32_MAX
from node.protocol import ErrorCode

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def opened(wanted: dict[tuple[str, int], int], session_id: int = 7) -> FetcherSession[tuple[str, int], int]:
    session: FetcherSession[tuple[str, int], int] = FetcherSession()
    fetch = session.next_fetch(wanted)
    assert (fetch.session_id, fetch.session_epoch, fetch.full) == (0, INITIAL_EPOCH, True)
    assert fetch.partitions == wanted and fetch.forgotten == ()
    assert session.answered(fetch, 0, session_id)
    return session


def test_a_full_fetch_opens_the_session_and_then_only_changes_are_sent() -> None:
    session = opened({A: 10, B: 20})
    assert (session.session_id, session.epoch, session.held) == (7, 1, 2)

    nothing = session.next_fetch({A: 10, B: 20})
    assert (nothing.session_id, nothing.session_epoch, nothing.full) == (7, 1, False)
    assert nothing.partitions == {} and nothing.forgotten == ()
    assert session.answered(nothing, 0, 7)

    moved = session.next_fetch({A: 11, B: 20, C: 0})  # A appended, C followed from now on
    assert moved.session_epoch == 2 and moved.partitions == {A: 11, C: 0}
    assert session.answered(moved, 0, 7)

    dropped = session.next_fetch({A: 11, C: 0})  # B no longer followed
    assert dropped.session_epoch == 3 and dropped.partitions == {} and dropped.forgotten == (B,)
    assert session.answered(dropped, 0, 7)
    assert session.held == 2 and session.epoch == 4
    assert (session.full_fetches, session.incremental_fetches) == (1, 3)


def test_a_node_without_room_leaves_the_fetcher_on_full_fetches() -> None:
    session: FetcherSession[tuple[str, int], int] = FetcherSession()
    fetch = session.next_fetch({A: 1})
    assert session.answered(fetch, 0, 0)
    again = session.next_fetch({A: 1})
    assert again.full and again.session_id == 0 and again.partitions == {A: 1}


def test_session_errors_drop_the_session_and_ask_for_a_full_fetch_again() -> None:
    for code in (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    ):
        session = opened({A: 1, B: 2})
        fetch = session.next_fetch({A: 3, B: 2})
        assert not session.answered(fetch, code, 0), code  # not to be read: send again in full
        retry = session.next_fetch({A: 3, B: 2})
        assert retry.full and retry.session_id == 0 and retry.partitions == {A: 3, B: 2}


def test_a_closed_session_or_a_failed_request_goes_back_to_full_fetches() -> None:
    session = opened({A: 1})
    fetch = session.next_fetch({})
    assert session.answered(fetch, 0, 0)  # the node closed the emptied session
    assert session.next_fetch({A: 5}).full

    session = opened({A: 1})
    fetch = session.next_fetch({A: 2})
    assert session.answered(fetch, ErrorCode.UNKNOWN_SERVER_ERROR, 7)  # the caller raises it
    assert session.next_fetch({A: 2}).full

    session = opened({A: 1})
    session.next_fetch({A: 2})
    session.reset()  # the exchange failed: nothing is known of what the node took
    assert session.next_fetch({A: 2}).partitions == {A: 2}


def test_an_unanswered_change_is_sent_again() -> None:
    session = opened({A: 1})
    session.next_fetch({A: 2})  # lost with its connection: never answered
    session.reset()
    full = session.next_fetch({A: 2})
    assert session.answered(full, 0, 9)
    assert session.next_fetch({A: 2}).partitions == {}


def test_the_epoch_wraps_to_one() -> None:
    session = opened({A: 1})
    session.epoch = INT32_MAX
    fetch = session.next_fetch({A: 1})
    assert fetch.session_epoch == INT32_MAX
    assert session.answered(fetch, 0, 7)
    assert session.epoch == 1


def test_disabled_sessions_send_sessionless_full_fetches() -> None:
    session: FetcherSession[tuple[str, int], int] = FetcherSession(enabled=False)
    fetch = session.next_fetch({A: 1})
    assert (fetch.session_id, fetch.session_epoch, fetch.partitions) == (0, FINAL_EPOCH, {A: 1})
    assert session.answered(fetch, 0, 0)
    assert session.next_fetch({A: 1}).session_epoch == FINAL_EPOCH
