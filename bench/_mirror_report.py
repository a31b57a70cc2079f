"""The mirror benchmark's goals, summaries, tables and report (``bench/results/mirror-<date>.md`` and ``.json``)."""

from __future__ import annotations

import datetime
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import confluent_kafka

from ._clients import VALUE_BYTES
from ._mirror_lag import DRAIN_LIMIT_S, GROWTH_LIMIT_MS, OBSERVE_TIMEOUT_S, SAMPLES_PER_S
from ._mirror_topology import PARTITIONS, PROPERTIES, WEST_POLL_S
from ._mirror_types import Fill, LagRun, ProcessProfile, Results, Settings
from ._procs import StraitSite
from ._profile import functions_table, main_thread_text, py_spy_version
from ._report import (
    MB,
    PERCENTILES,
    command_line,
    dist_version,
    git_commit,
    git_dirty,
    machine_info,
    markdown_table,
    print_table,
    report_head,
    report_sections,
    result_stem,
    run_fields,
    settings_json,
    site_machine_lines,
    verdict_style,
    verdict_word,
    wide_console,
    write_json,
    write_markdown,
)

GOAL_KEEP_UP_FRACTION = 0.8  # the mirror keeps up with a producer at this fraction of the site's max
GOAL_P99_FRACTION = 0.5
GOAL_P99_MS = 1000.0  # lag p99 at GOAL_P99_FRACTION, below
GOAL_WAN_CATCH_UP = 0.9  # catch-up records/s with the WAN's RTT / the same at 0 ms, at least (issue 19)
GOAL_WAN_P99_MS = 250.0  # lag p99 at GOAL_KEEP_UP_FRACTION with the WAN's RTT, below (issue 19)
ROLES = ("east", "west", "mirror", "proxy", "bench", "others")


@dataclass(frozen=True)
class Verdict:
    what: str
    figures: str
    met: bool | None  # None: not tested (east did not take the rate the goal is about)

    def line(self) -> str:
        return f"{self.what} {verdict_word(self.met)}: {self.figures}"


def _rate_verdict(runs: list[LagRun], passed: bool) -> bool | None:
    """A lag goal's verdict: failed when it failed, met when met and every run had its rate, else not tested."""
    if not passed:
        return False
    return True if all(r.on_rate for r in runs) else None


def _under_rate(runs: list[LagRun]) -> str:
    short = [r for r in runs if not r.on_rate]
    if not short:
        return ""
    return (
        "; east took only "
        + ", ".join(f"{r.sent_rate:,.0f} of {r.target_rate:,.0f} rec/s (run {r.run + 1})" for r in short)
        + " (the machine's CPU): those runs test a lower rate"
    )


def _runs_at(results: Results, fraction: float) -> list[LagRun]:
    return [r for r in results.lags if abs(r.fraction - fraction) < 1e-9]


def wan_rtt_ms(results: Results) -> int:
    """The WAN's RTT of the run (the lag runs' latency): the largest of its catch-up copies'."""
    return max((f.wan_rtt_ms for f in results.fills), default=0)


