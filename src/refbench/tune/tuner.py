"""The tune itself: baseline, candidates, trials, search and confirmation (the package's docstring says how)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from refbench.errors import UserError
from refbench.fileio import atomic_write_text, writable_directory, write_private
from refbench.removal import remove_quietly
from refbench.formats import figure_said, fmt
from refbench.options import WEEK_S, amount
from refbench.redaction import redact
from refbench.report.advice import limit_name
from refbench.engines.knobs import setting_said, settings_said
from refbench.timings import duration
from refbench.tune import knobs as K
from refbench.tune.host import HOST_SETTINGS, HostChanges, host_knobs
from refbench.tune.leftovers import (DATA_COPIED, DATA_COPY, DATA_LEFT, DATA_LOADS, DATA_SECOND, hold_alive_lock,
                                     remove_data_of_dead_tunes)
from refbench.tune.server import ServerChanges
from refbench.tune.trials import (Judgement, Objective, SideRun, adjusted_for_trials, interleaved, judge, plan_text,
                                  run_side)

TUNE_DIR = "tune"
CONFIRM_REPEATS = 3
# The confirmation's runs start from copies of this many independently loaded databases (where trial runs start from
# copies of one), each load with both sides: its interval then holds the spread from one load to the next, which a
# single load hides (the default side alone spread 20% across four loads of one oltp configuration).
CONFIRM_LOADS = 2
# A tuning trial of a long profile measures less than a rating run: enough for a steady state, short enough for
# several trials in a working day (the journey says so).
TRIAL_LIMITS = {"oltp": {"rampup_s": 30, "duration_s": 120}, "dw": {"duration_s": 120}}
PLAN_KEYS = ("targets", "work_dir", "engines", "scheduler")
LOADED_SUITES = ("oltp", "dss", "dw")  # a run loads a database (where it is not given one)
WINDOW_KEYS = ("rampup_s", "duration_s")
# A run's own cost beyond its cases' (starting, the host inventory, the report): about 5 s on the 2-core VM.
RUN_OVERHEAD_S = 5.0


@dataclass
class Request:
    suite: str
    profile: str
    budget_s: float
    repeats: int = 3
    points: int = 2
    trials: int = 0  # at most this many trials (0: as many as the budget allows)
    plan_path: str | None = None
    sets: list[str] = field(default_factory=list)
    baseline: str = ""
    runs_dir: str = "runs"
    apply_host: bool = False
    allow_server_changes: bool = False  # a DSN's server: its settings that need no restart
    wal_dir: str = ""  # another device's directory to try the WAL (or redo log) on (oltp, a managed server)
    only: list[str] = field(default_factory=list)  # try only these settings
    seed: int = 1
    dry_run: bool = False  # say the trials, in order, and change or write nothing


@dataclass
class Step:
    """One trial of the journey: a change, why it was tried, its runs and its judgement."""

    change: dict[str, str]  # setting -> value
    kind: str
    why_tried: str
    judgement: Judgement
    runs: list[SideRun]
    kept: bool = False
    paths: tuple[str, ...] = ()  # a host setting's files
    p_all_trials: float | None = None  # its p adjusted for every trial tried (Bonferroni), once the search is over
    multiple_comparisons: str = ""  # when kept: that such an adjustment would not keep it

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"change": self.change, "kind": self.kind, "why_tried": self.why_tried, "kept": self.kept,
                **{k: v for k, v in asdict(self.judgement).items() if k != "kept"}, "paths": list(self.paths),
                "p_all_trials": self.p_all_trials, "multiple_comparisons": self.multiple_comparisons,
                "runs": [asdict(r) for r in self.runs]}


def parse_budget(text: str) -> float:
    """'2h', '90m', '1h30m', '600s', '600' (seconds) -> seconds."""
    m = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?:in)?)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text or "")
    if not text or not m or not any(m.groups()):
        raise UserError(f"--budget {text!r} is not a duration: write it as 2h, 90m, 1h30m or 600s.")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise UserError(f"--budget {text!r} leaves no time to measure anything.")
    if total > WEEK_S:
        raise UserError(f"--budget {text!r} must be at most {amount(WEEK_S, 's')}.")
    return total


class Tuner:
    def __init__(self, request: Request, say: Callable[[str], None]):
        from refbench.plan import Plan, load_plan

        self.request, self.say = request, say
        self.started = time.monotonic()
        self.deadline = self.started + request.budget_s
        given = None
        if request.baseline:
            from refbench.runstore import Run

            given = Run.find(request.baseline, request.runs_dir)
            if request.suite not in given.plan.options:
                raise UserError(f"the baseline {given.path} has no {request.suite} run in it.")
        profile = request.profile or (given.plan.profile if given else "quick")
        plan = load_plan(request.plan_path, flags={"profile": profile}, sets=request.sets, suites=[request.suite])
        self.profile = plan.profile
        self.options = dict(plan.options[request.suite])
        # The plan's own keys that say where and how its runs run (targets, work_dir…): every trial run keeps them,
        # a given baseline's first, this command's plan's over them.
        bare = Plan()
        self.top = {k: getattr(source, k) for source in ([given.plan] if given is not None else []) + [plan]
                    for k in PLAN_KEYS if getattr(source, k) != getattr(bare, k)}
        # What this command sets (a plan, --set), as against the profile's defaults.
        self.chosen = {k for k in self.options if not plan.origins[f"{request.suite}.{k}"].startswith(
            ("default", "profile default"))}
        if given is not None:
            # The baseline's configuration, with what this command sets on top of it.
            chosen = {k: self.options[k] for k in self.chosen}
            self.options = {**given.plan.options[request.suite], **chosen}
            if "data_dir" not in chosen and _tune_copy(self.options.get("data_dir")):
                self.options["data_dir"] = ""  # a tune's copy of its database, gone with that tune
            if given.plan.options[request.suite].get("dsn") and "dsn" not in chosen:
                raise UserError("the baseline ran on your own server (dsn), whose password its run does not keep: "
                                "give the dsn again (--set SUITE.dsn=…).")
        self.server: ServerChanges | None = None
        if self.options.get("dsn"):
            from refbench.engines import engine_for_dsn

            if not request.allow_server_changes:
                raise UserError("this plan names your own server (dsn), whose settings tune changes only with "
                                "--allow-server-changes (those it takes without a restart, each put back after its "
                                "runs); or tune a managed server on the same storage.")
            self.server = ServerChanges(engine_for_dsn(self.options["dsn"]), self.options["dsn"])
        self.host = HostChanges()
        if request.apply_host and not request.dry_run:
            self.host.claim()  # held to the end: no other tune changes the host meanwhile
        known = known_settings(request.suite)
        if unknown := [name for name in request.only if name not in known]:
            raise UserError(f"--only {', '.join(unknown)}: not a setting tune tries for {request.suite}; it tries "
                            f"{', '.join(known)}.")
        if host_only := [name for name in request.only if name in HOST_SETTINGS]:
            if not request.apply_host:
                raise UserError(f"--only {', '.join(host_only)}: a host setting, which tune tries only with "
                                "--apply-host (as root).")
        self.run_wall_s: list[float] = []
        self.durability = ""  # what the baseline's servers traded for speed (read_baseline)
        if (needed := self.smallest_budget_s()) > request.budget_s:  # refused before anything runs or is written
            raise UserError(f"--budget {duration(request.budget_s)} cannot hold {self.budget_words()}: give --budget "
                            f"{math.ceil(needed / 60)}m or more" + ("" if request.baseline else
                                                                  " (or --baseline RUN, a run of the suite you have)") + ".")
        if request.dry_run:
            return
        tunes = Path(request.runs_dir) / TUNE_DIR
        writable_directory(tunes, "the tunes directory")
        remove_data_of_dead_tunes(tunes, lambda line: self.say(line))
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.dir = tunes / f"{stamp}-{request.suite}"
        try:
            self.dir.mkdir(exist_ok=False)
            (self.dir / "runs").mkdir()
        except OSError as exc:
            raise UserError(f"cannot create the tune's directory {self.dir}: {exc.strerror}.") from None
        self._alive = hold_alive_lock(self.dir)
        self.log = self.dir / "tune.log"
        self.template = self.dir / DATA_COPIED if self.copies_data() else None
        self.load_wall_s: float | None = None  # what loading the template took, when a load run made it

        self.steps: list[Step] = []
        self.numbered = 0
        self.journey: dict[str, Any] = {"suite": request.suite, "profile": self.profile, "dir": str(self.dir),
                                        "budget_s": request.budget_s, "repeats": request.repeats, "steps": []}

    # ---- the pieces ---------------------------------------------------------------------------------------------

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def smallest_budget_s(self) -> float:
        """What the baseline (unless one is given) and one trial with its confirmation take, by the suite's own
        estimates (the dry run's) of the profile's run and of a trial's (its headline case alone), each run with
        RUN_OVERHEAD_S more; before the baseline has named its headline case, the trial is the plan's largest."""
        guess = trial_shape(self.request.suite, likely_headline(self.request.suite, self.options), self.options,
                            self.profile, self.chosen)
        run_s = (self.estimated_s({**self.options, **guess}) or 0.0) + RUN_OVERHEAD_S
        self.budget_parts = {"the baseline": 0.0 if self.request.baseline else
                             (self.estimated_s(self.options) or 0.0) + RUN_OVERHEAD_S,
                             "one trial": 2 * self.request.repeats * run_s,
                             "its confirmation": 2 * self.confirm_repeats * run_s}
        return sum(self.budget_parts.values())

    def budget_words(self) -> str:
        """"the baseline (about 31 min), one trial (about 4 min) and its confirmation (about 6 min)"."""
        parts = [f"{what} (about {duration(s)})" for what, s in self.budget_parts.items() if s]
        return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]

    def copies_data(self) -> bool:
        """Whether oltp runs start from copies of one loaded database: a managed server at its default place (a
        target, a work_dir or a data_dir of the user's keeps each run's own load there; a wal_dir's WAL would be one
        for every copy), which can reach the tune's directory."""
        from refbench.engines import get_engine
        from refbench.suites.oltp import engine_name

        if self.request.suite != "oltp" or any(self.options.get(k) for k in ("dsn", "data_dir", "wal_dir", "rebuild",
                                                                              "reload_each_case")) or \
                self.top.get("targets") or self.top.get("work_dir"):
            return False
        return get_engine(engine_name(self.options)).reaches(self.dir)

    def data_for(self, copied: bool, template: Path | None = None) -> tuple[Path | None, float]:
        """The data directory a run starts from, and the seconds it took to make: the template (``template``, else the
        trials' one) itself while it is not loaded yet (the run loads it), else a fresh copy of it, with ownership
        kept and its pages written out and dropped from the page cache, so that the run reads it from storage as
        after a load. None: the run loads its own (no copies, or not ``copied``)."""
        template = template or self.template
        if template is None or not copied:
            return None, 0.0
        if not template.exists():
            template.mkdir()  # made here, so a run takes it as given data and leaves it
            return template, 0.0
        from refbench.host import pagecache

        started = time.monotonic()
        copy = self.dir / DATA_COPY
        remove_quietly(copy)
        # Copied block by block (no reflink: shared extents would be written copy-on-write, another layout than a
        # load's), ownership and modes kept.
        done = subprocess.run(["cp", "-a", "-T", "--reflink=never", str(template), str(copy)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            remove_quietly(copy)
            raise UserError(f"copying the trial runs' database failed: {done.stderr.strip() or done.returncode}.")
        for tree, write_back in ((copy, True), (template, False)):
            pagecache.evict([p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()], write_back=write_back)
        return copy, time.monotonic() - started

    def load_options(self) -> dict[str, Any]:
        """A run that loads the database: the baseline's configuration, measured as a trial is. Its checks must pass
        (a load that breaks the data is no start for a trial), and oltp judges its mix only from enough transactions
        (about 100 at two users): one second was near that here, and likely short of it on a busy CI runner."""
        return {**self.options, **self.shape}

    def load_data(self, template: Path | None = None) -> SideRun:
        """A run that loads the database into ``template`` (default: the trials' one) and measures as a trial, alone:
        for the trials when a given baseline's data went with its run, and the confirmation's second, independent
        load. Its time is not a trial run's."""
        template = template or self.template
        self.say("loading the database every trial run starts from a copy of" if template == self.template else
                 f"loading the database again, independently, for the confirmation ({template.name})")
        label = "load" if template == self.template else f"load-{len(self.journey.get('loads', [])) + 1}"
        result = self.run_once(label, self.load_options(), {}, "A", judged=False, template=template)
        self.run_wall_s.pop()
        if not result.error:
            self.load_wall_s = max(self.load_wall_s or 0.0, result.wall_s)
        elif template == self.template:
            raise UserError(f"loading the trial runs' database failed: {result.error} (its output: {self.log}).")
        return result

    def run_once(self, label: str, options: dict[str, Any], outside: dict[str, tuple[K.Knob, str]], side: str,
                 judged: bool = True, copied: bool = True, template: Path | None = None) -> SideRun:
        """One run of ``options``, with the host's and a DSN server's settings of ``outside`` changed around it;
        ``judged``: its objective read (not for a run that only loads); ``copied``: from a copy of the loaded
        database (``template``, else the trials' one) where tune keeps one."""
        self.numbered += 1
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{self.numbered:03d}-{label}")[:60]
        plan = self.dir / "runs" / f"{name}.toml"
        template = template or self.template
        data, copying_s = self.data_for(copied, template)
        if data is not None:
            options = {**options, "data_dir": str(data)}
        text = plan_text(self.profile, self.request.suite, options, top=self.top)
        if self.server is not None:  # the plan holds the DSN: private, and gone once its run has read it
            write_private(plan, text)
        else:
            atomic_write_text(plan, text)
        try:
            for knob, value in outside.values():
                if knob.kind == "host":
                    self.host.apply(knob, value)
                else:
                    self.server.apply(knob.name, value)
            result = run_side(plan, self.dir / "runs", name, self.log,
                              getattr(self, "objective", None) if judged else None, side,
                              live=lambda line: self.say(f"    {side}: {line}"))
        finally:
            if any(knob.kind == "host" for knob, _ in outside.values()):
                self.host.restore()
            if self.server is not None:
                plan.unlink(missing_ok=True)
                if outside:
                    self.server.restore()
            if data is not None and data != template:
                remove_quietly(data)
        if data is not None and data != template:
            result.load = str(template)
        self.run_wall_s.append(result.wall_s + copying_s)
        return result

    def options_for(self, config: dict[str, tuple[K.Knob, str]]) -> tuple[dict[str, Any], dict[str, tuple[K.Knob, str]]]:
        """The plan options of a configuration (the baseline's, with ``config`` on top), and the settings changed
        outside the plan around its runs: the host's, and a DSN server's."""
        options = {**self.options, **self.shape}
        if self.server is None:
            engine_changes = {name: value for name, (knob, value) in config.items() if knob.kind == "engine"}
            options = K.with_settings(self.request.suite, self.engine, options, engine_changes)
        for name, (knob, value) in config.items():
            if knob.kind == "option":
                options[name] = K.option_value(value)
        outside = {name: kv for name, kv in config.items()
                   if kv[0].kind == "host" or (kv[0].kind == "engine" and self.server is not None)}
        return options, outside

    def another_trial_fits(self) -> bool:
        """A trial and the confirmation (its second load included) fit in what is left of the budget, and --trials
        allows one more."""
        if self.request.trials and len(self.steps) >= self.request.trials:
            return False
        return self.left_s() >= self.trial_cost_s() + self.confirm_cost_s()

    def stop_words(self, name: str) -> str:
        """Why the trial of ``name`` did not start: --trials, or what it and the confirmation needed against what
        was left of the budget."""
        if self.request.trials and len(self.steps) >= self.request.trials:
            return f"--trials {self.request.trials} reached before {name}"
        return (f"{name}'s trial and the confirmation needed about {duration(self.trial_cost_s() + self.confirm_cost_s())}"
                f", {duration(max(0.0, self.left_s()))} of the budget was left")

    @property
    def confirm_repeats(self) -> int:
        """The confirmation measures at least three runs a side: with two, the pooled test has two degrees of freedom
        (a dss confirmation of +28%, every B run above every A run, gave p 0.12 with two a side)."""
        return max(CONFIRM_REPEATS, self.request.repeats)

    def trial_cost_s(self, repeats: int = 0) -> float:
        per_run = max(self.run_wall_s[1:] or self.run_wall_s or [60.0])  # the first: the baseline's, scaled
        return 2 * (repeats or self.request.repeats) * per_run

    def confirm_cost_s(self, window: dict[str, Any] | None = None) -> float:
        """The confirmation: its runs (at the trials' window, or ``window`` scaled by the suite's own estimates) and
        the loads it makes besides the trials' one."""
        runs = self.trial_cost_s(self.confirm_repeats)
        if window:
            trial = self.estimated_s({**self.options, **self.shape})
            longer = self.estimated_s({**self.options, **self.shape, **window})
            runs *= longer / trial if trial and longer else math.inf
        return runs + (CONFIRM_LOADS - 1) * self.load_cost_s() if self.template is not None else runs

    def load_cost_s(self) -> float:
        """One more load of the database: what the load run took, else the suite's own estimate of one, else a
        trial run's time."""
        if self.load_wall_s:
            return self.load_wall_s
        return self.estimated_s(self.load_options()) or max(self.run_wall_s or [60.0])

    def estimated_s(self, options: dict[str, Any]) -> float | None:
        """What the suite's own estimate (the one --dry-run quotes) says a run of ``options`` takes."""
        from refbench.plan import Plan
        from refbench.suites import get_suite

        suite = get_suite(self.request.suite)
        plan = Plan(profile=self.profile, suites=[suite.name], repeats=1, options={suite.name: dict(options)})
        try:
            return suite.estimate(plan, suite.cases(plan)).seconds if hasattr(suite, "estimate") else None
        except Exception:  # an estimate is a convenience: without one, the baseline's own time is the guess
            return None

    def ab(self, label: str, a: dict[str, tuple[K.Knob, str]], b: dict[str, tuple[K.Knob, str]],
           repeats: int = 0, window: dict[str, Any] | None = None,
           loads: list[Path] | None = None) -> tuple[list[SideRun], Judgement]:
        """A B B A …, ``repeats`` runs a side (default --repeats), with ``window`` over the trials' options; where runs
        start from copies, the pairs of each A B B A go to one of ``loads`` in turn (default: the trials' one), so
        that every load has both sides alike."""
        configs = {side: self.options_for(config) for side, config in (("A", a), ("B", b))}
        configs = {side: ({**options, **(window or {})}, outside) for side, (options, outside) in configs.items()}
        copied = self.copied(a, b)
        loads, repeats = loads or [self.template], repeats or self.request.repeats

        def run(side: str, i: int) -> SideRun:  # the pairs in even runs of loads: 3 over 2, A B B A | A B
            template = loads[(i - 1) * len(loads) // repeats]
            result = self.run_once(f"{label}-{side}{i}", *configs[side], side, copied=copied, template=template)
            unit = self.objective.unit if getattr(self, "objective", None) else ""
            said = result.error or (f"{fmt(result.value)} {unit}".rstrip() if result.value is not None else "done")
            self.say(f"  {side}{i}: {said} in {duration(result.wall_s)}"
                     + (f"; disturbed: {result.disturbed}" if result.disturbed else ""))
            return result
        runs = interleaved(repeats, run, again=lambda disturbed: self.left_s() > 2 * disturbed.wall_s)
        return runs, judge(self.objective.metric, runs)

    def copied(self, *configs: dict[str, tuple[K.Knob, str]]) -> bool:
        """Whether the runs of these configurations start from copies of a loaded database: not when there is none,
        nor for a WAL placed elsewhere, which needs a database made for it (both sides then load their own, alike)."""
        return self.template is not None and \
            not any(knob.name == "wal_dir" for config in configs for knob, _ in config.values())

    # ---- the tune -------------------------------------------------------------------------------------------------

    def read_baseline(self, run: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """What the baseline run says: its verdict and the headline tuned for (the first rated one), and what limits it
        (what the verdict's advice read too: the trials it names are the first of candidates()), and the durability
        its servers traded for speed, which every trial keeps."""
        from refbench.report.verdict import durability, tune_reading_of

        verdict = next((v for v in run.verdicts() if v.get("suite") == self.request.suite), None)
        headline = next((h for h in (verdict or {}).get("headlines", []) if h.get("case") and not h.get("unrated")), None)
        if headline is None:
            raise UserError(f"the baseline {run.path} has no rated {self.request.suite} headline figure to tune for.")
        self.objective = Objective(self.request.suite, headline["metric"], headline.get("of", ""), headline["label"],
                                   headline["unit"])
        reading = tune_reading_of(run, self.request.suite, headline["case"])
        self.durability = durability(run, self.request.suite, run.records(self.request.suite))
        self.storage = reading.storage
        self.engine = self.server.engine if self.server else reading.engine
        self.limits = reading.limits
        self.evidence = reading.evidence
        return verdict, headline

    def baseline(self) -> None:
        from refbench.runstore import Run

        if self.request.baseline:
            run = Run.find(self.request.baseline, self.request.runs_dir)
            self.say(f"baseline: {run.path} (given)")
            started, ended = (run.meta.get(k) for k in ("started_utc", "ended_utc"))
            if started and ended:
                self.run_wall_s.append((datetime.fromisoformat(ended.replace("Z", "+00:00")) -
                                        datetime.fromisoformat(started.replace("Z", "+00:00"))).total_seconds())
        else:
            self.say(f"baseline: refbench {self.request.suite} --profile {self.profile} (log: {self.log})")
            result = self.run_once("baseline", self.options, {}, "A")
            if result.error:
                raise UserError(f"the baseline run failed: {result.error} (its output: {self.log}).")
            run = Run(Path(result.run))
        verdict, headline = self.read_baseline(run)
        if self.durability:
            self.journey["durability"] = self.durability
            self.say(K.durability_kept(self.durability))
        record = next(r for r in run.records(self.request.suite) if r.case_id == headline["case"])
        self.shape = trial_shape(self.request.suite, record.params, self.options, self.profile, self.chosen)
        # What the profile measures where a trial measures less (the answer is quoted for the profile's window).
        self.full_window = {k: self.options[k] for k in TRIAL_LIMITS.get(self.request.suite, {})
                            if k in self.shape and self.shape[k] != self.options.get(k)}
        if self.request.baseline and self.template is not None:
            self.load_data()
        if self.run_wall_s:  # the whole suite's time: scaled to one trial run's by the suite's own estimates
            whole, trial = self.estimated_s(self.options), self.estimated_s({**self.options, **self.shape})
            if whole and trial:
                self.run_wall_s = [self.run_wall_s[0] * trial / whole]
        self.journey |= {"baseline": str(run.path), "objective": {"label": headline["label"], "metric": headline["metric"],
                                                                  "unit": headline["unit"], "value": headline["value"]},
                         "bottleneck": verdict.get("bottleneck", ""), "limits": self.limits, "engine": self.engine,
                         "evidence": self.evidence,
                         "trial_options": self.shape, "plan_keys": self.top,
                         "data": (f"each trial run started from a copy of the database "
                                  f"{'a load run' if self.request.baseline else 'the baseline'} loaded (and ran), its "
                                  f"pages dropped from the page cache; the confirmation's from copies of "
                                  f"{CONFIRM_LOADS} independently loaded databases, that one and {CONFIRM_LOADS - 1} "
                                  "more loaded alone for it" if self.template is not None else
                                  "each run loaded its own database"),
                         "base_options": {**self.options, **({"dsn": redact(self.options["dsn"])} if self.server else {})},
                         "server": redact(self.options["dsn"]) if self.server is not None else ""}
        self.say(f"tuning for {headline['label']}: {_figure(headline)}; limited by "
                 f"{verdict.get('bottleneck', 'unknown')}")

    def candidates(self) -> list[K.Knob]:
        from refbench.suites import get_suite

        suite = self.request.suite
        extra = []
        if self.request.wal_dir and suite == "oltp" and self.server is None:
            extra.append(K.placement(self.request.wal_dir))
        if self.request.apply_host:
            extra += host_knobs(suite, self.storage.get("device"))
        found = K.trial_order(suite, self.engine, self.limits, self.evidence,
                              list(getattr(get_suite(suite), "tune_knobs", [])), extra)
        if self.server is not None:  # a DSN's server: what it takes without a restart, at its own current values
            self.settings = self.server.changeable([k.name for k in found if k.kind == "engine"])
            found = [k for k in found if k.kind != "engine" or k.name in self.settings]
        if self.request.only:
            found = [k for k in found if k.name.split(" (")[0] in self.request.only]
        return found

    def dry_run_lines(self) -> list[str]:
        """The trials this tune would run, in its order, from what limits the baseline (--baseline) or, before a
        baseline has run, in the catalog's order: `refbench tune --dry-run`."""
        from refbench.runstore import Run

        suite = self.request.suite
        if self.request.baseline:
            run = Run.find(self.request.baseline, self.request.runs_dir)
            _, headline = self.read_baseline(run)
            said = ", ".join(dict.fromkeys(limit_name(limit) for limit in self.limits))
            lines = [f"tune {suite} for {headline['label']} ({_figure(headline)}) from {run.path}, "
                     f"limited by {said}; the trials, in order:"]
            if self.durability:
                lines.insert(0, K.durability_kept(self.durability))
        else:
            from refbench.report.verdict import default_engine

            self.engine = default_engine(suite, self.options)
            self.limits, self.evidence, self.storage = [], {}, {}
            lines = [f"tune {suite}: the baseline run names what limits it, and the trials go in that order; in the "
                     "catalog's order, they are:"]
        order = self.candidates()
        first = K.first_trials(order, self.limits)
        for i, knob in enumerate(order, 1):
            why = f" (evidence: {self.evidence[knob.name]})" if knob.name in self.evidence else ""
            lines.append(f"{i:>3}. {knob.name}: addresses {', '.join(limit_name(a) for a in knob.addresses)}{why}"
                         + ("  ← what limits it" if i <= len(first) else ""))
        if not order:
            lines.append("  none: no setting tune tries fits these flags")
        lines.append(f"each an A/B trial, {self.request.repeats} runs a side, while --budget {duration(self.request.budget_s)} "
                     f"lasts (it needs {self.budget_words()} at least)")
        return lines

    def tune(self) -> dict[str, Any]:
        from refbench.children import watchdog

        # The loaded database and its copy go at the end, and with refbench's watchdog if tune is killed (after the
        # run using them has stopped: run_side registers each run after this); with both killed, at the next tune or
        # clean --all-work (remove_data_of_dead_tunes).
        data = [self.dir.absolute() / name for name in DATA_LEFT]
        guard = watchdog().register(remove=data) if self.template is not None else None
        try:
            return self._tune()
        except KeyboardInterrupt:
            self.journey["answer"] = "interrupted: the trials so far are below; no tuned profile"
            self.journey.setdefault("confirmed", None)
            self.save()
            self.remove_work_left()
            raise
        finally:
            if guard is not None:
                for path in data:
                    remove_quietly(path)
                guard.release()

    def remove_work_left(self) -> None:
        """The run an interrupt stopped kept its data for a resume that tune never makes: it goes (its records and
        log stay)."""
        from rich.console import Console

        from refbench.runner import clean
        from refbench.runstore import list_runs

        clean(list_runs(self.dir / "runs"), Console(stderr=True, highlight=False), each=True)

    def _tune(self) -> dict[str, Any]:
        if self.profile == "quick" and self.request.suite in LOADED_SUITES and not self.request.baseline:
            self.journey["scope"] = (f"the quick profile measures {self.request.suite} from memory (small data, no cache "
                                     "bound), so this tunes the stack as it runs in memory, not its storage; to tune for "
                                     "the storage: --profile standard, or --baseline a run that rated it")
            self.say(self.journey["scope"])
        self.baseline()
        self.settings = K.engine_settings(self.request.suite, self.engine, self.options)
        kept: dict[str, tuple[K.Knob, str]] = {}
        untried = []
        candidates = self.candidates()
        if not candidates:
            self.journey |= {"untried": [], "kept": {}, "confirmed": None,
                             "answer": f"keep the defaults: {self.request.suite} has no engine setting refbench tunes"
                                       + ("" if self.request.apply_host else "; --apply-host tries host settings")}
            self.save()
            return self.journey
        for knob in candidates:
            if not self.another_trial_fits():  # this trial and the confirmation
                if not untried:
                    self.journey["stopped"] = self.stop_words(knob.name)
                untried.append(knob.name)
                continue
            current = K.current_value(knob, self.settings) if knob.kind == "engine" else _option_or_host_value(knob, self.options)
            if knob.numeric:
                self.search(knob, current, kept)
            else:
                for value in knob.choices:
                    if K.same_value(knob, value, current) or not self.another_trial_fits():
                        continue
                    if self.step(knob, value, kept):
                        break
            self.save()
        self.journey["untried"] = untried
        self.journey["kept"] = {name: value for name, (_, value) in kept.items()}
        self.adjust_for_trials()
        self.confirm(kept)
        self.save()
        return self.journey

    def step(self, knob: K.Knob, value: str, kept: dict[str, tuple[K.Knob, str]]) -> Judgement:
        label = setting_said(knob.name, value)
        addressed = next((limit for limit in self.limits if limit in knob.addresses), "")
        why = f"addresses {limit_name(addressed)}: {knob.why}" if addressed else knob.why
        if knob.name in self.evidence:
            why = f"{self.evidence[knob.name]}; {why}"
        self.say(f"trial {len(self.steps) + 1}: {label} — {why}")
        runs, judgement = self.ab(label, dict(kept), {**kept, knob.name: (knob, value)})
        if runs and runs[0].error and runs[0].side == "A":
            raise UserError(f"a run of the configuration kept so far failed: {runs[0].error} (its output: {self.log}).")
        step = Step({knob.name: value}, knob.kind, why, judgement, runs, judgement.kept, knob.paths)
        self.steps.append(step)
        if judgement.kept:
            kept[knob.name] = (knob, value)
        self.say(f"  {'kept' if judgement.kept else 'dropped'}: {judgement.why}")
        return judgement

    def search(self, knob: K.Knob, current: str, kept: dict[str, tuple[K.Knob, str]]) -> None:
        """A numeric knob: Optuna's TPE sampler proposes values on a log scale, the first the rule of thumb; each
        an A/B trial against the configuration so far; the best that was kept stays."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        low, high = K.search_range(knob, K.memory_mb(self.storage), os.cpu_count() or 1)
        study = optuna.create_study(direction="maximize",
                                    sampler=optuna.samplers.TPESampler(seed=self.request.seed, n_startup_trials=1))
        study.enqueue_trial({knob.name: min(high, max(low, first_guess(knob, low, high, self.storage)))})
        best: tuple[float, str] | None = None
        tried = [n for n in (K.number(current),) if n]
        points, asked = 0, 0
        while points < self.request.points and asked < 20 * self.request.points:
            if not self.another_trial_fits():
                break
            trial, asked = study.ask(), asked + 1
            number = trial.suggest_float(knob.name, low, high, log=True)
            # A value within 25% of one already measured would measure the same thing again.
            if any(abs(math.log(number / t)) < math.log(1.25) for t in tried if t > 0):
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                continue
            value = knob.value_text(number)
            tried.append(number)
            points += 1
            kept_before = dict(kept)
            judgement = self.step(knob, value, kept_before)
            gain = judgement.gain_pct
            study.tell(trial, gain if gain is not None else None,
                       state=optuna.trial.TrialState.COMPLETE if gain is not None else optuna.trial.TrialState.FAIL)
            if judgement.kept and (best is None or gain > best[0]):
                best = (gain, value)
        if best is not None:
            kept[knob.name] = (knob, best[1])
            for step in self.steps:  # of this knob's trials, only the best value stays kept
                if knob.name in step.change:
                    step.kept = step.change[knob.name] == best[1]

    def adjust_for_trials(self) -> None:
        """Each trial is judged alone at p < 0.05; over many trials some pass by chance. The journey says which kept
        trial a Bonferroni adjustment for every trial tried would not keep (the confirmation decides in the end)."""
        for step, (adjusted, note) in zip(self.steps, adjusted_for_trials([s.judgement for s in self.steps],
                                                                          [s.kept for s in self.steps])):
            step.p_all_trials, step.multiple_comparisons = adjusted, note
        kept = [s for s in self.steps if s.kept]
        weak = [s for s in kept if s.multiple_comparisons]
        if len(self.steps) > 1 and kept:
            self.journey["multiple_comparisons"] = (
                f"{len(weak)} of the {len(kept)} kept trial(s) would not be kept after adjusting for the "
                f"{len(self.steps)} trials tried (Bonferroni); the confirmation decides" if weak else
                f"the {len(kept)} kept trial(s) hold after adjusting for the {len(self.steps)} trials tried (Bonferroni)")

    def confirm(self, kept: dict[str, tuple[K.Knob, str]]) -> None:
        """The kept set against the baseline's configuration in fresh runs, A B B A, at least three a side; where runs
        start from copies of a loaded database, spread over CONFIRM_LOADS independent loads (a second made now,
        alone), each with both sides. At the window the answer is quoted for (the profile's) when it fits what is left
        of the budget, else at the trials' window, and the answer says which."""
        if not kept:
            self.journey["answer"] = nothing_kept(len(self.steps), self.journey.get("untried") or [])
            self.journey["confirmed"] = None
            return
        label = settings_said({n: v for n, (_, v) in kept.items()})
        window = self.full_window if self.full_window and self.left_s() >= self.confirm_cost_s(self.full_window) else {}
        loads, failed = [self.template], ""
        if self.copied(kept):
            self.journey["loads"] = [str(self.template)]
            second = self.load_data(self.dir / DATA_SECOND)
            if second.error:
                failed = f"a second load failed: {second.error}"
            else:
                loads.append(self.dir / DATA_SECOND)
                self.journey["loads"].append(str(loads[-1]))
        self.say(f"confirming against the baseline's configuration: {label}")
        runs, judgement = self.ab("confirm", {}, kept, self.confirm_repeats, window, loads)
        design = self.confirmation_words(runs, window, failed)
        measured = {**self.options, **self.shape, **window}
        self.journey["confirmation"] = {**Step({n: v for n, (_, v) in kept.items()}, "all", "the kept set", judgement,
                                               runs, judgement.kept).to_dict(), "design": design,
                                        "window": {k: measured[k] for k in WINDOW_KEYS if k in measured},
                                        "profile_window": not self.full_window or bool(window)}
        self.journey["confirmed"] = judgement.kept
        self.journey["answer"] = (f"{label}: {judgement.why}; {design}" if judgement.kept else
                                  f"keep the defaults: the kept set ({label}) was not confirmed ({judgement.why}; "
                                  f"{design})")

    def confirmation_words(self, runs: list[SideRun], window: dict[str, Any], failed: str = "") -> str:
        """How the confirmation measured: over how many independent loads, how many runs a side, over which window."""
        per_side = min(sum(r.side == s and r.value is not None for r in runs) for s in "AB")
        own = f"{per_side} run{'s' if per_side != 1 else ''} a side"
        loads = {r.load for r in runs if r.load}
        if loads:
            words = f"over {len(loads)} independent load{'s' if len(loads) > 1 else ''}, {own}"
            if failed:
                words += f" ({failed}: load-to-load spread not covered)"
        elif self.request.suite in LOADED_SUITES and (self.options.get("dsn") or any(
                _holds_something(self.options.get(k)) for k in ("data_dir", "pg_data_dir"))):
            words = f"{own}, on the database you gave, loaded once (load-to-load spread not covered)"
        elif self.request.suite in LOADED_SUITES:
            words = f"over {len(runs)} independent loads (each run loaded its own), {own}"
        else:
            words = own
        measured = window_words({**self.options, **self.shape, **window})
        if not measured:
            return words
        if not self.full_window:
            return f"{words}, measured over {measured} as the baseline and the trials were"
        if window:
            return (f"{words}, measured over {measured} as the baseline was (the trials measured "
                    f"{window_words({**self.options, **self.shape})})")
        return (f"{words}, measured over {measured} as the trials were: the baseline's {window_words(self.options)} "
                "did not fit in what was left of the budget")

    def save(self) -> None:
        import json

        self.journey["steps"] = [s.to_dict() for s in self.steps]
        self.journey["elapsed_s"] = round(time.monotonic() - self.started, 1)
        atomic_write_text(self.dir / "tune.json", json.dumps(self.journey, indent=1))


def trial_shape(suite: str, params: dict[str, Any], options: dict[str, Any], profile: str,
                chosen: set[str] = frozenset()) -> dict[str, Any]:
    """The suite narrowed to its headline case: what every trial runs. A long profile's ramp-up and measurement are
    capped (TRIAL_LIMITS), unless the command set them (``chosen``)."""
    shape: dict[str, Any] = {}
    if suite == "oltp" and "users" in params:
        # The baseline's warehouses, not a count chosen again from the free space (a copy of the database takes some).
        shape |= {"users": [params["users"]], **({"warehouses": params["warehouses"]} if "warehouses" in params else {})}
    elif suite == "dss" and "engine" in params:
        shape |= {"engines": [params["engine"]], "modes": [params.get("mode", "power")]}
    elif suite == "dw" and "engine" in params:
        shape["engines"] = [params["engine"]]
    elif suite == "device" and params.get("kind") == "point":
        shape |= {"block_sizes": [params["bs"]], "iodepths": [params["iodepth"]], "patterns": [params["pattern"]],
                  "write_shares": [params["write_pct"]], "checks": False}
    if profile != "quick":
        for key, most in TRIAL_LIMITS.get(suite, {}).items():
            if key in options and key not in chosen:
                shape[key] = min(options[key], most)
    return {k: v for k, v in shape.items() if k in options}


def nothing_kept(tried: int, untried: list[str]) -> str:
    """The answer when no change is kept: none tried was significantly better, or none was tried at all."""
    if tried:
        return "keep the defaults: no change tried made it significantly better"
    return (f"keep the defaults: nothing was tried ({len(untried)} setting{'s' if len(untried) != 1 else ''} untried: "
            "the budget or --trials ran out before the first trial)")


def likely_headline(suite: str, options: dict[str, Any]) -> dict[str, Any]:
    """The params of the case a suite's headline most likely comes from, before a baseline names it: the most users,
    the first engine's power stream, the deepest queue of the first block size."""
    first = lambda key: (options.get(key) or [None])[0]  # noqa: E731
    if suite == "oltp":
        return {"users": max(options.get("users") or [1]), "warehouses": options.get("warehouses")}
    if suite in ("dss", "dw"):
        return {"engine": first("engines"), "mode": "power"}
    if suite == "device":
        return {"kind": "point", "bs": first("block_sizes"), "iodepth": max(options.get("iodepths") or [1]),
                "pattern": first("patterns"), "write_pct": first("write_shares")}
    return {}


def first_guess(knob: K.Knob, low: float, high: float, storage: dict[str, Any]) -> float:
    """The rule of thumb a DBA starts from: a quarter of the host's memory for shared_buffers (pgtune), but most of a
    cache bound (the page cache beside it would only hold the same pages twice); most of the memory for InnoDB's
    buffer pool; half the measured WAL flush time for commit_delay; room for twice a checkpoint_timeout's WAL at the
    measured rate for max_wal_size…"""
    io = storage.get("io_latency") or {}
    per_flush_ms, wal_rate = io.get("ms_per_flush"), io.get("wal_mb_per_s")
    bounded = bool((storage.get("bound") or {}).get("bound_mb"))
    guesses = {"shared_buffers": high if bounded else high / 3, "innodb_buffer_pool_size": high, "memory_limit": high,
               "commit_delay": per_flush_ms * 500 if per_flush_ms else 100,
               # room for a checkpoint_timeout's (5 min) WAL twice over: checkpoints come by the clock, spread out
               "max_wal_size": 2 * 300 * wal_rate if wal_rate else 4096, "work_mem": 256,
               "innodb_log_file_size": 4096, "innodb_io_capacity": 2000, "threads": os.cpu_count() or 2}
    return float(guesses.get(knob.name, math.sqrt(low * high)))


def _option_or_host_value(knob: K.Knob, options: dict[str, Any]) -> str:
    if knob.kind == "option":
        return str(options.get(knob.name, ""))
    from refbench.tune.host import setting_value, sysroot

    return setting_value(sysroot(), knob.paths[0]) if knob.paths else ""


def known_settings(suite: str) -> list[str]:
    """Every setting name tune may try for ``suite`` (which it offers depends on the engine, the host and the flags)."""
    from refbench.suites import get_suite
    from refbench.tune.host import HOST_SETTINGS

    names = [k.name for k in K.ENGINE_KNOBS if suite in k.suites]
    names += [k.name for k in getattr(get_suite(suite), "tune_knobs", [])]
    return list(dict.fromkeys(names + (["wal_dir"] if suite == "oltp" else []) + list(HOST_SETTINGS)))


def _tune_copy(data_dir: str | None) -> bool:
    """Whether ``data_dir`` is one a tune gave its runs: one of its loaded databases or a copy."""
    path = Path(data_dir or "")
    return bool(data_dir) and path.name in (*DATA_LOADS, DATA_COPY) and path.parent.parent.name == TUNE_DIR


def _holds_something(directory: str | None) -> bool:
    try:
        return bool(directory) and any(Path(directory).iterdir())
    except OSError:
        return False


def window_words(options: dict[str, Any]) -> str:
    """The window a run measures, in words ("60 s warm-up + 300 s"); "" for a suite without one."""
    if "duration_s" not in options:
        return ""
    ramp = options.get("rampup_s")
    return (f"{ramp:g} s warm-up + " if ramp is not None else "") + f"{options['duration_s']:g} s"


def _figure(headline: dict[str, Any]) -> str:
    """A verdict's headline as every surface says it (formats.figure_said), its range left to the verdict."""
    return figure_said(headline["value"], headline["unit"], headline.get("low"), headline.get("high"), with_range=False)


def summary_lines(journey: dict[str, Any]) -> list[str]:
    """The journey in the terminal's words: every trial, its effect and whether it was kept, then the answer."""
    lines = []
    for i, step in enumerate(journey.get("steps", []), 1):
        change = settings_said(step["change"])
        note = f"; {step['multiple_comparisons']}" if step.get("multiple_comparisons") else ""
        lines.append(f"{i:>2}. {change:<40} {'kept   ' if step['kept'] else 'dropped'} {step['why']}{note}")
    if journey.get("multiple_comparisons"):
        lines.append(f"multiple comparisons: {journey['multiple_comparisons']}")
    if journey.get("untried"):
        lines.append(f"not tried: {', '.join(journey['untried'])} ({journey.get('stopped') or 'the budget ran out'})")
    runs = [r for step in journey.get("steps", []) + [journey.get("confirmation") or {}] for r in step.get("runs", [])]
    if disturbed := [r for r in runs if r.get("disturbed")]:
        again = sum(bool(r.get("run_again")) for r in runs)
        lines.append(f"disturbed: {len(disturbed)} of {len(runs)} runs measured neighbours as much as the change"
                     + (f"; {again} of them run again, the disturbed ones not judged" if again else "; all judged"))
    if journey.get("durability"):
        lines.append(K.durability_kept(journey["durability"]))
    lines.append(f"answer: {journey.get('answer', 'none')}")
    lines.append(f"tuned plan: {Path(journey['dir']) / 'tuned-plan.toml'}; the journey: {Path(journey['dir']) / 'report.html'}")
    return lines


