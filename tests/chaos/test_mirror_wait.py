"""The runner's wait for the mirror after the heal: caught up, stuck on divergence, or out of time."""

from __future__ import annotations

from collections.abc import Callable

from chaos import runner


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def wait(
    target: Callable[[float], dict[int, int]], diverged: Callable[[float], set[int]]
) -> tuple[dict[int, int], str | None, float]:
    clock = Clock()
    source = {0: 10, 1: 20, 2: 30}

    def watermarks(bootstrap: str, _topic: str) -> dict[int, int]:
        return source if bootstrap == "east" else target(clock.now)

    ends, behind = runner._wait_mirror_caught_up(
        "east",
        "west",
        "t",
        lambda _: None,
        "s",
        diverged=lambda: diverged(clock.now),
        watermarks=watermarks,
        clock=clock,
        sleep=clock.sleep,
    )
    return ends, behind, clock.now


def test_a_mirror_that_catches_up_ends_the_wait_without_a_finding() -> None:
    ends, behind, took = wait(lambda t: {0: 10, 1: 20, 2: 30 if t >= 5 else 29}, lambda _: set())
    assert (ends, behind) == ({0: 10, 1: 20, 2: 30}, None)
    assert took == 5


def test_partitions_that_stay_diverged_end_the_wait_with_that_finding() -> None:
    ends, behind, took = wait(lambda _: {0: 10, 1: 25, 2: 30}, lambda _: {1})
    assert ends == {0: 10, 1: 20, 2: 30}
    assert behind is not None and "stopped copying partitions [1]" in behind and "diverged" in behind
    assert took <= runner.DIVERGED_FOR_S + 1  # not the whole MIRROR_CATCH_UP_S


def test_a_moment_of_divergence_is_waited_out() -> None:
    # A new leader's high watermark can trail for a moment: the mirror says diverged, then copies on.
    ends, behind, took = wait(
        lambda t: {0: 10, 1: 20 if t >= 20 else 25, 2: 30}, lambda t: {1} if 3 <= t < 8 or 9 <= t < 15 else set()
    )
    assert (ends, behind, took) == ({0: 10, 1: 20, 2: 30}, None, 20)


def test_a_mirror_that_never_catches_up_is_a_finding_after_the_bound() -> None:
    _, behind, took = wait(lambda _: {0: 10, 1: 19, 2: 30}, lambda _: set())
    assert behind is not None and "did not catch up within" in behind
    assert took >= runner.MIRROR_CATCH_UP_S
