"""A measured interval's wait profile (refbench.engines.waits) in a DBA's words: what held the sessions, grouped by
what it means for the stack (storage flush latency, storage read latency, row locks, CPU…), with the I/O latency the
database timed beside it."""

from __future__ import annotations

import statistics
from typing import Any

from refbench.engines.waits import limits, meaning
from refbench.host.contention import DISTURBED_CPU_PCT, DISTURBED_DEVICE_PCT
from refbench.formats import fmt
from refbench.suites import Chart, Table

PHRASES = {
    "flush": "storage flush latency", "read": "storage read latency", "write": "storage write latency",
    "locks": "row locks", "contention": "internal contention", "cpu": "CPU", "client": "the client (driver)",
    "io": "other I/O", "ipc": "waiting on other server processes", "other": "other waits",
    "cpuwait": "waiting for CPU", "unseen": "waits the server does not show", "parallel": "its parallel workers",
}
SHOWN_EVENTS = 3  # per meaning, in the bottleneck line
TIMING_ON = {"track_io_timing": "time per block read", "track_wal_io_timing": "time per WAL flush"}


def explain(waits: dict[str, Any] | None, io: dict[str, Any] | None, device: str | None,
            machine: dict[str, Any] | None = None) -> str | None:
    """The bottleneck in the database's words: "storage flush latency: 40% of session time waiting (IO:WALSync 30%,
    LWLock:WALWrite 9%), 0.26 ms per WAL flush on vda (1,730 a second); then CPU 52% (…)". A profile reconciled with
    the server's CPU (refbench.engines.waits.reconcile) can name "waiting for CPU (throttled)": the evidence follows
    from ``machine`` (refbench.host.contention). None without samples."""
    if not waits or not waits.get("session_samples"):
        return None
    groups = limits(waits)
    top, share, events = groups[0]
    on = f" on {device}" if device else ""
    of = waits.get("of", "session time")  # DuckDB's profile shares its query threads' time
    io = io or {}
    if top == "cpu" and events[0]["event"] == "CPU":
        text = f"CPU: {share:.0f}% of {of} running (not waiting)"
    elif top == "cpu":  # the operators that ran, by name (DuckDB's profiler)
        text = f"CPU: {share:.0f}% of {of} in operators ({_named(events, with_class=False)})"
    elif top == "cpuwait":
        text = f"{PHRASES[top]} ({_starved(events, machine or {})}): {share:.0f}% of {of} runnable but not running"
    elif top == "unseen":
        text = (f"{PHRASES[top]}: {share:.0f}% of {of} sampled as running was neither on a CPU nor queued for one "
                f"(the server used {fmt((machine or {}).get('server_cpu_s'))} CPU-s in "
                f"{fmt((machine or {}).get('interval_s'))} s)")
    else:
        text = f"{PHRASES[top]}: {share:.0f}% of {of} {'reading' if 'busy_threads' in waits else 'waiting'} ({_named(events)})"
        if top == "flush" and io.get("ms_per_flush") is not None:
            sampled = "flush_ms_basis" in io  # MariaDB's redo log, timed by sampling (RedoLogWatch)
            text += (f", {'about ' if sampled else ''}{fmt(io['ms_per_flush'])} ms per "
                     f"{'redo log write' if sampled else 'WAL flush'}{on} ({fmt(io['flushes_per_s'])} a second)")
        elif top == "read" and io.get("ms_per_read") is not None:
            text += f", {fmt(io['ms_per_read'])} ms per block read{on}"
        elif top == "locks" and (hot := hot_row(waits, share)):
            text += f"; a hot row: {hot}"
    if len(groups) > 1:
        text += f"; then {PHRASES[groups[1][0]]} {groups[1][1]:.0f}%"
        if groups[1][0] == "locks" and (hot := hot_row(waits, groups[1][1])):
            text += f" (a hot row: {hot})"
    if "busy_threads" in waits:
        text += f" ({waits['busy_threads']:.3g} busy threads on average, {waits['samples']:,} queries)"
    else:
        workers = f", {waits['parallel_worker_pct']:.0f}% of them parallel workers" if waits.get("parallel_worker_pct") else ""
        text += f" ({waits['avg_active_sessions']:.3g} active sessions on average{workers}, {waits['samples']:,} samples)"
    if untimed := [name for name in io.get("untimed", []) if (top, name) in (("flush", "track_wal_io_timing"),
                                                                             ("read", "track_io_timing"))]:
        text += (f"; no {TIMING_ON[untimed[0]]}: the server has {untimed[0]} off (refbench turns it on in a server it "
                 f"manages unless the plan turns it off; on your own server: ALTER SYSTEM SET {untimed[0]} = on, then "
                 "SELECT pg_reload_conf())")
    return text


