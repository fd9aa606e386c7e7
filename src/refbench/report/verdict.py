"""The run's verdict: per suite the headline figures, the correctness summary and the bottleneck, the answer a run
ends with (terminal, --json, the report's first screen, verdict.json in the run directory).

The bottleneck is named from the host telemetry of the case a headline comes from (the whole suite's measured span
when that case was shorter than the one-second sampling): the busiest device, the CPU, and where the suite records
them, the load driver's share of the CPU and the database's cache hit ratio. A headline case measured several times
(repeats) is named in each repeat, on its own telemetry, and the verdict gives the limit that held in most of them,
saying so when they disagree ("storage flush latency in 2 of 3 repeats, CPU in 1: …").
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator

from refbench.engines import engine_for_dsn
from refbench.engines.settings import durability_traded, settings_dict
from refbench.host.telemetry import Telemetry
from refbench.report.advice import MEMORY_HIT_RATIO_PCT, Reading, cpu_wait_cause, limit_name, quota_throttled
from refbench.suites.repeats import deciding, median_repeat, one_per_configuration
from refbench.runstore import Run
from refbench.suites import Headline, Record, Table, get_suite, is_figure

SATURATED_DEVICE_PCT = 80.0  # busy %: the device had a request in flight nearly all the time
SATURATED_CPU_PCT = 85.0  # user + system + steal; beyond it, the work queues for a CPU
IDLE_DEVICE_PCT = 20.0


@dataclass
class SuiteVerdict:
    suite: str
    headlines: list[Headline]
    checks_passed: int
    checks_failed: int
    bottleneck: str
    # The engines run, one row each (the suite's engines_compared, with the correctness checks that name the engine);
    # empty for a suite without engines. Shown side by side when there are two or more.
    engines: list[dict[str, Any]] = field(default_factory=list)
    # Per headline case measured several times: its repeats' case ids and the limit named in each, in repeat order
    # ({"case": "u4", "repeats": ["u4", "u4-r2", "u4-r3"], "limits": ["storage flush latency", "CPU", …]}).
    bottleneck_repeats: list[dict[str, Any]] = field(default_factory=list)
    # Neighbours took the machine while a headline case was measured (refbench.host.contention.disturbed), or its
    # server stalled, in words: "other processes used 61% of the CPU (u4, 2 of its 3 repeats)"; empty when every
    # headline case ran undisturbed.
    disturbed: str = ""
    # What to try next, per engine (refbench.report.advice): the limit, its evidence, what to try and the command.
    advice: list[dict[str, Any]] = field(default_factory=list)
    # The verdict in one screen: what limits the headline the next step is about, in at most ten words with the one
    # figure that proves it ("storage flush latency, 0.383 ms per WAL flush"), and that step (one of ``advice``).
    limit: str = ""
    next: dict[str, Any] = field(default_factory=dict)
    # The settings its servers ran with that trade durability for speed, "fsync=off, full_page_writes=off"
    # (durability); empty when they kept every commit on storage.
    durability: str = ""

    @property
    def correctness(self) -> str:
        total = self.checks_passed + self.checks_failed
        if not total:
            return "no correctness checks"
        if self.checks_failed:
            return f"{self.checks_failed} of {total} checks FAILED"
        return f"all {total} checks passed"

    def to_dict(self) -> dict[str, Any]:
        from refbench.formats import figure_said

        # "said": the figure as every surface prints it, with its repeats' range (formats.figure_said).
        headlines = [{**asdict(h), "threshold": h.threshold(self.suite),
                      "said": figure_said(h.value, h.unit, h.low, h.high)} for h in self.headlines]
        return {"suite": self.suite, "headlines": headlines, "checks_passed": self.checks_passed,
                "checks_failed": self.checks_failed, "correctness": self.correctness, "bottleneck": self.bottleneck,
                "engines": self.engines, "bottleneck_repeats": self.bottleneck_repeats, "disturbed": self.disturbed,
                "advice": self.advice, "limit": self.limit, "next": self.next, "durability": self.durability}


@dataclass(frozen=True)
class Limited:
    """What limited one headline configuration: its engine, the resource and its phrase, the repeat it was named
    from (``record``) with that repeat's telemetry window, and the configuration's case id (its first repeat's)."""
    engine: str
    resource: str
    phrase: str
    record: Record
    case: str
    window: dict[str, Any]


def run_verdict(run: Run, tables: dict[str, list[Table]] | None = None) -> list[SuiteVerdict]:
    """One verdict per suite with records, in the plan's order. ``tables``: the suites' tables when the caller has
    already made them (the report), else they are made here."""
    findings = run.findings()
    telemetry = Telemetry(run.telemetry_path)
    out = []
    for name, suite, measured, records, suite_tables, headlines in _suites_headlines(run, tables):
        headlines = [_with_repeats(h, records, measured) for h in headlines]
        passed = sum(f.passed for f in findings.get(name, []))
        engines = suite.engines_compared(suite_tables) if suite is not None and hasattr(suite, "engines_compared") else []
        bottleneck, per_repeat, limited = _bottleneck(headlines, records, measured, telemetry)
        advice = _advice(run, name, suite, headlines, limited)
        failed = len(findings.get(name, [])) - passed
        first = _first_limited(headlines, limited)
        out.append(SuiteVerdict(name, headlines, passed, failed, bottleneck, _with_checks(engines, findings.get(name, [])),
                                per_repeat, _disturbed(headlines, records, measured), advice,
                                (f"{first.engine}: " if first.engine else "") + limit_said(first.resource, first.record,
                                                                                           first.window) if first else "",
                                _next_step(name, failed, findings.get(name, []), advice, first, str(run.path)),
                                durability(run, name, measured)))
    return out


def durability(run: Run, suite: str, records: list[Record]) -> str:
    """The settings a suite's servers ran with that trade durability for speed (engines.settings.durability_traded):
    the plan's for the servers refbench managed, then what the servers reported (a server of the user's among them),
    as "fsync=off, full_page_writes=off"; "" when none."""
    options = run.plan.options.get(suite, {})
    if "engines" in options:  # dss, dw: the engines of the plan's that the suite runs, a DSN's not managed
        unmanaged = engine_for_dsn(options["dsn"]) if options.get("dsn") else ""
        managed = [e for e in options["engines"] if e in run.plan.engines and e != unmanaged]
    else:  # oltp: one engine, managed unless a DSN names the user's server
        managed = [] if options.get("dsn") else [options.get("engine") or "postgres"]
    settings: dict[str, str] = {}
    for engine, key in (("postgres", "pg_settings"), ("mariadb", "mariadb_settings")):
        if engine in managed and isinstance(options.get(key), list):
            settings |= settings_dict(options[key])
    for record in records:
        if isinstance(reported := record.extra.get("settings"), dict):
            settings |= {name: str(value) for name, value in reported.items()}
    return ", ".join(durability_traded(settings))


def _suites_headlines(run: Run, tables: dict[str, list[Table]] | None = None) -> Iterator[tuple[str, Any, list[Record], list[Record], list[Table], list[Headline]]]:
    """Per suite with records, in the plan's order: (name, suite, every repeat, one record per configuration, its
    tables, its headlines)."""
    for name in dict.fromkeys(run.plan.suites + run.suites_with_records()):
        measured = run.records(name)
        if not measured:
            continue
        suite = _suite(name)
        records = one_per_configuration(measured, suite)
        suite_tables = (tables or {}).get(name)
        if suite_tables is None and suite is not None:
            suite_tables = suite.summarize(records)
        headlines = []
        if suite is not None and hasattr(suite, "headlines"):
            headlines = suite.headlines(deciding(records), suite_tables or [])
        yield name, suite, measured, records, suite_tables or [], headlines


def _first_limited(headlines: list[Headline], limited: list[Limited]) -> Limited | None:
    """What limited the first rated headline, which `refbench tune --baseline` tunes."""
    rated = [h.case for h in headlines if h.case and not h.unrated]
    return next((lim for case in rated for lim in limited if lim.case == case), limited[0] if limited else None)


def _next_step(suite: str, failed: int, findings: list, advice: list[dict[str, Any]], first: Limited | None,
               run_path: str) -> dict[str, Any]:
    """The one next step the verdict gives: a failed check's (the figures of a wrong answer are not worth tuning), else
    the advice for the limit of the headline tune tunes."""
    if failed:
        check = next(f.check for f in findings if not f.passed)
        more = f" and {failed - 1} more" if failed > 1 else ""
        return {"short": f"fix the failed check first: {check}{more}", "command": shlex.join(["refbench", "why", run_path, suite])}
    if first is None or not advice:
        return {}
    chosen = next((a for a in advice if a["engine"] == first.engine and a["limit"] == first.resource), advice[0])
    return {"short": chosen["short"], "command": chosen["command"]}


def _suite(name: str) -> Any:
    try:
        return get_suite(name)
    except Exception:  # a plugin suite that is no longer installed: its records have no headlines
        return None


def _with_repeats(headline: Headline, records: list[Record], measured: list[Record]) -> Headline:
    """A headline from a case measured several times: the median of its own figure's repeats (the value the tables
    show too, suites.repeats.one_per_configuration), their range, and the repeat that measured it, whichever repeat
    another figure of the case took (write MB/s beside read MB/s); the repeats whose server stalled left out."""
    repeats = next((r.extra.get("repeats") for r in records if r.case_id == headline.case), None)
    if not repeats:
        return headline
    by_id = {r.case_id: r for r in measured}
    stalled = repeats.get("stalled", [])
    values = [(c, by_id[c].metrics[headline.metric]) for c in repeats.get("cases", [])
              if c in by_id and c not in stalled and is_figure(by_id[c].metrics.get(headline.metric))]
    if stalled:
        headline = replace(headline, note="; ".join(filter(None, [f"{len(stalled)} stalled repeat(s) left out",
                                                                  headline.note])))
    if len(values) < 2:
        return headline
    low, high = min(v for _, v in values), max(v for _, v in values)
    repeat, value = median_repeat(values)
    return replace(headline, value=value, spread=high - low, low=low, high=high, repeats=len(values), repeat=repeat)


def _disturbed(headlines: list[Headline], records: list[Record], measured: list[Record]) -> str:
    """Which headline cases neighbours or a stalled server disturbed, and how: the first one's words, and where."""
    by_id = {r.case_id: r for r in measured}
    said, where = "", []
    for record in records:
        if not any(h.case == record.case_id for h in headlines):
            continue
        group = [by_id[c] for c in (record.extra.get("repeats") or {}).get("cases", [record.case_id]) if c in by_id]
        hit = [r for r in group if r.extra.get("disturbed")]
        if hit:
            said = said or hit[0].extra["disturbed"]
            where.append(record.case_id + (f", {len(hit)} of its {len(group)} repeats" if len(group) > 1 else ""))
    return f"{said} ({'; '.join(where)})" if said else ""


def _with_checks(engines: list[dict[str, Any]], findings: list) -> list[dict[str, Any]]:
    """Each engine's row with the correctness checks that name it ("mariadb: …", "(duckdb and mariadb, …)")."""
    out = []
    for row in engines:
        mine = [f for f in findings if re.search(rf"\b{re.escape(row['engine'])}\b", f.check)]
        failed = sum(not f.passed for f in mine)
        out.append({**row, "checks": (f"{failed} of {len(mine)} FAILED" if failed else f"{len(mine)} passed") if mine
                    else "none"})
    return out


def headline_keys(run: Run) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(suite, case id, metric) of every headline figure that comes from one record -> its name in a comparison,
    and its role (its [accept] name: oltp.nopm, dss.power.duckdb), which another run's headline of the same role
    shares whatever case it came from."""
    return {(name, h.case, h.metric): (h.compared_as, h.threshold(name)) for name, *_, headlines in _suites_headlines(run)
            for h in headlines if h.case}


def _bottleneck(headlines: list[Headline], records: list[Record], measured: list[Record],
                telemetry: Telemetry) -> tuple[str, list[dict[str, Any]], list[Limited]]:
    """What limited the headline cases: the first one's phrase, and another case's too when a different resource
    limited it (peak IOPS CPU-bound, peak MB/s device-bound) or it ran on another engine (each engine's own words);
    and per case measured several times, the limit each repeat named; and per (engine, resource), what limited it
    (the advice's). ``records``: one per configuration; ``measured``: every repeat."""
    by_case = {r.case_id: r for r in records}
    cases = list(dict.fromkeys(h.case for h in headlines if h.case in by_case)) or [max(records, key=lambda r: r.elapsed_s).case_id]
    labels: dict[tuple[str, str], str] = {}  # (engine, resource) -> the headline it limited
    named: dict[tuple[str, str], Limited] = {}
    per_repeat = []
    for case in cases:
        resource, phrase, chosen, repeats = _case_bottleneck(by_case[case], measured, telemetry)
        if repeats:
            per_repeat.append({"case": case, "repeats": [r.case_id for r, _ in repeats],
                               "limits": [limit_name(res) for _, res in repeats]})
        engine = str(by_case[case].params.get("engine", ""))
        labels.setdefault((engine, resource), next((h.label for h in headlines if h.case == case), case))
        named.setdefault((engine, resource), Limited(engine, resource, phrase, chosen, case,
                                                     _window(chosen, measured, telemetry)))
    limited = list(named.values())
    if len(named) == 1:
        return limited[0].phrase, per_repeat, limited
    return "; ".join(f"at {labels[key]}: {lim.phrase}" for key, lim in named.items()), per_repeat, limited


def _advice(run: Run, name: str, suite: Any, headlines: list[Headline], limited: list[Limited]) -> list[dict[str, Any]]:
    """What to try next for each (engine, resource) the verdict named (refbench.report.advice), from what `refbench
    tune` would read in this run (tune_reading): its advice names the settings tune tries first."""
    from refbench.report.advice import MORE_LOAD, advise

    tuned = _first_limited(headlines, limited)  # what `tune --baseline` tunes for
    options = run.plan.options.get(name, {})
    out = []
    for lim in limited:
        record = lim.record
        unrated = next((h.unrated for h in headlines if h.unrated and h.case == lim.case), "")
        option = MORE_LOAD.get(name, ("", ""))[0]
        load = record.params.get(option) or record.params.get(option.rstrip("s")) or record.metrics.get(option) \
            or options.get(option)
        load = max(load) if isinstance(load, list) and load else load
        out.append(advise(name, tune_reading(name, lim, options), lim.phrase, unrated, str(run.path), run.plan.profile,
                          lim is tuned, list(getattr(suite, "tune_knobs", []) or []),
                          load if isinstance(load, int) and load > 0 else None,
                          record.params.get("warehouses") or options.get("warehouses") or None).to_dict())
    return out


def tune_reading(suite: str, lim: Limited, options: dict[str, Any]) -> Reading:
    """What `refbench tune` reads in a run to order its trials, for one headline configuration: the engine (a record
    without one: default_engine), what limited it (its
    wait profile's meanings with at least 5% of session time, then the host's resource), and the storage figures of
    the repeat the verdict named it from."""
    from refbench.engines.waits import limits

    storage = lim.record.extra.get("storage") or {}
    waits = storage.get("waits")
    meanings = [m for m, share, _ in limits(waits) if share >= 5] if waits else []
    host, _ = _host_bottleneck(lim.record, lim.window)
    return Reading(suite, lim.engine or default_engine(suite, options), lim.resource,
                   list(dict.fromkeys(meanings + [host])), storage)


def default_engine(suite: str, options: dict[str, Any]) -> str:
    """The engine a suite's run uses where its records do not say (oltp's before they named it): its engine option,
    else its first engine, else PostgreSQL for oltp."""
    engines = options.get("engines") or []
    return str(options.get("engine") or (engines[0] if engines else "") or ("postgres" if suite == "oltp" else ""))


def _case_bottleneck(record: Record, measured: list[Record],
                     telemetry: Telemetry) -> tuple[str, str, Record, list[tuple[Record, str]]]:
    """What limited one configuration: (resource, phrase, the record named, each repeat's record and resource).
    Measured once: its own, no repeats. Measured several times (``record`` the median repeat, refbench.suites.repeats):
    each repeat named on its own telemetry; the resource that held in most repeats (a tie: the median's when it is
    one of them, else the earliest), named from the median repeat when it is one of those, else from the first that
    is, and the phrase says in how many repeats each limit held."""
    by_id = {r.case_id: r for r in measured}
    repeats = record.extra.get("repeats") or {}
    group = [by_id[c] for c in repeats.get("cases", []) if c in by_id]
    if len(group) < 2:
        resource, phrase = name_bottleneck(record, _window(record, measured, telemetry))
        return resource, phrase, record, []
    named = [(r, *name_bottleneck(r, _window(r, measured, telemetry))) for r in group]
    counts = Counter(resource for _, resource, _ in named)
    most = max(counts.values())
    median = next((n for n in named if n[0].case_id == repeats.get("median_case")), None)
    chosen = median if median and counts[median[1]] == most else next(n for n in named if counts[n[1]] == most)
    chosen_record, resource, phrase = chosen
    order = sorted(counts, key=lambda res: (-counts[res], res != resource))  # stable: else the earliest first
    if len(counts) == 1:
        said = f"in {'both' if len(group) == 2 else f'all {len(group)}'} repeats, {phrase}"
    else:
        tie = " (a tie)" if counts[order[1]] == most else ""
        held = ", ".join(f"{limit_name(res)} in {counts[res]}" + (f" of {len(group)} repeats" if i == 0 else "")
                         for i, res in enumerate(order))
        said = f"{held}{tie}: {phrase}"
    return resource, said, chosen_record, [(r, res) for r, res, _ in named]


def limit_said(resource: str, record: Record, window: dict[str, Any]) -> str:
    """What limited a case in at most ten words, with the one figure that proves it: "storage flush latency, 0.383 ms
    per WAL flush", "a saturated device, vda 84% busy", "CPU, 97% busy". The evidence in full is the bottleneck's
    phrase (name_bottleneck), which `refbench why` prints."""
    from refbench.engines.waits import limits
    from refbench.formats import fmt

    storage = record.extra.get("storage") or {}
    waits, io = storage.get("waits"), storage.get("io_latency") or {}
    name = limit_name(resource)
    if waits and waits.get("session_samples") and limits(waits)[0][0] == resource:
        _, share, events = limits(waits)[0]
        of = "query thread time" if "busy_threads" in waits else "session time"
        if resource == "flush" and io.get("ms_per_flush") is not None:
            return f"{name}, {fmt(io['ms_per_flush'])} ms per {'redo log write' if 'flush_ms_basis' in io else 'WAL flush'}"
        if resource == "read" and io.get("ms_per_read") is not None:
            return f"{name}, {fmt(io['ms_per_read'])} ms per block read"
        if resource == "cpu":
            return f"CPU, {share:.0f}% of {of} " + ("running" if events[0]["event"] == "CPU" else "in operators")
        if resource == "cpuwait":
            return f"{name}, {cpu_wait_cause(storage.get('machine') or {})[1]}"
        return f"{name}, {share:.0f}% of {of}"
    cpu_pct, device, busy_pct = _busiest(window)
    busy = f"{device} {busy_pct:.0f}% busy" if device else "no device activity"
    if resource == "cpuwait" and (throttled := quota_throttled(_machine(record, window))):
        return f"the server's CPU quota, throttled in {throttled['throttled_periods']:,} of {throttled['periods']:,} periods"
    if resource == "device":
        return f"{name}, {busy}"
    if resource == "cpu":
        return f"CPU, {cpu_pct}% busy"
    if resource == "neither":
        return f"{name}, CPU {cpu_pct}%, {busy}" if cpu_pct is not None else f"{name}, {busy}"
    return name


def tune_reading_of(run: Run, suite: str, case: str) -> Reading:
    """What `refbench tune --baseline` reads in ``run`` for one headline case (tune_reading), as the advice reads it."""
    measured = run.records(suite)
    telemetry = Telemetry(run.telemetry_path)
    record = next(r for r in one_per_configuration(measured, _suite(suite)) if r.case_id == case)
    resource, phrase, chosen, _ = _case_bottleneck(record, measured, telemetry)
    lim = Limited(str(record.params.get("engine", "")), resource, phrase, chosen, case, _window(chosen, measured, telemetry))
    return tune_reading(suite, lim, run.plan.options.get(suite, {}))


def _window(record: Record, records: list[Record], telemetry: Telemetry) -> dict[str, Any]:
    if record.telemetry.get("samples", 0) >= 2:
        return record.telemetry
    # Cases shorter than the sampling: the suite's measured span as a whole.
    window = telemetry.window(min(r.started_epoch_s for r in records), max(r.ended_epoch_s for r in records))
    return (window.to_dict() | {"machine": record.telemetry.get("machine")}) if window else {}


def name_bottleneck(record: Record, window: dict[str, Any]) -> tuple[str, str]:
    """(the limiting resource, a phrase). In the database's words when its sessions were sampled ("storage flush
    latency: 40% of session time waiting (IO:WALSync 30%, …), 0.26 ms per WAL flush on vda"), with the host's
    figures after it; from the host's figures alone otherwise: "vda (98% busy, queue 31)", "CPU (97%), storage idle",
    or neither saturated."""
    from refbench.engines.waits import limits
    from refbench.report.waits import explain

    resource, phrase = _host_bottleneck(record, window)
    storage = record.extra.get("storage") or {}
    said = explain(storage.get("waits"), storage.get("io_latency"), storage.get("device"), storage.get("machine"))
    if said is None:
        return resource, phrase
    leader = limits(storage["waits"])[0][0]
    if leader != "cpuwait" and quota_throttled(_machine(record, window)):
        # Its quota held the server back whatever its sessions were seen waiting for: the strongest evidence leads.
        return "cpuwait", f"{phrase}; the sessions: {said}"
    return leader, f"{said}; host: {phrase}"


def _busiest(window: dict[str, Any]) -> tuple[int | None, str | None, float]:
    """(the CPU's busy % — user, system and steal — or None without CPU samples, the busiest device or None, its busy %)
    over a telemetry window."""
    cpu, disks = window.get("cpu") or {}, window.get("disks") or {}
    cpu_pct = round(sum(cpu.get(k, 0.0) for k in ("user_pct", "system_pct", "steal_pct"))) if cpu else None
    device = max(disks, key=lambda d: disks[d]["busy_pct"]) if disks else None
    return cpu_pct, device, disks[device]["busy_pct"] if device else 0.0


def _machine(record: Record, window: dict[str, Any]) -> dict[str, Any]:
    """Who had the CPU while the case was measured (refbench.host.contention): the record's split, else the window's."""
    return (record.extra.get("storage") or {}).get("machine") or window.get("machine") or {}


def _host_bottleneck(record: Record, window: dict[str, Any]) -> tuple[str, str]:
    from refbench.formats import fmt

    cpu, disks = window.get("cpu") or {}, window.get("disks") or {}
    if not cpu and not disks:
        return "unknown", "not determined: no host telemetry covers the measured interval"
    cpu_pct, device, busy = _busiest(window)
    extras = []
    machine = _machine(record, window)
    if cpu and machine.get("others_pct") is not None:
        server = f"the server {machine['server_pct']:.0f}%, " if machine.get("server_pct") is not None else ""
        extras.append(f"the CPU: {server}refbench {machine['own_pct']:.0f}%, other processes {machine['others_pct']:.0f}%"
                      + (f", steal {machine['steal_pct']:.0f}%" if machine.get("steal_pct", 0) >= 1 else ""))
    if (share := record.metrics.get("driver_cpu_share_pct")) is not None:
        extras.append(f"the load driver's share {share:.0f}%")
    hit = (record.extra.get("storage") or {}).get("hit_ratio_pct")
    if hit is not None:
        extras.append(f"cache hit ratio {hit:.1f}%" + (": measured from memory" if hit >= MEMORY_HIT_RATIO_PCT else ""))
    tail = f"; {', '.join(extras)}" if extras else ""
    cpu_saturated = cpu_pct is not None and cpu_pct >= SATURATED_CPU_PCT
    if throttled := quota_throttled(machine):
        quota = f" of {fmt(throttled['quota_cpus'])} CPUs" if throttled.get("quota_cpus") else ""
        return "cpuwait", (f"the server's CPU quota{quota} (throttled in {throttled['throttled_periods']:,} of "
                       f"{throttled['periods']:,} periods), machine CPU {cpu_pct}%{tail}")
    if device and busy >= SATURATED_DEVICE_PCT:
        both = f" and CPU ({cpu_pct}%)" if cpu_saturated else ""
        return "device", f"{device} ({busy:.0f}% busy, queue {disks[device]['avg_queue']:.3g}){both}{tail}"
    if cpu_saturated:
        storage = "storage idle" if not device or busy < IDLE_DEVICE_PCT else f"{device} {busy:.0f}% busy"
        return "cpu", f"CPU ({cpu_pct}%), {storage}{tail}"
    where = f"CPU {cpu_pct}%" if cpu_pct is not None else "CPU unknown"
    activity = f"{device} {busy:.0f}% busy" if device else "no device activity"
    return "neither", f"neither saturated ({where}, {activity}): the load offered (users, queue depth, streams) limits it{tail}"
