"""A measured interval's wait profile (refbench.engines.waits) in a DBA's words: what held the sessions, grouped by
what it means for the stack (storage flush latency, storage read latency, row locks, CPU…), with the I/O latency the
database timed beside it."""

from __future__ import annotations

from typing import Any

from refbench.engines.waits import by_meaning, meaning
from refbench.report.html import fmt
from refbench.suites import Chart, Table

PHRASES = {
    "flush": "storage flush latency", "read": "storage read latency", "write": "storage write latency",
    "locks": "row locks", "contention": "internal contention", "cpu": "CPU", "client": "the client (driver)",
    "io": "other I/O", "ipc": "waiting on other server processes", "other": "other waits",
}
SHOWN_EVENTS = 3  # per meaning, in the bottleneck line


def explain(waits: dict[str, Any] | None, io: dict[str, Any] | None, device: str | None) -> str | None:
    """The bottleneck in the database's words: "storage flush latency: 40% of session time waiting (IO:WALSync 30%,
    LWLock:WALWrite 9%), 0.26 ms per WAL flush on vda (1,730 a second); then CPU 52% (…)". None without samples."""
    if not waits or not waits.get("session_samples"):
        return None
    groups = by_meaning(waits)
    top, share, events = groups[0]
    on = f" on {device}" if device else ""
    if top == "cpu":
        text = f"CPU: {share:.0f}% of session time running (not waiting)"
    else:
        named = ", ".join(f"{e['class']}:{e['event']} {e['share_pct']:.0f}%" for e in events[:SHOWN_EVENTS])
        text = f"{PHRASES[top]}: {share:.0f}% of session time waiting ({named})"
        io = io or {}
        if top == "flush" and io.get("ms_per_flush") is not None:
            text += f", {fmt(io['ms_per_flush'])} ms per WAL flush{on} ({fmt(io['flushes_per_s'])} a second)"
        elif top == "read" and io.get("ms_per_read") is not None:
            text += f", {fmt(io['ms_per_read'])} ms per block read{on}"
    if len(groups) > 1:
        text += f"; then {PHRASES[groups[1][0]]} {groups[1][1]:.0f}%"
    return text + f" ({waits['avg_active_sessions']:.3g} active sessions on average, {waits['samples']:,} samples)"


def tables(records: list) -> list[Table]:
    """The suite's wait profile and timed I/O, when its records have them."""
    out = []
    if rows := top_rows(records):
        out.append(Table("waits", "What the sessions waited on", rows, note=(
            "Active sessions sampled about ten times a second from the server's own view of them (PostgreSQL's "
            "pg_stat_activity; MariaDB's performance_schema and InnoDB's transactions): "
            "each sampled session waiting on an event, or running (CPU). Share: of all sampled session time in the "
            "measured interval; a case's shares add up to 100%. The top five per case; every event is in the record.")))
    if rows := latency_rows(records):
        out.append(Table("io_latency", "I/O as the database timed it", rows, note=(
            "Block reads: those the server asked of the OS (its page cache or the device), timed with "
            "track_io_timing; InnoDB's data-file reads as performance_schema times them. Log flushes: PostgreSQL's WAL "
            "fsync/fdatasync (pg_stat_wal, track_wal_io_timing); InnoDB's redo log writes, counted only. The device's "
            "own IOPS, await (ms per request, queueing included) and average queue beside them, from /proc/diskstats "
            "over the same interval, whoever issued the requests.")))
    return out


def top_rows(records: list) -> list[dict[str, Any]]:
    """The report's table: per case the top waits with their share and what they mean."""
    rows = []
    for r in records:
        waits = (r.extra.get("storage") or {}).get("waits")
        if not waits or not waits.get("session_samples"):
            continue
        for e in waits["events"][:5]:
            rows.append({"case": r.case_id, "wait": f"{e['class']}:{e['event']}" if e["class"] != "CPU" else "CPU (running)",
                         "means": PHRASES[meaning(e["class"], e["event"])], "share of session time %": e["share_pct"],
                         "active sessions": waits["avg_active_sessions"]})
    return rows


def latency_rows(records: list) -> list[dict[str, Any]]:
    """Per case the I/O as the database timed it, beside the device's own figures."""
    rows = []
    for r in records:
        storage = r.extra.get("storage") or {}
        io = storage.get("io_latency")
        if not io:
            continue
        rows.append({"case": r.case_id, "block reads": io.get("reads"), "ms per read": io.get("ms_per_read"),
                     "WAL flushes": io.get("flushes"), "flushes per s": io.get("flushes_per_s"),
                     "ms per flush": io.get("ms_per_flush"), "device": storage.get("device"),
                     "device read IOPS": storage.get("device_r_iops"), "device read await ms": storage.get("device_r_await_ms"),
                     "device write IOPS": storage.get("device_w_iops"), "device write await ms": storage.get("device_w_await_ms"),
                     "device queue": storage.get("device_avg_queue")})
    return rows


def profile_chart(record) -> Chart | None:
    """The profile over the case's seconds: average active sessions per class, stacked as ASH views draw them."""
    waits = (record.extra.get("storage") or {}).get("waits") or {}
    seconds = waits.get("per_second") or []
    if len(seconds) < 3:
        return None
    classes = list(dict.fromkeys(k for s in seconds for k in s if k != "second"))
    series = {kind: [(s["second"], s.get(kind, 0.0)) for s in seconds] for kind in classes}
    return Chart(f"waits_{record.case_id}", f"{record.case_id}: active sessions by wait class", "seconds into the measurement",
                 "average active sessions", series, kind="area")
