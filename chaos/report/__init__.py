"""The chaos run's report: ``DIR/report.html``, one self-contained page people read after a run.

:func:`render` reads ``DIR/results.json`` (the runner's verdicts, format 1: see
:mod:`chaos.report._results`) and each scenario's history (:func:`chaos.history.load`), and
writes ``DIR/report.html``: the verdict and the command to replay at the top, a table of
scenarios by checkers, and per scenario its plots (acknowledged sends per second,
acknowledged latency, mirror lag, each with the faults shaded) and every anomaly. It opens
offline: inline CSS and SVG, no script, no network (:mod:`chaos.report._page`).

The numbers behind the plots are pure functions of a history in :mod:`chaos.report.series`
(``throughput``, ``latencies``, ``nemesis_intervals``, ``lag_samples``, ...), so a runner can
print them too: ``series.summarize(history).line()``.
"""

from . import _series as series
from ._page import render as render
from ._results import ReportError as ReportError

__all__ = ["ReportError", "render", "series"]
