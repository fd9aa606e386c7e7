"""The dss suite's answer checks, as strict for one engine alone as for three.

Every answer a run computed — stream 0's single queries, and the power stream's and each throughput stream's of every
repeat, of every engine — is compared at full precision (answers.engine_rule) with the answer refbench keeps for that
query text on that data (answers.kept_answer). Where it keeps none (another scale factor, seed or stream), the
answer is computed apart: the run's generated data loaded into a DuckDB of the check's own (in-process, always
there), the query asked there on the same data. At SF 1 stream 0 is also held to the TPC-H reference answers by the
specification's own rules (2.1.3.5).

A throughput query that ran while the refresh stream changed orders and lineitem may have seen one refresh pair's
RF1 rows or none: it is compared with the answer for the loaded data, and when that differs, with the answers
recomputed on the same engine for each data state it could have seen (that pair's RF1 inserted in a transaction that
is rolled back).

One finding per engine and kind of answer, named for that engine only; it says how many answers it compared and
against what. It passes only when every answer was compared: one that could not be (past the query timeout, or no
answer to compare it with) fails it, saying which and how to make it comparable.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refbench.engines import Placement, QueryTimeout, open_engine
from refbench.exhaustion import resource_of
from refbench.fileio import atomic_write_text
from refbench.suites import Finding
from refbench.suites.dss import answers, refresh
from refbench.suites.dss.answers import LOADED
from refbench.suites.dss.queries import min_streams, stream_queries
from refbench.suites.repeats import PARAM

KINDS = ("stream 0", "power stream", "throughput streams")
SHOWN_WRONG = 5  # answers named in a failing finding; the rest are counted


@dataclass
class Answer:
    """One answer a run computed, as saved: ``data`` None when it ran while the refresh stream changed the data (then
    ``could_see`` lists the data states its snapshot may have held); ``rows`` None when it ran past the time limit."""

    kind: str
    where: str  # "stream 0", "the power stream", "throughput stream 2"
    query: int
    text: str
    data: str | None
    rows: list[list[str]] | None
    could_see: list[str] = field(default_factory=list)


# ---- saving and reading a run's answers ---------------------------------------------------------------------------


def answer_path(work_dir: Path, engine: str, where: str, query: int) -> Path:
    """``where``: "" for a single query, "power-" or "streamS-", then the repeat's repeat_tag."""
    return work_dir / "answers" / f"{engine}-{where}q{query:02d}.json"


def repeat_tag(case) -> str:
    """What names a repeat's answers apart from the first measurement's ("r2-"), so that each repeat's are kept."""
    k = case.params.get(PARAM, 1)
    return f"r{k}-" if k > 1 else ""


def save_answer(ctx, engine: str, where: str, query: int, text: str, data: str | None, rows: list | None,
                could_see: list[str] = ()) -> None:
    """Keeps a query's answer at full precision for the checks, with its SQL text and the data it was computed on
    (data_seen); rows None (JSON null) says it ran past the time limit."""
    path = answer_path(ctx.work_dir, engine, where, query)
    atomic_write_text(path, json.dumps({"sf": ctx.options["sf"], "text": text, "data": data, "could_see": list(could_see),
                                "rows": None if rows is None else answers.as_expected(rows)}))


def load_answer(ctx, engine: str, where: str, query: int) -> dict[str, Any] | None:
    """A saved answer of this run's scale factor (a work directory given with --work-dir may hold another run's)."""
    try:
        saved = json.loads(answer_path(ctx.work_dir, engine, where, query).read_text())
    except (OSError, ValueError):
        return None
    return saved if isinstance(saved, dict) and saved.get("sf") == ctx.options["sf"] else None


def data_seen(text: str, asked: float, answered: float, refreshes: list[tuple[int, float, float]]) \
        -> tuple[str | None, list[str]]:
    """The data a throughput stream's query read, and if that is not known, the states it could have read: the
    loaded data, unless a refresh pair (``refreshes``: its number, RF1's start and RF2's end) ran while it did — then
    its snapshot may hold that pair's RF1 rows or not."""
    if answers.refresh_free(text):
        return LOADED, []
    pairs = [pair for pair, start, end in refreshes if start <= answered and asked <= end]
    return (None, [LOADED] + [answers.with_rf1(pair) for pair in pairs]) if pairs else (LOADED, [])


def run_answers(ctx, name: str, engine, timeout_s: float | None) -> list[Answer]:
    """Every answer engine ``name`` gave in this run: stream 0's (asked now where the run saved none: a run without
    the individual mode, or dw's), the power stream's and the throughput streams'."""
    sf = ctx.options["sf"]
    out = []
    for q, text in stream_queries(0, sf):
        saved = load_answer(ctx, name, "", q)
        if saved is None:
            try:
                rows = answers.as_expected(engine.run(text, timeout_s)[0])
            except QueryTimeout:
                rows = None
            saved = {"text": text, "data": LOADED, "rows": rows}
        out.append(Answer("stream 0", "stream 0", q, saved["text"], saved["data"], saved["rows"]))
    for path in sorted((ctx.work_dir / "answers").glob(f"{name}-*-q*.json")):
        where, q = path.stem.removeprefix(f"{name}-").rsplit("-q", 1)
        saved = load_answer(ctx, name, f"{where}-", int(q))
        if saved is None:
            continue
        stream, _, repeat = where.partition("-r")
        kind, shown = (("power stream", "the power stream") if stream == "power" else
                       ("throughput streams", f"throughput stream {stream.removeprefix('stream')}"))
        shown += f" (repeat {repeat})" if repeat else ""
        out.append(Answer(kind, shown, int(q), saved["text"], saved["data"], saved["rows"],
                          saved.get("could_see") or []))
    return out