def verdicts(results: Results) -> list[Verdict]:
    """The mirror issue's two goals and the throughput ratio the first one implies; the WAN issue's
    two goals (catch-up at the WAN's RTT vs 0 ms; lag p99 at 80 %)."""
    out = []
    rtt = wan_rtt_ms(results)
    at_keep_up = _runs_at(results, GOAL_KEEP_UP_FRACTION)
    if at_keep_up:
        kept = sum(r.kept_up for r in at_keep_up)
        per_run = "; ".join(
            f"run {r.run + 1}: growth {r.figures.growth_ms:.0f} ms, drain {drain_text(r.drain_s)}" for r in at_keep_up
        )
        out.append(
            Verdict(
                f"keeps up at {GOAL_KEEP_UP_FRACTION:.0%} of the site's max (every run)",
                f"kept up in {kept} of {len(at_keep_up)} runs ({per_run}){_under_rate(at_keep_up)}",
                _rate_verdict(at_keep_up, kept == len(at_keep_up)),
            )
        )
    at_p99 = _runs_at(results, GOAL_P99_FRACTION)
    if at_p99:
        p99 = statistics.median(r.figures.lag_ms["p99"] for r in at_p99)
        per_run = ", ".join(f"{r.figures.lag_ms['p99']:.0f}" for r in at_p99)
        out.append(
            Verdict(
                f"lag p99 < {GOAL_P99_MS:.0f} ms at {GOAL_P99_FRACTION:.0%} of the site's max (median of runs)",
                f"{p99:.0f} ms (per run {per_run} ms){_under_rate(at_p99)}",
                _rate_verdict(at_p99, p99 < GOAL_P99_MS),
            )
        )
    wan_fills = results.fills_at(rtt)
    if wan_fills:
        ratio = statistics.median(f.ratio for f in wan_fills)
        per_run = ", ".join(f"{f.ratio:.2f}" for f in wan_fills)
        out.append(
            Verdict(
                f"mirror/site records/s >= {GOAL_KEEP_UP_FRACTION} (implied by keeping up at "
                f"{GOAL_KEEP_UP_FRACTION:.0%}; {rtt} ms RTT, median of runs)",
                f"{ratio:.2f} (per run {per_run})",
                ratio >= GOAL_KEEP_UP_FRACTION,
            )
        )
    ratios = results.catch_up_ratios(rtt) if rtt > 0 else []
    if ratios:
        ratio = statistics.median(r for _, r in ratios)
        per_run = ", ".join(f"{r:.2f}" for _, r in ratios)
        out.append(
            Verdict(
                f"catch-up records/s with {rtt} ms RTT >= {GOAL_WAN_CATCH_UP} x the same at 0 ms "
                "(same run, median of runs)",
                f"{ratio:.2f} (per run {per_run})",
                ratio >= GOAL_WAN_CATCH_UP,
            )
        )
    if at_keep_up and rtt > 0:
        p50 = statistics.median(r.figures.lag_ms["p50"] for r in at_keep_up)
        p99 = statistics.median(r.figures.lag_ms["p99"] for r in at_keep_up)
        per_run = ", ".join(f"{r.figures.lag_ms['p99']:.0f}" for r in at_keep_up)
        out.append(
            Verdict(
                f"lag p99 < {GOAL_WAN_P99_MS:.0f} ms at {GOAL_KEEP_UP_FRACTION:.0%} of the site's max with "
                f"{rtt} ms RTT (median of runs)",
                f"p99 {p99:.0f} ms, p50 {p50:.0f} ms (per run p99 {per_run} ms){_under_rate(at_keep_up)}",
                _rate_verdict(at_keep_up, p99 < GOAL_WAN_P99_MS),
            )
        )
    return out


def goals_missed(results: Results) -> bool:
    """True unless every goal was met (a goal not tested counts as missed)."""
    return not all(v.met is True for v in verdicts(results))


def drain_text(seconds: float | None) -> str:
    return "not within the timeout" if seconds is None else f"{seconds * 1e3:,.0f} ms"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if value == float("inf") else f"{value:,.0f}"


def _cores(used: dict[str, float]) -> str:
    return " / ".join(f"{used.get(role, 0.0):.2f}" for role in ROLES)


# -- tables --------------------------------------------------------------------------------


def throughput_table(results: Results) -> tuple[list[str], list[list[str]]]:
    headers = [
        "run",
        "WAN RTT ms",
        "site rec/s",
        "site MB/s",
        "mirror rec/s",
        "mirror MB/s",
        "mirror / site",
        "first record ms",
        "mirror CPU us/rec",
        "reconnects",
        "west appends: mean ms, > 100 ms",
        "cores while producing: " + " / ".join(ROLES),
        "cores while copying: " + " / ".join(ROLES),
    ]
    rows = []
    for f in results.fills:
        rows.append(
            [
                str(f.run + 1),
                str(f.wan_rtt_ms),
                f"{f.site_rate:,.0f}",
                f"{f.site_rate * VALUE_BYTES / MB:.1f}",
                f"{f.mirror_rate:,.0f}",
                f"{f.mirror_rate * VALUE_BYTES / MB:.1f}",
                f"{f.ratio:.2f}",
                f"{f.first_record_s * 1e3:,.0f}",
                f"{f.mirror_cpu_s / f.records * 1e6:.2f}",
                str(f.mirror_errors),
                f"{f.appends.count:,}: {f.appends.mean_ms:.1f}, {f.appends.over_100ms}",
                _cores(f.site_cores),
                _cores(f.mirror_cores),
            ]
        )
    for rtt in sorted({f.wan_rtt_ms for f in results.fills}):
        fills = results.fills_at(rtt)
        if len(fills) < 2:
            continue
        site = statistics.median(f.site_rate for f in fills)
        mirror = statistics.median(f.mirror_rate for f in fills)
        rows.append(
            [
                "median",
                str(rtt),
                f"{site:,.0f}",
                f"{site * VALUE_BYTES / MB:.1f}",
                f"{mirror:,.0f}",
                f"{mirror * VALUE_BYTES / MB:.1f}",
                f"{statistics.median(f.ratio for f in fills):.2f}",
                f"{statistics.median(f.first_record_s for f in fills) * 1e3:,.0f}",
                f"{statistics.median(f.mirror_cpu_s / f.records * 1e6 for f in fills):.2f}",
                "",
                "",
                "",
                "",
            ]
        )
    return headers, rows


