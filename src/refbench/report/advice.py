"""What to try next, per suite and engine: one sentence with the limit the verdict named, the evidence that named it,
and what to try, ending with the command that tries it (`refbench tune … --only` the settings it would try first, or
the measurement to make first when this run cannot rate the storage). The terminal, the report and the dashboard
print the same sentences (verdict.json keeps them).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass
from typing import Any

from refbench.engines.knobs import Knob, evidence, first_trials, host_knobs, trial_order

MEMORY_HIT_RATIO_PCT = 99.0  # the cache answered nearly every read: the figures do not rate the storage
# The host's resources (name_bottleneck without a wait profile) as a limit counted across repeats; a wait profile's
# meanings are said as refbench.report.waits.PHRASES says them.
HOST_LIMITS = {"device": "a saturated device", "cpu": "CPU", "neither": "the load offered", "unknown": "not determined"}
THROTTLED_SHARE = 0.1  # of the server's CPU cgroup's periods: its quota, not the machine, bounds its CPU

# What offers more load, per suite: its option, and the values a second run would try.
MORE_LOAD = {"oltp": ("users", "more virtual users"), "device": ("iodepths", "deeper queues"),
             "dw": ("sessions", "more sessions"), "analytics": ("concurrency", "more jobs at once"),
             "dss": ("streams", "more throughput streams")}
# Limits no setting relieves: what to do instead, in full and in the verdict's few words.
INSTEAD = {"client": ("the load driver could not offer more: give it more CPU, or fewer users per driver process",
                      "give the load driver more CPU"),
           "unseen": ("the server does not say what its sessions waited for: measure again with its sampling on "
                      "(sample_sessions) to name it", "measure again with sample_sessions on"),
           "unknown": ("measure cases of a second or more, which the host's telemetry covers, to name what limits it",
                       "measure cases of a second or more")}
# Waiting for a CPU, by what the interval measured held it (cpu_wait_cause): what to do.
CPU_WAIT = {"quota": ("lift or raise the server's CPU quota, then measure again: tuning a throttled server tunes its "
                      "quota", "lift the server's CPU quota, then measure again"),
            "neighbours": ("measure again on a quiet host: other processes held the CPU the server waited for",
                           "measure again on a quiet host"),
            "cores": ("the server's own threads queue for this host's cores: more cores, or fewer users",
                      "more cores, or fewer users")}
IN_MEMORY = "tuning now tunes an in-memory stack"  # what a figure not measured from the storage makes of a tune
# How a run measures the storage rather than memory, per suite.
RATE_STORAGE = {"oltp": "a cache bound smaller than the database (--cache-mb) or --profile standard",
                "dss": "--profile standard (a scale factor larger than the memory the engines may use)",
                "dw": "--profile standard (a scale factor larger than the memory the engines may use)"}


@dataclass(frozen=True)
class Advice:
    engine: str  # "" for a suite that runs no engines
    limit: str  # the resource that limited it (waits.MEANINGS' words, or device / cpu / neither)
    sentence: str  # the limit, the evidence, what to try
    command: str  # what tries it; "" when there is nothing to run
    short: str = ""  # what to try, in the verdict's few words ("try commit_delay and wal_buffers")

    @property
    def text(self) -> str:
        return f"{self.sentence}: {self.command}" if self.command else self.sentence

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"text": self.text}


@dataclass(frozen=True)
class Reading:
    """What `refbench tune` reads in a run to order its trials (refbench.report.verdict.tune_reading), and the advice
    with it: the engine, the limit the verdict named (``resource``), every limit in tune's order (the wait profile's
    meanings, then the host's resource) and the storage figures of the repeat it was named from."""
    suite: str
    engine: str
    resource: str
    limits: list[str]
    storage: dict[str, Any]

    @property
    def evidence(self) -> dict[str, str]:
        """The server's own counters that point at a setting (refbench.engines.knobs.evidence): PostgreSQL's."""
        return evidence(self.storage) if self.engine == "postgres" else {}

    def trials(self, suite_knobs: list[Knob], host: bool = False) -> list[Knob]:
        """The settings `refbench tune` tries (with --apply-host: ``host``), in its order."""
        extra = host_knobs(self.suite, self.storage.get("device"), writable_only=False) if host else []
        return trial_order(self.suite, self.engine, self.limits, self.evidence, suite_knobs, extra)