# ---- the checks ----------------------------------------------------------------------------------------------------


def check_answers(ctx) -> list[Finding]:
    sf = ctx.options["sf"]
    timeout_s = ctx.options.get("query_timeout_s") or None
    engines = ctx.state["engines"]
    given = {name: run_answers(ctx, name, engine, timeout_s) for name, engine in engines.items()}
    findings = []
    if sf == 1.0:
        for name, theirs in given.items():
            wrong = {a.query: "timed out, not checked" if a.rows is None else d for a in theirs
                     if a.kind == "stream 0" and (a.rows is None or
                                                  (d := answers.compare(a.query, a.rows, answers.reference_answer(a.query))))}
            findings.append(Finding(f"{name}: stream 0 answers match the TPC-H reference answers at SF1", not wrong,
                                    "; ".join(f"Q{q}: {d}" for q, d in sorted(wrong.items())) or
                                    "all 22 queries within TPC-H 2.1.3.5's tolerances (singletons and counts exact, sums "
                                    "within 100, averages and ratios within 1% after rounding to 1/100)"))
    judge = Judge(ctx, engines, timeout_s)
    try:
        for name, theirs in given.items():
            for kind in KINDS:
                mine = [a for a in theirs if a.kind == kind]
                if mine:
                    findings.append(judge.finding(name, kind, mine))
    finally:
        judge.close()
    return findings


