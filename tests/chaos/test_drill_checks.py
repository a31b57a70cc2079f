"""The drill's verdicts fire on a planted failure: a checker that cannot fail proves nothing."""

from __future__ import annotations

from chaos.drill import DrillReport, divergence_checks
from chaos.ledger import Ack, CheckResult, Position

LOST = Ack(Position("drill", 0, 10), b"v10")
EXPORTED = {(0, 10, b"v10"), (0, 11, b"unacked-but-on-east")}
EAST = {(0, 10): b"v10", (0, 11): b"unacked-but-on-east"}


def test_a_lost_write_that_is_in_the_export_passes_every_check() -> None:
    checks = divergence_checks(CheckResult(lost=[LOST]), EXPORTED, EAST, rpo_reported=1)
    assert all(checks.values()), checks


def test_a_lost_write_missing_from_the_export_fails() -> None:
    checks = divergence_checks(CheckResult(lost=[LOST]), EXPORTED - {(0, 10, b"v10")}, EAST, rpo_reported=0)
    assert not checks["every acknowledged write is on west or in the export"]


def test_an_exported_record_east_does_not_hold_fails() -> None:
    checks = divergence_checks(CheckResult(lost=[LOST]), EXPORTED | {(0, 12, b"invented")}, EAST, rpo_reported=0)
    assert not checks["the export holds only records east had beyond the cut"]


def test_a_reported_rpo_above_the_measured_one_fails() -> None:
    checks = divergence_checks(CheckResult(lost=[LOST]), EXPORTED, EAST, rpo_reported=2)
    assert not checks["the RPO reported at the promote is a lower bound of the measured one"]


def test_a_duplicate_on_west_fails_and_fails_the_drill() -> None:
    duplicate = CheckResult(duplicates=[(b"v3", [Position("drill", 0, 3), Position("drill", 1, 7)])])
    checks = divergence_checks(duplicate, set(), {}, rpo_reported=0)
    assert not checks["no acknowledged write moved, duplicated or overwritten on west"]
    report = DrillReport("d", checks=checks)
    assert not report.passed and "[FAILED] no acknowledged write moved" in report.render()
    assert not DrillReport("d").passed  # no check run is no verdict