def _lag_row(label: str, runs: list[LagRun]) -> list[str]:
    def med(get: Any) -> float:
        return float(statistics.median(get(r) for r in runs))

    drains = [r.drain_s for r in runs]
    drain = None if any(d is None for d in drains) else statistics.median(d for d in drains if d is not None)
    hist = {
        q: (None if any(r.mirror_latency_ms[q] is None for r in runs) else med(lambda r, q=q: r.mirror_latency_ms[q]))
        for q in ("p50", "p99")
    }
    return [
        label,
        f"{med(lambda r: r.target_rate):,.0f}",
        f"{med(lambda r: r.sent_rate):,.0f}",
        f"{med(lambda r: r.figures.visible_rate):,.0f}",
        *(_ms(med(lambda r, n=name: r.figures.lag_ms[n])) for name, _ in PERCENTILES),
        _ms(med(lambda r: r.figures.growth_ms)),
        _ms(None if drain is None else drain * 1e3),
        f"{sum(r.kept_up for r in runs)}/{len(runs)}",
        _ms(med(lambda r: r.figures.produce_ms["p99"])),
        f"{_ms(hist['p50'])} / {_ms(hist['p99'])}",
        f"{med(lambda r: r.appends.mean_ms):.1f} / {sum(r.appends.over_100ms for r in runs)} / "
        f"{sum(r.appends.over_500ms for r in runs)}",
        str(sum(r.mirror_errors for r in runs)),
        _cores({role: med(lambda r, k=role: r.cores.get(k, 0.0)) for role in ROLES}),
    ]


def lag_table(results: Results) -> tuple[list[str], list[list[str]]]:
    headers = [
        "rate (run)",
        "target rec/s",
        "sent rec/s",
        "readable on west rec/s",
        *(f"lag {name} ms" for name, _ in PERCENTILES),
        "growth ms",
        "drain ms",
        "kept up",
        "produce p99 ms",
        "mirror histogram p50 / p99 ms",
        "west appends: mean ms / > 100 ms / > 500 ms",
        "reconnects",
        "cores: " + " / ".join(ROLES),
    ]
    rows = []
    for fraction in sorted({r.fraction for r in results.lags}):
        runs = _runs_at(results, fraction)
        if len(runs) > 1:
            rows.append(_lag_row(f"**{fraction:.0%}** (median of {len(runs)})", runs))
        for r in runs:
            rows.append(_lag_row(f"{fraction:.0%} (run {r.run + 1})", [r]))
    return headers, rows


def profile_overview(profiles: list[ProcessProfile]) -> tuple[list[str], list[list[str]]]:
    headers = ["phase", "process", "CPU %", "samples", "main thread idle %", "other threads %", "busy: top places"]
    rows = [
        [
            p.phase,
            p.process,
            f"{p.cpu_pct:.0f}",
            str(p.samples),
            f"{p.idle_pct:.0f}",
            f"{p.other_busy_pct:.0f}",
            ", ".join(f"{x['where']} {x['self_pct']:.0f}" for x in p.places[:6]),
        ]
        for p in profiles
    ]
    return headers, rows