HOT_ROW_SHARE = 1 / 3  # of the row-lock waits, on one row: sessions queue for it (a lock convoy)


def hot_row(waits: dict[str, Any], locks_pct: float) -> str | None:
    """The row most waited for when it holds a third or more of the row-lock waits: "46% of them on `db`.`warehouse`
    row 1". MariaDB names its rows (InnoDB's locks); PostgreSQL's do not."""
    rows = waits.get("lock_rows") or []
    if not rows or not locks_pct or rows[0]["share_pct"] < HOT_ROW_SHARE * locks_pct:
        return None
    return f"{100 * rows[0]['share_pct'] / locks_pct:.0f}% of them on {rows[0]['row']}"


def _starved(events: list[dict[str, Any]], machine: dict[str, Any]) -> str:
    """Why the server's sessions waited for a CPU, from the interval's split: its quota, or the run queue and who
    else had the CPU."""
    from refbench.engines.waits import QUOTA

    throttled = machine.get("server_throttled") or {}
    if events[0]["event"] == QUOTA and throttled.get("periods"):
        quota = f"a quota of {fmt(throttled['quota_cpus'])} CPUs " if throttled.get("quota_cpus") else "its quota "
        return (f"throttled: {quota}held it back in {throttled['throttled_periods']:,} of {throttled['periods']:,} "
                f"periods, {fmt(throttled['throttled_s'])} s in all")
    said = [f"{fmt(machine['server_runqueue_avg'])} server threads queued on average"] if machine.get("server_runqueue_avg") else []
    if machine.get("others_pct") is not None:
        said.append(f"the server had {machine['server_pct']:.0f}% of the CPU, refbench {machine['own_pct']:.0f}%, "
                    f"other processes {machine['others_pct']:.0f}%")
    return "queued: " + ", ".join(said) if said else "queued"


def _named(events: list[dict[str, Any]], with_class: bool = True) -> str:
    return ", ".join(f"{e['class'] + ':' if with_class else ''}{e['event']} {e['share_pct']:.0f}%" for e in events[:SHOWN_EVENTS])


def tables(records: list) -> list[Table]:
    """The suite's wait profile and timed I/O, when its records have them."""
    out = []
    if rows := top_rows(records):
        out.append(Table("waits", "What the sessions waited on", rows, note=(
            "Active sessions sampled about ten times a second from the server's own view of them (PostgreSQL's "
            "pg_stat_activity; MariaDB's performance_schema and InnoDB's transactions, and for a session committing, "
            "whether a server thread is writing the redo log): each sampled session waiting on an event, or running "
            "(CPU). DuckDB: its profiler's time per operator of every query (CPU:scan, CPU:join…), the block reads it "
            "timed taken out of them (IO:block read); the active sessions are its busy threads. Share: of all "
            "sampled session (or query thread) time in the measured interval; a case's shares add up to 100%. The "
            "top five per case; every event is in the record.")))
    if rows := contention_rows(records):
        out.append(Table("contention", "Who had the machine while each case was measured", rows, note=(
            "The machine's CPU time (all cores) over the measured interval: the database server's process tree, "
            "refbench's own processes (its driver, fio, and a server it manages when the split has no server), other "
            "processes (the kernel's threads and interrupts included) and steal (the hypervisor's), from the "
            "processes' and the machine's CPU ticks. Server run queue: the server's threads runnable but waiting for "
            "a CPU, on average (/proc/PID/task/*/schedstat); throttled: the share of its CPU cgroup's periods its "
            "quota held it back. PSI: the share of the interval some task was stalled on CPU or I/O "
            "(/proc/pressure). Others' reads: the device's read MB/s less the run's own; others' writes: its write "
            "MB/s less what the server's own counters say it wrote (blank where none count it). Disturbed: neighbours took "
            f"more than {DISTURBED_CPU_PCT:g}% of the CPU, or more than {DISTURBED_DEVICE_PCT:g}% of the device's "
            "reads; compare does not call a change between such measurements.")))
    if rows := latency_rows(records):
        out.append(Table("io_latency", "I/O as the database timed it", rows, note=(
            "Block reads: those the server asked of the OS (its page cache or the device), timed with "
            "track_io_timing; InnoDB's data-file reads as performance_schema times them; DuckDB's block reads as its "
            "profiler times them. Log flushes: PostgreSQL's WAL "
            "fsync/fdatasync (pg_stat_wal, track_wal_io_timing); InnoDB's redo log writes (Innodb_log_writes), their time "
            "the share of samples in which a server thread was writing or flushing the log file (its system call, "
            "read from /proc), times the interval, over their count. PostgreSQL's WAL written and its checkpoints "
            "requested by WAL volume (max_wal_size reached; pg_stat_wal, pg_stat_bgwriter). The device's "
            "own IOPS, await (ms per request, queueing included) and average queue beside them, from /proc/diskstats "
            "over the same interval, whoever issued the requests; the server's run queue and other processes' share "
            "of the CPU beside them (a time per flush far above the device's await, with the server's threads "
            "queued, is time waiting for a CPU: the wait profile counts it so).")))
    return out