class Judge:
    """Judges each answer of an engine against the kept set, or an answer computed apart, or recomputed ones."""

    def __init__(self, ctx, engines: dict[str, Any], timeout_s: float | None):
        self.sf, self.engines, self.timeout_s = ctx.options["sf"], engines, timeout_s
        self.data_dir, self.apart_dir = ctx.state.get("data_dir"), ctx.work_dir / "answers-apart"
        self.apart: Any = None  # the DuckDB the answers are computed apart on, loaded when first needed
        self.apart_failed = ""
        self.computed: dict[tuple[str, str], list[list[str]] | None] = {}
        self.recomputed: dict[tuple[str, str, str], list[list[str]] | None] = {}

    def close(self) -> None:
        if self.apart is not None:
            self.apart.close()
        shutil.rmtree(self.apart_dir, ignore_errors=True)

    def finding(self, name: str, kind: str, mine: list[Answer]) -> Finding:
        against: Counter = Counter()
        wrong: list[str] = []
        unchecked: Counter = Counter()
        for a in mine:
            verdict, said = self.judge(name, a)
            if verdict == "right":
                against[said] += 1
            elif verdict == "wrong":
                wrong.append(f"Q{a.query} of {a.where}: {said}")
            else:
                unchecked[said] += 1
        compared = sum(against.values()) + len(wrong)
        not_compared = ("; not compared: " + ", ".join(f"{n} {why}" for why, n in unchecked.items())
                        + f" ({self.how_to_compare(unchecked)})") if unchecked else ""
        check = f"{name}: {kind} answers checked at full precision"
        if wrong:
            shown = "; ".join(wrong[:SHOWN_WRONG]) + (f"; and {len(wrong) - SHOWN_WRONG} more" if len(wrong) > SHOWN_WRONG
                                                       else "")
            return Finding(check, False, f"{len(wrong)} of {compared} answers compared are wrong: {shown}{not_compared}")
        detail = (f"{f'{compared} of ' if unchecked else ''}{len(mine)} answer{'s' * (len(mine) != 1)} compared at full "
                  "precision"
                  + (": " + ", ".join(f"{n} against {what}" for what, n in against.items()) if against else "")
                  + not_compared)
        return Finding(check, not unchecked, detail)

    def late_words(self) -> str:
        return f"ran past the {self.timeout_s:g} s query timeout" if self.timeout_s else "ran past the query timeout"

    def how_to_compare(self, unchecked: Counter) -> str:
        if self.late_words() in unchecked:
            return "every answer must be compared: a longer --query-timeout-s lets each query finish"
        return "every answer must be compared"

    def judge(self, name: str, a: Answer) -> tuple[str, str]:
        """("right", what it was compared with) | ("wrong", the difference and against what) | ("unchecked", why)."""
        if a.rows is None:
            return "unchecked", self.late_words()
        if a.data is not None:
            return self.against_reference(a, a.data)
        during = "ran while the refresh stream changed the data"
        verdict, said = self.against_reference(a, LOADED)
        if verdict == "right":
            return "right", f"{said} for the loaded data (these {during})"
        if verdict == "unchecked":
            return "unchecked", f"{during} and {said}"
        states = [s for s in a.could_see if s != LOADED]
        for state in states:
            rows = self.recompute(name, a, state)
            if rows is not None and answers.compare(a.query, a.rows, rows, between_engines=True) is None:
                return "right", f"answers recomputed on {name} for the data a refresh pair's RF1 made (these {during})"
        if not states or any(self.recompute(name, a, s) is None for s in states):
            return "unchecked", f"{during}, differ from the loaded data's answer, and what they saw cannot be recomputed"
        return "wrong", (f"{said}; it {during}, and no answer recomputed for the data it could have seen "
                         f"({', '.join(states)}) matches it either")

    def against_reference(self, a: Answer, data: str) -> tuple[str, str]:
        kept = answers.kept_answer(self.sf, a.query, a.text, data)
        source = f"the answers kept for SF {self.sf:g}"
        if kept is None:
            kept, source = self.computed_apart(a, data), "answers computed apart on the same data (DuckDB)"
            if kept is None:
                return "unchecked", f"had no answer to be compared with ({self.apart_failed})"
        difference = answers.compare(a.query, a.rows, kept, between_engines=True)
        return ("wrong", f"{difference}, against {source}") if difference else ("right", source)

    def computed_apart(self, a: Answer, data: str) -> list[list[str]] | None:
        """The answer to ``a``'s query text on ``data`` from the check's own DuckDB, loaded from the run's generated
        data (a data state with a refresh pair's RF1 rows: inserted in a transaction rolled back after)."""
        key = (a.text, data)
        if key not in self.computed:
            self.computed[key] = None
            if self.apart is None and not self.apart_failed:
                self.apart = self._load_apart()
            if self.apart is not None:
                self.computed[key] = self._asked(self.apart, "duckdb", a.text, answers.rf1_pair(data), None)
        return self.computed[key]

    def _load_apart(self) -> Any:
        from refbench.suites.dss.datagen import TPCH

        if self.data_dir is None:
            self.apart_failed = "the run's generated data is not known"
            return None
        try:
            self.apart_dir.mkdir(parents=True, exist_ok=True)
            engine = open_engine("duckdb", TPCH, Placement(self.apart_dir / "tpch.duckdb"))
            engine.load(Path(self.data_dir), self.sf)
            engine.open()
            return engine
        except Exception as exc:  # noqa: BLE001  any failure here is the check's, said in its finding
            if resource_of(exc):  # a full disk stopped the check, which found nothing wrong: the run stops, resumably
                raise
            self.apart_failed = (f"loading the data into a DuckDB apart failed: "
                                 f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
            return None

    def recompute(self, name: str, a: Answer, state: str) -> list[list[str]] | None:
        """The answer of ``a``'s query on engine ``name`` for the data with refresh pair ``state``'s RF1 rows in it,
        in a transaction that is rolled back; None when it cannot be had (the engine is gone, the time limit)."""
        key = (name, a.text, state)
        if key not in self.recomputed:
            engine, pair = self.engines.get(name), answers.rf1_pair(state)
            rows = None
            if engine is not None and pair is not None:
                try:
                    rows = self._asked(engine, name, a.text, pair, self.timeout_s)
                except QueryTimeout:
                    rows = None
            self.recomputed[key] = rows
        return self.recomputed[key]

    def _asked(self, engine, name: str, text: str, pair: int | None, timeout_s: float | None) -> list[list[str]]:
        """``text``'s answer on ``engine`` (named ``name``) for the loaded data, or with refresh pair ``pair``'s RF1
        rows in it: inserted in a transaction that is rolled back."""
        engine.run("BEGIN")
        try:
            for statement in refresh.rf1_statements(self.sf, pair, name) if pair is not None else []:
                engine.run(statement)
            return answers.as_expected(engine.run(text, timeout_s)[0])
        finally:
            engine.run("ROLLBACK")


def needs_answers_apart(o: dict[str, Any]) -> bool:
    """Whether a run of options ``o`` asks queries refbench keeps no answers for (another scale factor, seed, or more
    streams than the kept sets'), which the check then computes on a DuckDB of its own."""
    sf = o["sf"]
    if sf not in answers.KEPT_SCALE_FACTORS:
        return True
    if "streams" not in o:  # dw: it checks stream 0 alone, whose parameters no seed draws
        return False
    return o.get("seed", 1) != 1 or (o["streams"] or 0) > min_streams(sf)


def answer_check(sf: float) -> str:
    """Which check a run's answers get, in words, for a record's method."""
    apart = "answers computed apart on the same data (the run's data loaded into a DuckDB of the check's own)"
    against = (f"the answers refbench keeps for SF {sf:g} (stream 0, the power stream, throughput streams 1-"
               f"{min_streams(sf)} at seed 1), and where it keeps none against {apart}"
               if sf in answers.KEPT_SCALE_FACTORS else f"{apart} (refbench keeps no answers at SF {sf:g})")
    spec = "; stream 0 also against the TPC-H reference answers by 2.1.3.5's rules" if sf == 1.0 else ""
    return (f"every answer of every stream and repeat at full precision ({answers.AGREEMENT}) against {against}"
            + spec)