def print_tables(settings: Settings, results: Results) -> None:
    console = wide_console(200)
    tables = [
        (f"Site vs mirror throughput, {settings.records:,} records of {VALUE_BYTES} B", throughput_table(results)),
        (f"Lag, {settings.lag_seconds:g} s paced runs (ack on east -> readable on west)", lag_table(results)),
    ]
    if results.profiles:
        tables.append(("py-spy on the mirror and proxy processes (extra runs)", profile_overview(results.profiles)))
    for title, (headers, rows) in tables:
        plain = [[cell.replace("**", "") for cell in row] for row in rows]  # Markdown bold is for the report
        print_table(console, title, headers, plain, lambda i, h: i == 0 or h.startswith(("cores", "busy", "phase")))
    for v in verdicts(results):
        console.print(v.line(), style=verdict_style(v.met))


# -- report --------------------------------------------------------------------------------


def machine(settings: Settings, workdir: Path, site: StraitSite) -> dict[str, Any]:
    """The machine (CPU, cores, RAM, kernel, filesystem of the data dir) and the software versions."""
    return machine_info(workdir) | {
        "software": {
            "confluent_kafka": dist_version("confluent-kafka"),
            "librdkafka": confluent_kafka.libversion()[0],
            "toxiproxy_python": dist_version("toxiproxy-python"),
            "strait_version": site.version(),
            "py_spy": py_spy_version() or "unknown",
            "git_commit": git_commit(),
            "git_dirty": git_dirty(),
        }
    }


def _others(results: Results) -> float:
    """Median cores used by processes that are not the benchmark's, over every timed span."""
    spans = [f.site_cores for f in results.fills] + [f.mirror_cores for f in results.fills]
    spans += [r.cores for r in results.lags]
    return statistics.median(s.get("others", 0.0) for s in spans) if spans else 0.0


def settings_lines(settings: Settings, results: Results) -> list[str]:
    site_rate = results.site_rate() if results.fills else 0.0
    producer = settings.producer_config("<east>")
    del producer["bootstrap.servers"]
    librdkafka = confluent_kafka.libversion()[0]
    return [
        f"- Sites: `east` and `west`, {settings.nodes} strait nodes each (`strait node start`, two log dirs each "
        "under the data dir), one ZooKeeper (`strait zookeeper start`) with a chroot per site, all on 127.0.0.1; "
        f"node properties `{', '.join(f'{k}={v}' for k, v in PROPERTIES.items())}`. Both sites live for the "
        "whole run; every measurement uses new topics, deleted afterwards",
        f"- Topics: {PARTITIONS} partitions, replication factor 3, `min.insync.replicas=2` (made with CreateTopics "
        "on east; their mirrors are made on west by the link, at west's default replication factor 3)",
        f"- WAN: a fault proxy process (`python -m chaos.proxy`), one proxy per east broker, a `latency` toxic "
        f"of {settings.wan_rtt_ms // 2} +- {settings.wan_jitter_ms // 2} ms on each stream (added with "
        f"toxiproxy-python): {settings.wan_rtt_ms} +- {settings.wan_jitter_ms} ms more per round trip between "
        'the mirror and east. The mirror runs "at west": its connections to west are direct. It learns east\'s '
        "broker addresses from east's Metadata; its process maps each to that broker's proxy (a NAT in effect: "
        "see `bench/_mirror_runner.py`), and every run checks that it opened no connection to east directly",
        "- Mirror: a process of its own per measurement (`python -m bench._mirror_runner`): one "
        "`mirror.LinkRunner` with its defaults (one copier per partition; docs/mirror.md), `sync_interval_s=1`, "
        "selecting only the measurement's topic"
        + (
            "; link settings from `--link`: " + ", ".join(f"`{k}={v}`" for k, v in settings.link_settings.items())
            if settings.link_settings
            else ""
        ),
        f"- Producer (confluent-kafka {dist_version('confluent-kafka')}, librdkafka {librdkafka}), in the "
        f"benchmark process: `{json.dumps(producer)}`; {VALUE_BYTES}-byte values, no key (sticky partitioner)",
        f"- Throughput: {settings.records:,} records produced to east as fast as the producer takes them "
        "(first `produce()` to last delivery report: the *site's* rate) while the mirror is paused, its mirror "
        "topic already made on west; then the mirror is resumed (SIGUSR2) and timed until west's high "
        f"watermarks (ListOffsets every {WEST_POLL_S * 1e3:.0f} ms) equal east's in every partition (the *mirror's* "
        f"rate, all {settings.records:,} + {PARTITIONS} warm-up records); {settings.runs} run(s), each "
        f"copying once with the WAN's {settings.wan_rtt_ms} ms and once with the proxies' latency at 0 (the "
        "same proxies forwarding every byte: the baseline), in an order that alternates from run to run. "
        "*catch-up ratio*: the mirror's rate at the WAN's RTT over its rate at 0 ms in the same run",
        f"- Lag: a producer paced on a 1 ms grid at 50 % and 80 % of the median site rate ({site_rate:,.0f} rec/s) "
        f"for {settings.lag_seconds:g} s on a new topic each run, the mirror copying it; about "
        f"{SAMPLES_PER_S:,} records per second are sampled (their delivery reports: partition, offset, time). A "
        "consumer on west (`assign()` at offset 0, `fetch.wait.max.ms=100`) notes its position per partition "
        f"after every `consume()` (which returns within {OBSERVE_TIMEOUT_S * 1e3:.0f} ms); a sampled record's "
        "lag is from its acknowledgement on east to the first such note past its offset (offsets are "
        "preserved, so partition and offset name the same record on both sites: each run reads 40 sampled "
        "records back from west at their east partition and offset and compares the sequence number every "
        "value starts with). *produce p99* is produce() -> acknowledgement on east",
        f"- Kept up: the lag's median over the last third of the run is less than {GROWTH_LIMIT_MS:.0f} ms above "
        f"its median over the first third, and west holds every record within {DRAIN_LIMIT_S:g} s of the "
        "producer's last acknowledgement (*drain*). *readable on west rec/s*: records west's consumer had "
        "while the producer ran, per second",
        "- *mirror histogram*: the mirror's own replication latency (`status()[\"latency\"]`, from a batch's "
        "producer timestamp to its append on west, bucket upper bounds) over the same span",
        "- *west appends*: west's MirrorAppend requests over the span, from its nodes' `/metrics` "
        '(`strait_request_latency_seconds{api="MirrorAppend"}`): how many (throughput table), their mean time '
        "from reading to answering (which waits, like acks=all, until west's followers have the records), and "
        "how many took over 100 ms (and 500 ms; summed over runs in median rows)",
        "- Cores: user + system CPU seconds per second of the timed span, from /proc: east's and west's nodes, "
        "the mirror process, the proxy process, this benchmark process (producer and consumer), and *others*: "
        "the machine's busy time (/proc/stat) minus all of those (ZooKeeper and anything else running). "
        "*reconnects*: the mirror's copier errors (each ends in a reconnect)",
    ]