def top_rows(records: list) -> list[dict[str, Any]]:
    """The report's table: per case the top waits with their share and what they mean."""
    rows = []
    for r in records:
        waits = (r.extra.get("storage") or {}).get("waits")
        if not waits or not waits.get("session_samples"):
            continue
        for e in waits["events"][:5]:
            rows.append({"case": r.case_id, "wait": "CPU (running)" if e["event"] == "CPU" else f"{e['class']}:{e['event']}",
                         "means": PHRASES[meaning(e["class"], e["event"])], "share of session time %": e["share_pct"],
                         "active sessions": waits["avg_active_sessions"]})
    return rows


def contention_rows(records: list) -> list[dict[str, Any]]:
    """Per case the machine's time split (refbench.host.contention): the probe's interval where a database suite
    has one, else the whole case's."""
    rows = []
    for r in records:
        m = (r.extra.get("storage") or {}).get("machine") or r.telemetry.get("machine") or {}
        if m.get("others_pct") is None:
            continue
        throttled = m.get("server_throttled") or {}
        rows.append({"case": r.case_id, "seconds": m["interval_s"], "server CPU %": m.get("server_pct"),
                     "refbench CPU %": m["own_pct"], "others CPU %": m["others_pct"], "steal %": m["steal_pct"],
                     "idle %": m["idle_pct"], "server run queue": m.get("server_runqueue_avg"),
                     "throttled periods %": round(100 * throttled["throttled_periods"] / throttled["periods"], 1)
                     if throttled.get("periods") else None,
                     "PSI cpu %": (m.get("pressure_pct") or {}).get("cpu_some"),
                     "PSI io %": (m.get("pressure_pct") or {}).get("io_some"),
                     "others' reads MB/s": m.get("others_read_mb_s"), "others' writes MB/s": m.get("others_write_mb_s"),
                     "disturbed": r.extra.get("disturbed", "")})
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
                     "ms per flush": io.get("ms_per_flush"), "WAL MB/s": io.get("wal_mb_per_s"),
                     "checkpoints requested": io.get("checkpoints_requested"), "device": storage.get("device"),
                     "device read IOPS": storage.get("device_r_iops"), "device read await ms": storage.get("device_r_await_ms"),
                     "device write IOPS": storage.get("device_w_iops"), "device write await ms": storage.get("device_w_await_ms"),
                     "device queue": storage.get("device_avg_queue"),
                     "server run queue": (storage.get("machine") or {}).get("server_runqueue_avg"),
                     "others CPU %": (storage.get("machine") or {}).get("others_pct")})
    return rows


def profile_chart(record) -> Chart | None:
    """The profile over the case's seconds: average active sessions per class, stacked as ASH views draw them."""
    waits = (record.extra.get("storage") or {}).get("waits") or {}
    seconds = waits.get("per_second") or []
    if len(seconds) < 3:
        return None
    classes = list(dict.fromkeys(k for s in seconds for k in s if k != "second"))
    series = {kind: [(s["second"], s.get(kind, 0.0)) for s in seconds] for kind in classes}
    who = "busy threads" if "busy_threads" in waits else "active sessions"
    return Chart(f"waits_{record.case_id}", f"{record.case_id}: {who} by wait class", "seconds into the measurement",
                 f"average {who}", series, kind="area")


