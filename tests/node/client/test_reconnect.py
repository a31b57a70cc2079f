"""node.client.run_reconnecting: the copiers' step / reset / back off loop, on trio's mock clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from node.client import ClientError, aclose_quietly, run_reconnecting


class Recorder:
    """A step that fails with the queued errors (None: succeeds), and a log of what the loop did."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes = list(outcomes)
        self.events: list[tuple[str, float, str]] = []

    async def step(self) -> None:
        outcome = self.outcomes.pop(0) if self.outcomes else None
        self.events.append(("step", trio.current_time(), ""))
        if outcome is not None:
            raise outcome
        if not self.outcomes:
            await trio.sleep_forever()

    async def reset(self) -> None:
        self.events.append(("reset", trio.current_time(), ""))

    def on_error(self, exc: Exception) -> None:
        self.events.append(("error", trio.current_time(), str(exc)))


def run(recorder: Recorder, *, backoff_s: float = 0.5, for_s: float = 10.0) -> None:
    async def main() -> None:
        with trio.move_on_after(for_s):
            await run_reconnecting(recorder.step, reset=recorder.reset, on_error=recorder.on_error, backoff_s=backoff_s)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_each_error_is_reported_then_reset_then_backed_off_before_the_next_step() -> None:
    recorder = Recorder(ClientError("leader moved"), OSError("connection reset"), trio.BrokenResourceError("gone"))
    run(recorder, backoff_s=0.5)
    assert [(kind, at) for kind, at, _ in recorder.events] == [
        ("step", 0.0),
        ("error", 0.0),
        ("reset", 0.0),
        ("step", 0.5),
        ("error", 0.5),
        ("reset", 0.5),
        ("step", 1.0),
        ("error", 1.0),
        ("reset", 1.0),
        ("step", 1.5),  # succeeds and runs on until cancelled
        ("reset", 10.0),  # the loop's end resets once more
    ]
    assert [detail for kind, _, detail in recorder.events if kind == "error"] == [
        "leader moved",
        "connection reset",
        "gone",
    ]


def test_steps_repeat_while_they_succeed() -> None:
    calls: list[float] = []

    async def step() -> None:
        calls.append(trio.current_time())
        await trio.sleep(1)

    async def reset() -> None:
        pass

    async def main() -> None:
        with trio.move_on_after(3.5):
            await run_reconnecting(step, reset=reset, on_error=lambda exc: None, backoff_s=60)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert calls == [0.0, 1.0, 2.0, 3.0]


def test_a_bug_propagates_after_a_reset() -> None:
    recorder = Recorder(ValueError("not a connection problem"))
    with pytest.raises(ValueError, match="not a connection problem"):
        run(recorder)
    assert [kind for kind, _, _ in recorder.events] == ["step", "reset"]


def test_cancellation_during_the_backoff_still_resets_shielded() -> None:
    finished: list[str] = []

    async def step() -> None:
        raise ClientError("down")

    async def reset() -> None:
        await trio.sleep(0.1)  # would raise Cancelled at the loop's end without the shield
        finished.append("reset")

    async def main() -> None:
        with trio.move_on_after(0.25):
            await run_reconnecting(step, reset=reset, on_error=lambda exc: None, backoff_s=1.0)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert finished == ["reset", "reset"]  # after the error, and at the loop's end


def test_aclose_quietly_skips_none_and_ignores_errors() -> None:
    closed: list[str] = []

    class Conn:
        def __init__(self, name: str, fail: bool) -> None:
            self.name, self.fail = name, fail

        async def aclose(self) -> None:
            closed.append(self.name)
            if self.fail:
                raise OSError("already broken")

    trio.run(aclose_quietly, Conn("a", True), None, Conn("b", False))  # type: ignore[arg-type]
    assert closed == ["a", "b"]
