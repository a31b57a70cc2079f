from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from storage import FaultPoints, LogConfig, PartitionLog, create_log, load_log
from tests.storage.helpers import TP, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def faults() -> FaultPoints:
    return FaultPoints()


@pytest.fixture
def make_log(tmp_path: Path, clock: FakeClock, faults: FaultPoints) -> Callable[..., PartitionLog]:
    def make(config: LogConfig | None = None, **kw: object) -> PartitionLog:
        return create_log(tmp_path / "t-0", TP, config or LogConfig(), faults=faults, clock=clock, **kw)  # type: ignore[arg-type]

    return make


@pytest.fixture
def reopen(tmp_path: Path, clock: FakeClock, faults: FaultPoints) -> Callable[..., PartitionLog]:
    def again(config: LogConfig | None = None, *, clean: bool = True, recovery_point: int = 0) -> PartitionLog:
        log, _ = load_log(
            tmp_path / "t-0",
            TP,
            config or LogConfig(),
            clean_shutdown=clean,
            recovery_point=recovery_point,
            faults=faults,
            clock=clock,
        )
        return log

    return again
