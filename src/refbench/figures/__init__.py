"""A run's figures and the replicates behind each: what compare tests and the catalog keeps. A figure is
(suite, case, metric); records that differ only in a repeat number are one figure, its repeats the replicates."""

from __future__ import annotations

import functools
import json
import re
import statistics
from dataclasses import dataclass, field

from refbench.runstore import Run
from refbench.suites import Record, is_figure

# Throughput-like names (higher is better) are tested first, because "read_mb_s" also ends in "_s".
HIGHER_IS_BETTER = re.compile(r"(_per_(s|min|h)|(^|_)(mb|mib|gb|b)_s|iops|nopm|tpm|qph|throughput|rate|^power$)", re.I)
LOWER_IS_BETTER = re.compile(r"(lat|latency|await|elapsed|duration|_s$|_ms$|_us$|_ns$|_min$)", re.I)
# Durations a run chose rather than achieved (how long a point ran or was measured, when steady state came),
# and CPU seconds over a fixed interval (less is not better when less work was done).
NEUTRAL = re.compile(r"(runtime|measured|cpu_s$|_at_s$|_pct$)", re.I)
@functools.lru_cache(maxsize=4096)  # a comparison asks it of each figure several times
def direction(metric: str) -> int:
    """+1 when a higher value is better, -1 when lower is better, 0 when neither (percentages, counts)."""
    if NEUTRAL.search(metric):
        return 0
    if HIGHER_IS_BETTER.search(metric):
        return 1
    if LOWER_IS_BETTER.search(metric):
        return -1
    return 0


# What a plan says that does not change the configuration it measures: two runs whose plans differ only in these
# are runs of one configuration, and their spread is this host's run-to-run spread.
NOT_CONFIGURATION = ("name", "repeats")


def configuration(plan: dict) -> str:
    """The configuration a run's plan measures, as one comparable string."""
    return json.dumps({k: v for k, v in plan.items() if k not in NOT_CONFIGURATION}, sort_keys=True, default=str)


# Case parameters that number repeats of the same measurement: records differing only in these are one figure.
REPEAT_PARAMS = ("repeat", "round")


# ---- figures and the replicates behind them ----------------------------------------------------------------

@dataclass
class Figure:
    value: float
    samples: list[float] = field(default_factory=list)  # its replicates (repeats, or runs of a side), or none
    source: str = "1 measurement"
    disturbed: str = ""  # neighbours took the machine while its replicates were measured (host.contention): how
    left_out: str = ""  # the replicates left out because neighbours disturbed them, and how ("1 of 3 repeats: …")
    started: list[float] = field(default_factory=list)  # when each replicate's run began, for runs as replicates


def figures(run: Run, groups: dict[tuple[str, str], list[Record]] | None = None) -> dict[tuple[str, str, str], Figure]:
    """(suite, case, metric) -> the figure. Records that differ only in a repeat number are one figure (their
    mean, with the repeats as its replicates; the case is named without the repeat). The seconds of a measurement
    are not replicates (estimate's docstring says why). A cluster run's figures are
    its totals across nodes, one case per node count ("u4-r1@2n": the case on 2 nodes), measured once."""
    if run.plan.hosts:
        return _cluster_figures(run)
    out: dict[tuple[str, str, str], Figure] = {}
    for (suite, case), records in (groups or repeat_groups(run)).items():
        # A disturbed repeat is left out when a clean one remains; the figure is disturbed when none does.
        clean = [r for r in records if not r.extra.get("disturbed")]
        reason = next((r.extra["disturbed"] for r in records if r.extra.get("disturbed")), "")
        left_out = f"{len(records) - len(clean)} of {len(records)} repeats left out, disturbed: {reason}" \
            if clean and reason else ""
        for metric in dict.fromkeys(m for r in records for m in r.metrics):
            values = [r.metrics[metric] for r in clean or records if is_figure(r.metrics.get(metric))]
            if not values:
                continue
            out[(suite, case, metric)] = Figure(statistics.fmean(values), values if len(values) > 1 else [],
                                                f"{len(values)} repeats" if len(values) > 1 else "1 measurement",
                                                "" if clean else reason, left_out)
    return out


def side_figures(runs: list[Run]) -> dict[tuple[str, str, str], Figure]:
    """The figures of one side of a comparison: one run's, or, for several runs of one configuration, each figure
    they all have with one replicate per run (the mean of that run's repeats): the run is the replicate."""
    if len(runs) == 1:
        return figures(runs[0])
    each = [figures(run) for run in runs]
    started = [(span or (0.0, 0.0))[0] for span in (run.span() for run in runs)]
    out = {}
    for key in each[0]:
        if not all(key in f for f in each):
            continue
        mine = [(f[key], at) for f, at in zip(each, started)]
        clean = [(f, at) for f, at in mine if not f.disturbed]  # a disturbed run is left out when a clean one remains
        reason = next((f.disturbed for f, _ in mine if f.disturbed), "")
        kept = clean or mine
        values = [f.value for f, _ in kept]
        out[key] = Figure(statistics.fmean(values), values if len(values) > 1 else [],
                          f"{len(values)} runs" if len(values) > 1 else "1 run",
                          "" if clean else reason,
                          f"{len(mine) - len(clean)} of {len(mine)} runs left out, disturbed: {reason}" if clean and reason
                          else "; ".join(f.left_out for f, _ in mine if f.left_out),
                          [at for _, at in kept] if len(values) > 1 else [])
    return out


def repeat_groups(run: Run) -> dict[tuple[str, str], list[Record]]:
    """(suite, case) -> the records that differ only in a repeat number, the case named without it ("u4")."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in run.records():
        same = json.dumps({k: v for k, v in r.params.items() if k not in REPEAT_PARAMS}, sort_keys=True, default=str)
        groups.setdefault((r.suite, same), []).append(r)
    return {(suite, _case_name(records)): records for (suite, _), records in groups.items()}


def _case_name(records: list[Record]) -> str:
    """The case without its repeat number, measured once or repeated alike ("u4-r1" -> "u4"): one configuration is
    one figure in every run, whichever case each run happened to repeat."""
    first = records[0]
    for key in REPEAT_PARAMS:
        if key in first.params:
            stripped = re.sub(rf"[-_.]?{key[0]}{first.params[key]}$", "", first.case_id)
            if stripped != first.case_id:
                return stripped
    return first.case_id


def figure_cases(run: Run, groups: dict[tuple[str, str], list[Record]] | None = None) -> dict[tuple[str, str], str]:
    """(suite, record's case) -> the case its figure is named by: a repeated case's figure carries the name of
    its group ("u4-r1" -> "u4")."""
    return {(r.suite, r.case_id): case for (_, case), records in (groups or repeat_groups(run)).items() for r in records}


def _cluster_figures(run: Run) -> dict[tuple[str, str, str], Figure]:
    from refbench.figures.cluster import tables

    totals = next(t for t in tables(run) if t.name == "cluster_totals")
    out = {}
    for t in totals.rows:
        if is_figure(value := t["total (sum or mean)"]):
            out[(t["suite"], f"{t['case']}@{t['nodes']}n", t["figure"])] = Figure(value)
    return out
