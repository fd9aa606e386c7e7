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

from refbench.engines.knobs import ENGINE_KNOBS, Knob, ranked

MEMORY_HIT_RATIO_PCT = 99.0  # the cache answered nearly every read: the figures do not rate the storage
FIRST_SETTINGS = 2  # settings named in a sentence: the ones tune would try first

# What offers more load, per suite: its option, and the values a second run would try.
MORE_LOAD = {"oltp": ("users", "more virtual users"), "device": ("iodepths", "deeper queues"),
             "dw": ("sessions", "more sessions"), "analytics": ("concurrency", "more jobs at once"),
             "dss": ("streams", "more throughput streams")}
# Limits no setting relieves: what to do instead.
INSTEAD = {"cpuwait": "the server waited for a CPU that other processes or its CPU quota held: measure again on a quiet "
                      "host (or with the quota lifted) before tuning anything",
           "client": "the load driver could not offer more: give it more CPU, or fewer users per driver process",
           "unseen": "the server does not say what its sessions waited for: measure again with its sampling on "
                     "(sample_sessions) to name it",
           "unknown": "measure cases of a second or more, which the host's telemetry covers, to name what limits it"}
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

    @property
    def text(self) -> str:
        return f"{self.sentence}: {self.command}" if self.command else self.sentence

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"text": self.text}


def advise(suite: str, engine: str, resource: str, limit_words: str, phrase: str, storage: dict[str, Any],
           unrated: str, run_path: str, profile: str, first_engine: bool, suite_knobs: list[Knob],
           load_now: int | None = None, warehouses: int | None = None) -> Advice:
    """One sentence for one engine of a suite (or the suite). ``first_engine``: the engine whose headline
    `refbench tune --baseline` tunes (the suite's first rated one); another engine is tuned from a run of its own.
    ``load_now``: the load the headline was measured at (its users, queue depth, sessions…); ``warehouses``: oltp's."""
    evidence = _evidence(phrase, limit_words)
    who = f"{engine}: " if engine else ""
    hit = storage.get("hit_ratio_pct")
    in_memory = unrated or (hit is not None and hit >= MEMORY_HIT_RATIO_PCT)
    caveat = ""
    if in_memory and suite in RATE_STORAGE:
        why = f"not rated at this size ({unrated})" if unrated else f"measured from memory (cache hit ratio {hit:.1f}%)"
        caveat = (f"; {why}, so tuning now tunes an in-memory stack: to rate the storage first, run refbench {suite} "
                  f"with {RATE_STORAGE[suite]}")
    knobs = [k for k in ranked(_knobs(suite, engine, suite_knobs), [resource]) if resource in k.addresses]
    base = ["refbench", "tune", "--suite", suite]
    base += ["--baseline", run_path] if first_engine else ["--profile", profile] + (
        ["--set", f'{suite}.engines=["{engine}"]'] if engine else [])
    if resource in INSTEAD:
        return Advice(engine, resource, f"{who}{evidence}; {INSTEAD[resource]}{caveat}", "")
    if resource == "locks" and suite == "oltp" and warehouses:
        return Advice(engine, resource, f"{who}{evidence}; spread the users over more warehouses (fewer of them wait "
                                         f"for one row){caveat}", f"refbench oltp --warehouses {warehouses * 4}")
    if knobs:
        first = knobs[:FIRST_SETTINGS]
        names = " and ".join(_setting(k) for k in first)
        return Advice(engine, resource, f"{who}{evidence}; try {names}, since {first[0].why}{caveat}",
                      shlex.join(base + ["--only", ",".join(k.name for k in first)]))
    if resource == "neither" and suite in MORE_LOAD:
        option, words = MORE_LOAD[suite]
        more = ",".join(str(load_now * k) for k in (2, 4, 8)) if option in ("users", "iodepths") else str(load_now * 2)
        return Advice(engine, resource, f"{who}{evidence}; offer {words} to find what saturates first{caveat}",
                      f"refbench {suite} --{option} {more}" if load_now else "")
    if resource in ("device", "cpu"):
        what = "a faster device, or the host's I/O settings" if resource == "device" else "more or faster cores, or the host's CPU settings"
        return Advice(engine, resource, f"{who}{evidence}; no {engine or suite} setting tune tries relieves it: "
                                         f"{what} (as root){caveat}", shlex.join(base + ["--apply-host"]))
    return Advice(engine, resource, f"{who}{evidence}; no setting tune tries relieves it{caveat}", "")


def _knobs(suite: str, engine: str, suite_knobs: list[Knob]) -> list[Knob]:
    return [k for k in ENGINE_KNOBS if k.engine == engine and suite in k.suites] + list(suite_knobs)


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