def advise(suite: str, reading: Reading, phrase: str, unrated: str, run_path: str, profile: str, first_engine: bool,
           suite_knobs: list[Knob], load_now: int | None = None, warehouses: int | None = None) -> Advice:
    """One sentence for one engine of a suite (or the suite): who, the evidence, "; ", what to try, and a caveat
    after another "; " (`refbench why` says the evidence on its bottleneck lines and reads what to try after it).
    ``first_engine``: the engine whose headline
    `refbench tune --baseline` tunes (the suite's first rated one); another engine is tuned from a run of its own.
    ``load_now``: the load the headline was measured at (its users, queue depth, sessions…); ``warehouses``: oltp's.
    The settings it names are tune's first trials (Reading.trials), in tune's order."""
    engine, resource, storage = reading.engine, reading.resource, reading.storage
    limit_words = limit_name(resource)
    evidence_said = _evidence(phrase, limit_words)
    who = f"{engine}: " if engine else ""
    hit = storage.get("hit_ratio_pct")
    in_memory = unrated or (hit is not None and hit >= MEMORY_HIT_RATIO_PCT)
    caveat = ""
    if in_memory and suite in RATE_STORAGE:
        why = f"not rated at this size ({unrated})" if unrated else f"measured from memory (cache hit ratio {hit:.1f}%)"
        caveat = f"; {why}, so {IN_MEMORY}: to rate the storage first, run refbench {suite} with {RATE_STORAGE[suite]}"
    base = ["refbench", "tune", "--suite", suite]
    base += ["--baseline", run_path] if first_engine else ["--profile", profile] + (
        ["--set", f'{suite}.engines=["{engine}"]'] if engine and suite != "oltp" else [])
    if resource == "cpuwait":
        said, short = CPU_WAIT[cpu_wait_cause(storage.get("machine") or {})[0]]
        return Advice(engine, resource, f"{who}{evidence_said}; {said}{caveat}", "", short)
    if resource in INSTEAD:
        said, short = INSTEAD[resource]
        return Advice(engine, resource, f"{who}{evidence_said}; {said}{caveat}", "", short)
    if resource == "locks" and suite == "oltp" and warehouses:
        return Advice(engine, resource, f"{who}{evidence_said}; spread the users over more warehouses (fewer of them "
                                         f"wait for one row){caveat}", f"refbench oltp --warehouses {warehouses * 4}",
                      "spread the users over more warehouses")
    if resource == "neither" and suite in MORE_LOAD and load_now:
        option, words = MORE_LOAD[suite]
        more = ",".join(str(load_now * k) for k in (2, 4, 8)) if option in ("users", "iodepths") else str(load_now * 2)
        return Advice(engine, resource, f"{who}{evidence_said}; offer {words} to find what saturates first{caveat}",
                      f"refbench {suite} --{option} {more}", f"offer {words}")
    for host in (False, True):  # the engine's settings first; the host's (as root) when none addresses the limit
        if first := first_trials(reading.trials(suite_knobs, host), reading.limits):
            names = " and ".join(_setting(k) for k in first)
            root = " (as root)" if host else ""
            return Advice(engine, resource, f"{who}{evidence_said}; try {names}{root}, since {first[0].why}{caveat}",
                          shlex.join(base + (["--apply-host"] if host else [])),
                          f"try {' and '.join(k.name for k in first)}{root}")
    if resource in ("device", "cpu"):
        what = "a faster device" if resource == "device" else "more or faster cores"
        return Advice(engine, resource, f"{who}{evidence_said}; no setting tune tries relieves it: {what}{caveat}", "",
                      what)
    return Advice(engine, resource, f"{who}{evidence_said}; no setting tune tries relieves it{caveat}", "",
                  "no setting tune tries relieves it")


def limit_name(resource: str) -> str:
    """A resource name_bottleneck names, in the verdict's words: "storage flush latency", "CPU", "a saturated device"."""
    from refbench.report.waits import PHRASES

    return PHRASES.get(resource) or HOST_LIMITS.get(resource, resource)


def _setting(knob: Knob) -> str:
    return f"{knob.name} ({knob.printed_unit})" if knob.printed_unit else knob.name


def _evidence(phrase: str, limit_words: str) -> str:
    """The phrase's first clause without its lists of wait events and samples: "storage flush latency: 51% of
    session time waiting, 0.383 ms per WAL flush on vda (1,295 a second)"."""
    first = phrase.split("; ")[0]
    first = re.sub(r"^in (all \d+|both) repeats, ", "", first)
    # The wait events and sample counts go (the bottleneck line has them); figures such as "(84% busy, queue 15.6)" stay.
    while (shorter := re.sub(r" ?\((?=[^()]*(?:\w:\w|on average|samples))[^()]*\)", "", first)) != first:
        first = shorter
    return first if first.startswith(limit_words) or ":" in first else f"{limit_words}: {first}"


def quota_throttled(machine: dict[str, Any]) -> dict[str, Any]:
    """The server's CPU cgroup throttling (refbench.host.contention) when its quota held it back in THROTTLED_SHARE of
    its periods or more, else {}: then its quota, not the machine, bounded its CPU."""
    throttled = machine.get("server_throttled") or {}
    held = throttled.get("periods") and throttled["throttled_periods"] >= THROTTLED_SHARE * throttled["periods"]
    return throttled if held else {}


def cpu_wait_cause(machine: dict[str, Any]) -> tuple[str, str]:
    """Why the server's sessions waited for a CPU, from what the interval measured: ("quota" | "neighbours" | "cores",
    its words with the figure)."""
    from refbench.formats import fmt
    from refbench.host.contention import DISTURBED_CPU_PCT

    if throttled := quota_throttled(machine):
        quota = f"{fmt(throttled['quota_cpus'])}-CPU " if throttled.get("quota_cpus") else ""
        return "quota", f"its {quota}quota throttled {throttled['throttled_periods']:,} of {throttled['periods']:,} periods"
    if (machine.get("others_pct") or 0) >= DISTURBED_CPU_PCT / 2:
        return "neighbours", f"other processes took {machine['others_pct']:.0f}% of the CPU"
    queued = machine.get("server_runqueue_avg")
    cores = machine.get("cores")
    return "cores", (f"{fmt(queued)} threads queued for {cores} cores" if queued is not None and cores else
                     "this host's cores all busy")