def case_profile(records: list) -> dict[str, Any] | None:
    """A case's profile over its repeats, as a comparison reads it: each meaning's share of session time (the
    repeats' mean, largest first) and the time per WAL flush and per block read the database timed."""
    profiles = [w for r in records if (w := (r.extra.get("storage") or {}).get("waits")) and w.get("session_samples")]
    if not profiles:
        return None
    shares: dict[str, float] = {}
    for waits in profiles:
        for kind, share, _ in limits(waits):
            shares[kind] = shares.get(kind, 0.0) + share / len(profiles)
    io = [(r.extra.get("storage") or {}).get("io_latency") or {} for r in records]

    def mean(key: str) -> float | None:
        values = [i[key] for i in io if i.get(key) is not None]
        return round(statistics.fmean(values), 3) if values else None

    return {"shares": {k: round(v, 2) for k, v in sorted(shares.items(), key=lambda kv: -kv[1])},
            "ms_per_flush": mean("ms_per_flush"), "ms_per_read": mean("ms_per_read"),
            "flush": "redo log write" if any("flush_ms_basis" in i for i in io) else "WAL flush"}


def profile_changes(letters: list[str], groups_of: list[dict[tuple[str, str], list]]) -> list[dict[str, Any]]:
    """How what limits each case changed from the baseline (the first) to each other run: per shared (suite, case)
    with a profile on both sides, the leading wait of each, every meaning's share on both sides with the change in
    percentage points (largest on either side first), and the timed flush and read latencies."""
    base = {key: p for key, records in groups_of[0].items() if (p := case_profile(records))}
    out = []
    for letter, groups in zip(letters[1:], groups_of[1:]):
        for key, a in base.items():
            if key not in groups or not (b := case_profile(groups[key])):
                continue
            kinds = sorted(set(a["shares"]) | set(b["shares"]),
                           key=lambda k: -max(a["shares"].get(k, 0.0), b["shares"].get(k, 0.0)))
            out.append({
                "vs": letter, "suite": key[0], "case": key[1],
                "limit_A": PHRASES[next(iter(a["shares"]))], "limit_B": PHRASES[next(iter(b["shares"]))],
                "shares": [{"means": PHRASES[k], "A_pct": a["shares"].get(k, 0.0), "B_pct": b["shares"].get(k, 0.0),
                            "points": round(b["shares"].get(k, 0.0) - a["shares"].get(k, 0.0), 1)} for k in kinds],
                **{f"{key_}_{side}": p[key_] for key_ in ("ms_per_flush", "ms_per_read") for side, p in (("A", a), ("B", b))},
                "flush": b["flush"] if b["ms_per_flush"] is not None else a["flush"],
            })
    return out


def change_line(change: dict[str, Any], most: int = 3) -> str:
    """One case's change for the terminal: "oltp u4: limited by storage flush latency → CPU; storage flush latency
    87% → 5%, CPU 10% → 93%; 99.8 → 0.21 ms per WAL flush"."""
    limit = (f"limited by {change['limit_A']} → {change['limit_B']}" if change["limit_A"] != change["limit_B"]
             else f"still limited by {change['limit_A']}")
    parts = [limit, ", ".join(f"{s['means']} {s['A_pct']:.0f}% → {s['B_pct']:.0f}%" for s in change["shares"][:most])]
    for key, what in (("ms_per_flush", f"per {change['flush']}"), ("ms_per_read", "per block read")):
        if change[f"{key}_A"] is not None and change[f"{key}_B"] is not None:
            parts.append(f"{fmt(change[f'{key}_A'])} → {fmt(change[f'{key}_B'])} ms {what}")
    return f"{change['suite']} {change['case']}: " + "; ".join(parts)


def change_rows(changes: list[dict[str, Any]], several: bool) -> list[dict[str, Any]]:
    """The comparison page's table: per case and meaning the share on each side and the change in points."""
    rows = []
    for c in changes:
        for s in c["shares"]:
            rows.append({**({"run": c["vs"]} if several else {}), "suite": c["suite"], "case": c["case"],
                         "wait means": s["means"], "A % of session time": s["A_pct"],
                         "the run's %" if several else "B %": s["B_pct"],
                         "change (points)": s["points"]})
    return rows