def profile_markdown(settings: Settings, results: Results) -> list[str]:
    if not results.profiles:
        return []
    md = [
        "## Profile",
        "",
        "Extra runs (not in the tables above): catch-up copies at 0 ms and at the WAN's RTT and one "
        f"{GOAL_KEEP_UP_FRACTION:.0%} lag run with `py-spy record --pid <pid> --nonblocking --idle --threads "
        f"--full-filenames --rate {settings.profile_rate}` attached to the mirror and proxy processes. Both serve "
        "everything on their main thread (trio): *idle* is its share of samples waiting in epoll; the places "
        "and functions share its busy samples (a C call's time is its Python caller's).",
        "",
        markdown_table(*profile_overview(results.profiles)),
        "",
    ]
    for f in results.profile_fills:
        md.append(
            f"Profiled catch-up copy at {f.wan_rtt_ms} ms: site {f.site_rate:,.0f} rec/s, mirror "
            f"{f.mirror_rate:,.0f} rec/s (ratio {f.ratio:.2f})."
        )
    if results.profile_lag is not None:
        r = results.profile_lag
        md.append(
            f"Profiled {r.fraction:.0%} run: lag p50 {r.figures.lag_ms['p50']:,.0f} ms, p99 "
            f"{r.figures.lag_ms['p99']:,.0f} ms, growth {r.figures.growth_ms:,.0f} ms, drain {drain_text(r.drain_s)}, "
            f"{'kept up' if r.kept_up else 'did not keep up'}."
        )
    md.append("")
    for p in results.profiles:
        md += [
            f"### {p.process}, {p.phase}",
            "",
            main_thread_text(p.samples, p.idle_pct, p.places),
            "",
            markdown_table(*functions_table(p.functions, 15)),
            "",
        ]
    return md


