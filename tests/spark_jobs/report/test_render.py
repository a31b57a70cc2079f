"""spark_jobs.report: summary.json -> one self-contained report.html (no browser, no Spark)."""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import re
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import spark_jobs.report
from spark_jobs.report import (
    ReportError,
    SummaryFormatError,
    SummaryNotFoundError,
    render,
    render_summary,
)
from tests.spark_jobs.report import summaries
from tests.spark_jobs.report.summaries import HOSTILE

pytestmark = pytest.mark.unit

# Every element the report itself writes; a value that became markup would add another.
OWN_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "section", "h1", "h2", "p", "div", "span",
    "b", "code", "dl", "dt", "dd", "table", "thead", "tbody", "tr", "th", "td", "wbr", "details", "summary", "ul",
    "li", "svg", "g", "rect", "line", "text", "tspan",
}  # fmt: skip


class Page(HTMLParser):
    """The parts of a report the tests look at, read from its markup."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: set[str] = set()
        self.ids: dict[str, dict[str, str | None]] = {}
        self.partitions: list[dict[str, str | None]] = []
        self.bars: dict[str, int] = {}
        self.samples: list[str | None] = []
        self.cuts: list[str | None] = []
        self.styles: list[str] = []
        self.text: list[str] = []
        self.metas: list[dict[str, str | None]] = []
        self._in_style = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        self.attributes |= set(a)
        self._in_style = tag == "style"
        if "id" in a:
            self.ids[str(a["id"])] = a
        if tag == "meta":
            self.metas.append(a)
        if tag == "tr" and "partition" in (a.get("class") or "").split():
            self.partitions.append(a)
        if tag == "tr" and a.get("class") == "sample":
            self.samples.append(a.get("data-kind"))
        if tag == "g" and a.get("class") == "bar":
            self.bars[str(a["data-kind"])] = int(str(a["data-count"]))
        if "data-cut" in a:
            self.cuts.append(a["data-cut"])

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)
        else:
            self.text.append(data)

    @property
    def words(self) -> str:
        return " ".join(" ".join(self.text).split())


def write(directory: Path, summary: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(summary))
    return directory


def test_render_writes_report_html_beside_the_summary_and_returns_its_path(tmp_path: Path) -> None:
    out = write(tmp_path / "out", summaries.found())
    report = render(out)
    assert report == out / "report.html"
    assert report.read_text(encoding="utf-8") == render_summary(summaries.found())
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "summary.json"]  # no partial file left


def test_a_clean_summary_says_so_plainly(tmp_path: Path) -> None:
    html = render_summary(summaries.clean())
    page = Page(html)
    assert page.ids["verdict"]["class"] == "clean"
    assert 'data-verdict="clean"' in html and "<title>strait audit reconcile: CLEAN</title>" in html
    assert "✓ CLEAN" in page.words
    assert "Nothing found: no discrepancies and no invalid rows across 6 partitions." in page.words
    assert "No discrepancies were found." in page.words
    assert "No invalid rows" in page.words
    assert "6 partitions, none with discrepancies" in page.words
    assert page.bars == {} and page.samples == [] and page.cuts == []
    assert html.count('<svg class="strip"') == 6
    assert [(p["data-topic"], p["data-partition"]) for p in page.partitions] == [("orders", str(n)) for n in range(6)]
    assert "FOUND" not in html


def test_a_found_summary_shows_the_verdict_kinds_partitions_strips_and_samples() -> None:
    summary = summaries.found()
    html = render_summary(summary)
    page = Page(html)
    assert page.ids["verdict"]["class"] == "found"
    assert "✗ FOUND 1,254 discrepancies 3 invalid rows" in page.words
    assert "Found 1,254 discrepancies in 3 of 7 partitions and 3 invalid rows" in page.words
    assert "<title>strait audit reconcile: FOUND 1,254 discrepancies, 3 invalid rows</title>" in html
    assert page.ids["command"] is not None and summaries.COMMAND in page.words
    for fact in ("2026-11-26 03:40:00 UTC", "41.7 s", "Spark master local[*]", "Spark version 4.3.0"):
        assert fact in page.words
    assert "west (127.0.0.1:9092)" in page.words
    assert page.bars == {"missing": 1_250, "different": 3, "extra": 1}  # most first
    assert list(page.bars) == ["missing", "different", "extra"]
    # Partitions: the most discrepancies first, then by topic and partition.
    rows = [(p["data-topic"], p["data-partition"], p["data-discrepancies"]) for p in page.partitions]
    assert rows == [
        ("orders", "2", "1250"), ("orders", "0", "3"), ("orders", "5", "1"), ("orders", "1", "0"),
        ("orders", "3", "0"), ("orders", "4", "0"), ("payments", "0", "0"),
    ]  # fmt: skip
    assert "[0, 18,000)" in page.words and "[0, 16,750)" in page.words
    strips = re.findall(r'<svg class="strip".*?</svg>', html)
    assert len(strips) == 7
    assert [strip.count('<line class="tick') for strip in strips] == [25, 3, 1, 0, 0, 0, 0]
    assert "unknown" in strips[-1]  # payments-0's target range is not known
    assert page.samples == ["missing"] * 25 + ["different"] * 3 + ["extra"]
    assert "29 samples of 1,254 discrepancies" in page.words and page.cuts == ["samples"]
    assert "CRC mismatch" in page.words and "torn tail (12 of 61 bytes)" in page.words
    assert "Offsets below the other side's log start are not counted as missing" in page.words


def test_a_summary_with_only_the_required_fields_renders_and_says_what_it_lacks() -> None:
    html = render_summary({"format": 1, "job": "replicas", "verdict": "clean", "discrepancies": {"total": 0}})
    page = Page(html)
    assert page.ids["verdict"]["class"] == "clean"
    assert "The summary lists no partitions." in page.words
    assert "This job records no samples." in page.words
    assert "(the job recorded no command)" in page.words and "The job recorded no inputs." in page.words
    assert "<svg" not in html


def test_partitions_without_ranges_or_samples_and_without_optional_fields() -> None:
    summary = summaries.found()
    for partition in summary["partitions"]:
        del partition["ranges"], partition["counts"]
    del summary["samples"], summary["notes"], summary["started"], summary["seconds"], summary["spark"]
    del summary["totals"], summary["inputs"]
    html = render_summary(summary)
    page = Page(html)
    assert len(page.partitions) == 7 and '<svg class="strip"' not in html
    assert html.count("no ranges") == 7
    assert "This job records no samples." in page.words and page.samples == []
    assert page.bars == {"missing": 1_250, "different": 3, "extra": 1}
    assert "started" not in page.words and "Spark" not in page.words


def test_invalid_rows_alone_make_a_found_verdict() -> None:
    summary = summaries.clean(2)
    summary.update(verdict="found", invalid={"rows": 4, "by_error": {"decompression failed (zstd)": 4}})
    page = Page(render_summary(summary))
    assert page.ids["verdict"]["class"] == "found"
    assert "Found 4 invalid rows (batches that could not be read)." in page.words
    assert "No discrepancies were found." in page.words and "decompression failed (zstd)" in page.words


def test_thousands_of_partitions_keep_the_page_usable_strips_capped_at_200() -> None:
    summary = summaries.huge(partitions=3_000, found_in=2_000, samples=250)
    started = time.perf_counter()
    html = render_summary(summary)
    took = time.perf_counter() - started
    page = Page(html)
    assert len(page.partitions) == 3_000
    assert html.count('<svg class="strip"') == 200
    # The 200 with strips are the 200 with the most discrepancies, and the table lists those first.
    counts = [int(str(p["data-discrepancies"])) for p in page.partitions]
    assert counts == sorted(counts, reverse=True)
    assert min(counts[:200]) >= max(counts[200:])
    assert "strips" in page.cuts and "samples" in page.cuts
    assert "Strips are drawn for the 200 partitions with the most discrepancies; the other 2,800" in page.words
    assert "The other 2,800 partitions (1,800 with discrepancies)" in page.words
    assert len(page.samples) == 100 and "Showing the first 100 of 250 samples." in page.words
    assert page.tags.count("details") == 1
    assert len(html) < 4_000_000 and took < 10, (len(html), took)


def test_every_text_from_the_summary_is_escaped() -> None:
    html = render_summary(summaries.hostile())
    page = Page(html)
    assert set(page.tags) <= OWN_TAGS, set(page.tags) - OWN_TAGS
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "src" not in page.attributes and not any(a.startswith("on") for a in page.attributes)
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u2028\u2029]", html)  # shown as \xNN instead
    escaped = "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"
    assert escaped in html
    shown = "</script><script>alert(1)</script><img src=x onerror=alert(2)>\"'&\\x00\\x1b\\x2028"
    text = "".join(page.text)
    assert text.count(shown) > 50  # job, command, inputs, kinds, topics, samples, errors, notes
    assert page.ids["verdict"]["class"] == "found"
    assert page.bars[HOSTILE.replace("\x00", "\\x00").replace("\x1b", "\\x1b").replace("\u2028", "\\x2028")] == 1250
    # A 3,000-character value is cut, saying by how much.
    assert any(cut is not None and cut.isdigit() for cut in page.cuts)
    assert "more characters" in page.words


def test_the_page_is_self_contained_and_its_csp_refuses_scripts_and_allows_only_its_style_block() -> None:
    for summary in (summaries.clean(), summaries.found(), summaries.hostile(), summaries.huge(300, 250, 120)):
        html = render_summary(summary)
        page = Page(html)
        assert "<script" not in html.lower()
        assert "style=" not in html.lower() and "style" not in page.attributes
        assert page.tags.count("style") == 1 and len(page.styles) == 1
        (policy,) = [m["content"] for m in page.metas if m.get("http-equiv") == "Content-Security-Policy"]
        assert policy is not None
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        digest = base64.b64encode(hashlib.sha256(page.styles[0].encode()).digest()).decode()
        assert directives == {
            "default-src": "'none'",
            "style-src": f"'sha256-{digest}'",
            "script-src": "'none'",
            "img-src": "'none'",
            "form-action": "'none'",
            "base-uri": "'none'",
        }
        assert "href" not in page.attributes and "url(" not in html and "@import" not in html
        assert set(re.findall(r"https?://[^\s\"')]+", html)) <= {"http://www.w3.org/2000/svg"}  # never fetched


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s.update(format=2), "format"),
        (lambda s: s.pop("job"), "job"),
        (lambda s: s.update(verdict="maybe"), "verdict"),
        (lambda s: s.update(verdict="clean"), "verdict"),  # 1,254 discrepancies cannot be clean
        (lambda s: s.pop("discrepancies"), "discrepancies"),
        (lambda s: s["discrepancies"].update(total=-1), "discrepancies.total"),
        (lambda s: s["discrepancies"]["by_kind"].update(missing="many"), "discrepancies.by_kind.missing"),
        (lambda s: s["totals"].update(compared="lots"), "totals.compared"),
        (lambda s: s["partitions"][3].update(partition="3"), "partitions[3].partition"),
        (lambda s: s["partitions"][1].pop("topic"), "partitions[1].topic"),
        (lambda s: s["partitions"][0]["ranges"].update(source=[5, 3]), "partitions[0].ranges.source"),
        (lambda s: s["partitions"][0]["ranges"].update(target=[1]), "partitions[0].ranges.target"),
        (lambda s: s["partitions"][0]["counts"].update(source_records=True), "partitions[0].counts.source_records"),
        (lambda s: s["samples"][4].update(offset=-1), "samples[4].offset"),
        (lambda s: s.update(samples={"kind": "missing"}), "samples"),
        (lambda s: s["invalid"].update(rows="3"), "invalid.rows"),
        (lambda s: s.update(notes=[1]), "notes[0]"),
        (lambda s: s.update(spark={"master": 4}), "spark.master"),
    ],
)
def test_a_malformed_summary_is_a_value_error_naming_the_file_and_the_field(
    tmp_path: Path, change: Any, field: str
) -> None:
    summary = summaries.found()
    change(summary)
    out = write(tmp_path, summary)
    with pytest.raises(SummaryFormatError) as caught:
        render(out)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, ReportError)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{out / 'summary.json'}: {field}: ")
    assert not (out / "report.html").exists()
    with pytest.raises(SummaryFormatError, match=re.escape(f"summary.json: {field}: ")):
        render_summary(summary)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"format": 1, "job": ', "not JSON: Expecting value at line 1 column 22"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b"[]", "must be a JSON object"),
    ],
)
def test_a_summary_that_is_not_a_json_object_is_a_value_error_naming_the_file(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    (tmp_path / "summary.json").write_bytes(content)
    with pytest.raises(SummaryFormatError, match=re.escape(problem)) as caught:
        render(tmp_path)
    assert str(caught.value).startswith(str(tmp_path / "summary.json"))


def test_a_missing_summary_is_a_file_not_found_error_naming_the_file(tmp_path: Path) -> None:
    for directory in (tmp_path, tmp_path / "never-made"):
        with pytest.raises(SummaryNotFoundError) as caught:
            render(directory)
        assert isinstance(caught.value, FileNotFoundError) and isinstance(caught.value, ReportError)
        assert caught.value.filename == str(directory / "summary.json")
        assert str(caught.value).startswith(f"{directory / 'summary.json'} does not exist")
    assert list(tmp_path.iterdir()) == []


def test_the_report_imports_only_the_standard_library() -> None:
    """So a report can be re-rendered where there is no Spark, no Java, no strait but this package."""
    package = Path(spark_jobs.report.__file__).parent
    imported = set()
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(str(node.module).split(".")[0])
    assert imported and imported <= sys.stdlib_module_names, imported - sys.stdlib_module_names
