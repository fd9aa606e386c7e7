"""Repeats of a suite's headline cases (`repeats` in a plan, `--repeats N` on the command line).

One measurement a side cannot tell a 3% change from noise; the same case measured several times can (compare's
t-test). Repeating a whole sweep would multiply its time, so a suite's cases are measured once, then the cases
its headlines come from (the peak IOPS point, the best OLTP load level, each engine's power and throughput streams)
are measured again, round after round: with two targets or engines that is A B A B …, so a drift of the host over
the run falls on both alike. Each repeat is a record of its own ("u4-r2", "t0-rand-w0-qd32-bs4k-r3") whose params
differ only in ``repeat``; the tables, charts and verdict see one record per configuration, each of its figures the
median of that figure's own repeats (`one_per_configuration`), and compare sees them all.
"""

from __future__ import annotations

import json
import re

from refbench.suites import Case, Record, Suite, is_figure

PARAM = "repeat"


def repeat_id(case: Case, k: int) -> str:
    """The id of repeat k of a case: "u4-r1" -> "u4-r3" when the case numbers itself, else "<id>-r3"."""
    own = case.params.get(PARAM)
    if own is not None and case.id.endswith(f"-r{own}"):
        return f"{case.id[:-len(f'-r{own}')]}-r{k}"
    return f"{case.id}-r{k}"


def repeat_cases(suite: Suite, cases: list[Case], records: list[Record], repeats: int,
                 after_repeats: bool = False) -> list[Case]:
    """The extra measurements ``repeats`` asks for: rounds 2..N of the cases the suite's headlines come from, as the
    first round of ``cases`` decided them (so a resumed run repeats the same cases), round by round. With
    ``after_repeats``, as every record so far decides them (each repeated case by its median): a headline that
    moved to a case measured once after the repeats is repeated too, so that no headline rests on one measurement."""
    if repeats <= 1 or not records:
        return []
    first_round = {c.id for c in cases}
    measured = one_per_configuration(records if after_repeats else [r for r in records if r.case_id in first_round],
                                     suite)
    chosen = dict.fromkeys(h.case for h in suite.headlines(deciding(measured), suite.summarize(measured))
                           if h.case in first_round)
    by_id = {c.id: c for c in cases}
    out = []
    for k in range(2, repeats + 1):
        for case_id in chosen:
            case = by_id[case_id]
            if case.params.get(PARAM, 1) > 1:  # already a repeat of the suite's own
                continue
            out.append(Case(repeat_id(case, k), {**case.params, PARAM: k},
                            f"{case.title or case.id}, repeat {k} of {repeats}"))
    return [c for c in out if c.id not in first_round]


def deciding(records: list[Record]) -> list[Record]:
    """The records a headline may come from: those whose server did not stall (``extra["stalled"]``), unless all did."""
    return [r for r in records if not r.extra.get("stalled")] or records


def configuration(record: Record) -> str:
    return json.dumps({k: v for k, v in record.params.items() if k != PARAM}, sort_keys=True, default=str)


def median_repeat(values: list[tuple[str, float]]) -> tuple[str, float]:
    """(the repeat, its value) whose value is the median of ``values`` (each repeat's case id and value, in repeat
    order): the lower one of an even count, so a figure is a floor, not a best try, and always a value one repeat
    measured. Each figure of a configuration is its own: NOPM's repeat need not be TPM's."""
    return sorted(values, key=lambda pair: pair[1])[(len(values) - 1) // 2]


def one_per_configuration(records: list[Record], suite: Suite | None = None) -> list[Record]:
    """The records with each configuration's repeats replaced by one: each figure measured in every repeat is the
    median of its own repeats (median_repeat); everything else (the wait profile, the telemetry, the storage
    figures the bottleneck is named from) is the representative repeat's: the median by the figure the suite's
    headlines take from that case in the first round (else the first figure that differs). A repeat whose server
    stalled is left out (``stalled``: their ids) while another remains. It keeps the first repeat's id, and
    ``extra["repeats"]`` says how many there were, of which figure, its values and the representative repeat."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(configuration(r), []).append(r)
    if all(len(g) == 1 for g in groups.values()):
        return records
    for group in groups.values():
        group.sort(key=lambda r: r.params.get(PARAM, 1))
    metric_of: dict[str, str] = {}
    if suite is not None and hasattr(suite, "headlines"):
        first = [g[0] for g in groups.values()]
        metric_of = {h.case: h.metric for h in suite.headlines(first, suite.summarize(first)) if h.case}
    out = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        metric = metric_of.get(group[0].case_id)
        if metric is None or not all(is_figure(r.metrics.get(metric)) for r in group):
            metric = _deciding_metric(group)
        kept = deciding(group)
        by_id = {r.case_id: r for r in kept}
        median = by_id[median_repeat([(r.case_id, r.metrics[metric]) for r in kept])[0]] if metric else kept[0]
        metrics = {name: median_repeat([(r.case_id, r.metrics[name]) for r in kept])[1]
                   if all(is_figure(r.metrics.get(name)) for r in kept) else value
                   for name, value in median.metrics.items()}
        repeats = {"n": len(group), "metric": metric, "values": [r.metrics[metric] for r in group] if metric else [],
                   "cases": [r.case_id for r in group], "median_case": median.case_id}
        if len(kept) < len(group):
            repeats["stalled"] = [r.case_id for r in group if r.extra.get("stalled")]
        out.append(Record(**{**median.__dict__, "metrics": metrics, "case_id": group[0].case_id,
                             "params": dict(group[0].params), "extra": {**median.extra, "repeats": repeats}}))
    return out


def _deciding_metric(group: list[Record]) -> str | None:
    for metric, value in group[0].metrics.items():
        if is_figure(value) and all(is_figure(r.metrics.get(metric)) for r in group) and len({r.metrics[metric] for r in group}) > 1:
            return metric
    return None


def strip_repeat(case_id: str) -> str:
    """"u4-r2" -> "u4": the configuration a repeat's case id names."""
    return re.sub(r"-r\d+$", "", case_id)