def write_report(
    settings: Settings, results: Results, info: dict[str, Any], started: datetime.datetime, elapsed: float
) -> tuple[Path, Path]:
    """Write ``mirror-<date>.md`` and ``.json`` to ``settings.out``; returns their paths."""
    assert settings.out is not None
    stem = result_stem(settings.out, "mirror", started)
    found = verdicts(results)
    data = run_fields(started, elapsed, command_line("bench.mirror_bench", settings.argv)) | {
        "note": settings.note,
        "settings": settings_json(settings),
        "machine": info,
        "loadavg_start": results.loadavg_start,
        "loadavg_end": results.loadavg_end,
        "others_cores_median": _others(results),
        "verdicts": [asdict(v) for v in found],
        "summary": {
            "throughput": {
                f"{rtt}ms": fill_summary(results.fills_at(rtt)) for rtt in sorted({f.wan_rtt_ms for f in results.fills})
            },
            "catch_up_ratio": catch_up_summary(results),
            "lag": {f"{f:.0%}": lag_summary(_runs_at(results, f)) for f in sorted({r.fraction for r in results.lags})},
        },
        "fills": [f.to_json() for f in results.fills],
        "lags": [r.to_json() for r in results.lags],
        "profile_fills": [f.to_json() for f in results.profile_fills],
        "profile_lag": results.profile_lag.to_json() if results.profile_lag else None,
        "profiles": [asdict(p) for p in results.profiles],
    }
    json_path = stem.with_suffix(".json")
    write_json(json_path, data)
    sw = info["software"]
    dirty = " (with uncommitted changes)" if sw["git_dirty"] else ""
    notes = sorted({n for f in results.fills for n in f.notes} | {n for r in results.lags for n in r.notes})
    load = (
        f"Load average {results.loadavg_start[0]:.2f} when it started and {results.loadavg_end[0]:.2f} when it "
        f"ended; processes other than the benchmark's used a median of {_others(results):.2f} cores during the "
        "timed spans (the *others* column)."
    )
    md = [
        *report_head(
            f"# Mirror benchmark (east -> west over {settings.wan_rtt_ms} ms of WAN latency), "
            f"{started.date().isoformat()}",
            data,
            json_path,
            readme="../README.md#mirror-benchmirror_benchpy",
        ),
        "",
        *([f"**Note:** {settings.note}", ""] if settings.note else []),
        load,
        *report_sections(
            [
                *site_machine_lines(info, more_software=f", toxiproxy-python {sw['toxiproxy_python']}"),
                f"- strait: `{sw['strait_version']}`, commit `{sw['git_commit']}`{dirty}",
            ],
            settings_lines(settings, results),
            [v.line() for v in found],
        ),
        "### Site vs mirror throughput",
        "",
        markdown_table(*throughput_table(results)),
        "",
        "### Lag",
        "",
        markdown_table(*lag_table(results)),
        "",
    ]
    if notes:
        md += ["Notes from the runs:", "", *[f"- {n}" for n in notes], ""]
    md += profile_markdown(settings, results)
    md_path = stem.with_suffix(".md")
    write_markdown(md_path, md)
    return md_path, json_path


def lag_summary(runs: list[LagRun]) -> dict[str, Any]:
    """Medians of a fraction's runs, for the JSON."""
    return {
        "runs": len(runs),
        "lag_ms": {name: statistics.median(r.figures.lag_ms[name] for r in runs) for name, _ in PERCENTILES},
        "kept_up": sum(r.kept_up for r in runs),
    }


def catch_up_summary(results: Results) -> dict[str, Any] | None:
    """The catch-up ratio WAN RTT / 0 ms per run and its median, for the JSON (None without a baseline)."""
    rtt = wan_rtt_ms(results)
    ratios = results.catch_up_ratios(rtt) if rtt > 0 else []
    if not ratios:
        return None
    return {"wan_rtt_ms": rtt, "per_run": dict(ratios), "median": statistics.median(r for _, r in ratios)}


def fill_summary(fills: list[Fill]) -> dict[str, Any]:
    return {
        "site_rate": statistics.median(f.site_rate for f in fills),
        "mirror_rate": statistics.median(f.mirror_rate for f in fills),
        "ratio": statistics.median(f.ratio for f in fills),
    }
