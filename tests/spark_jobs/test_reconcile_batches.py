"""reconcile's batch pass: the span arithmetic (no Spark; the pass itself runs in test_reconcile_sites)."""

from __future__ import annotations

from spark_jobs.jobs._reconcile_batches import clip, extend, fewest, merged
from spark_jobs.jobs._reconcile_compare import Ranges


def test_merged_joins_overlapping_and_touching_spans_only() -> None:
    assert merged([(30, 40), (0, 10), (10, 12), (5, 8), (13, 20)]) == [(0, 12), (13, 20), (30, 40)]
    assert merged([]) == []


def test_fewest_closes_the_smallest_gaps_first() -> None:
    spans = [(0, 10), (12, 20), (100, 110), (111, 120), (500, 510)]
    assert fewest(spans, 5) == spans
    assert fewest(spans, 3) == [(0, 20), (100, 120), (500, 510)]
    assert fewest(spans, 1) == [(0, 510)]


def test_clip_keeps_what_lies_inside_a_sides_log() -> None:
    assert clip([(0, 10), (15, 30), (40, 50)], 5, 20) == [(5, 10), (15, 20)]
    assert clip([(0, 10)], 10, 20) == []


def test_extend_compares_a_partition_by_record_from_a_keyed_discrepancy_to_its_end() -> None:
    ranges = {("t", 0): Ranges((0, 100), (0, 90)), ("t", 1): Ranges((0, 50), (0, 50))}
    slow = {("t", 0): [(10, 20), (60, 70)], ("t", 1): [(5, 6)]}
    assert extend(slow, {("t", 0): 15}, ranges) == {("t", 0): [(10, 100)], ("t", 1): [(5, 6)]}
    assert extend({}, {("t", 1): 40}, ranges) == {("t", 1): [(40, 50)]}
