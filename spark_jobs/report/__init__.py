"""The audit jobs' report: ``DIR/summary.json`` -> ``DIR/report.html``, one self-contained page.

:func:`render` reads a job's ``summary.json`` (format 1, :mod:`spark_jobs.report._summary`)
and writes ``report.html`` beside it (:mod:`spark_jobs.report._page`): the verdict, the
command, the totals, discrepancies by kind, every partition with its log ranges drawn as a
strip, invalid rows, the sample discrepancies and the notes. Inline CSS and SVG only: no
script, no network, a Content-Security-Policy that says so.

Only the standard library: a report can be re-rendered from a summary on a machine without
Spark or Java. A missing summary raises :class:`SummaryNotFoundError` (a FileNotFoundError), a
malformed one :class:`SummaryFormatError` (a ValueError) naming the file and the field.
"""

from ._page import render as render
from ._page import render_summary as render_summary
from ._summary import ReportError as ReportError
from ._summary import SummaryFormatError as SummaryFormatError
from ._summary import SummaryNotFoundError as SummaryNotFoundError

__all__ = ["ReportError", "SummaryFormatError", "SummaryNotFoundError", "render", "render_summary"]
