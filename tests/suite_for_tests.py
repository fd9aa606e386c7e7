"""A small suite defined in the tests, run through the real CLI and runner via REFBENCH_SUITES.

Each case sleeps, writes and fsyncs a little data (so telemetry sees I/O), and logs start/end lines to a
journal in the work directory, so tests can tell which cases were measured, and how often.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from typing import TypedDict

from refbench.plan import Option
from refbench.suites import Case, Chart, Estimate, Finding, Headline, Record, Table
from refbench.tune.knobs import Knob


class SleepyExtra(TypedDict):
    samples: dict[str, list[float]]


class SleepySuite:
    name = "sleepy"
    extra_fields = SleepyExtra
    node_figures = {"ops_per_s": "sum", "lat_ms": "mean"}
    summary = "A test suite: each case sleeps and writes a little."
    options = {
        "cases": Option(int, {"quick": 4, "standard": 8, "full": 16}, "Number of cases.", minimum=1, maximum=1000),
        "sleep_s": Option(float, 0.2, "Seconds each case takes.", minimum=0, maximum=3600, unit="s"),
        "speed": Option(float, 1.0, "Multiplies the throughput figure (to make two runs differ).", minimum=0.001,
                        maximum=1000),
        "fail_check": Option(bool, False, "Make the correctness check fail."),
        "sizes": Option(list, [4096], "Block sizes (bytes).", item=int, minimum=512, maximum=2**30, unit="bytes"),
        "noise_pct": Option(float, 0.0, "Spread of the per-second throughput samples, ± percent.", minimum=0, maximum=50),
        "numbered": Option(bool, False, "Number each case's first measurement as OLTP does (case-000-r1, repeat 1)."),
        "seed": Option(int, 1, "Seed of that noise (two runs with different seeds differ only by noise; 0: a new "
                               "seed each run, as a real measurement's noise).", minimum=0, maximum=2**31 - 1),
        "first_read_mb": Option(float, 0.0, "MB a case's first measurement says it read from storage, as a database's "
                                            "first pass does before its cache holds the data; its repeats read none (a "
                                            "storage figure, as the database suites record one).", minimum=0, maximum=1e6),
    }
    # What refbench tune may try on this suite: a change with a large effect and one with none.
    tune_knobs = [Knob("speed", "option", "", ("neither", "cpu", "device"), "the test's large effect", choices=("2",)),
                  Knob("sleep_s", "option", "", ("neither", "cpu", "device"), "the test's change with no effect",
                       choices=("0.1",))]

    def estimate(self, plan, cases):
        return Estimate(len(cases) * (plan.options[self.name]["sleep_s"] + 0.1), "each case's sleep and a write")

    def cases(self, plan):
        n, numbered = plan.options[self.name]["cases"], plan.options[self.name]["numbered"]
        return [Case(f"case-{i:03d}-r1", {"index": i, "repeat": 1}, f"case {i}") if numbered else
                Case(f"case-{i:03d}", {"index": i}, f"case {i}") for i in range(n)]

    def prepare(self, ctx):
        ctx.state["journal"] = ctx.work_dir / "journal.log"

    def measure(self, ctx, case):
        journal = ctx.state["journal"]
        with open(journal, "a") as f:
            f.write(f"start {case.id}\n")
        t0 = time.perf_counter()
        data = os.urandom(256 * 1024)
        with open(ctx.work_dir / "scratch.bin", "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        slept_until = time.monotonic() + ctx.options["sleep_s"]
        while (left := slept_until - time.monotonic()) > 0:  # figures so far, as a real suite shows them live
            ctx.live(f"{case.title}: {ctx.options['sleep_s'] - left:.0f} s slept so far")
            time.sleep(min(left, 0.5))
        (ctx.raw_dir(case) / "output.txt").write_text(f"raw output of {case.id}\n")
        elapsed = time.perf_counter() - t0
        with open(journal, "a") as f:
            f.write(f"end {case.id}\n")
        i = case.params["index"]
        # Ten "per-second" throughput samples around the figure, as a real suite's records keep them.
        seed = ctx.options["seed"] or f"{ctx.run.path}"
        noise, rng = ctx.options["noise_pct"] / 100, random.Random(f"{seed}:{case.id}")
        samples = [1000.0 * ctx.options["speed"] * (i + 1) * (1 + noise * rng.uniform(-1, 1)) for _ in range(10)]
        extra = {"samples": {"ops_per_s": samples}}
        if read_mb := ctx.options["first_read_mb"]:
            read_mb = read_mb if case.params.get("repeat", 1) == 1 else 0.0
            extra["storage"] = {"engine": "sleepy", "interval_s": elapsed, "server_read_mb": read_mb,
                                "server_read_mb_s": read_mb / elapsed, "server_write_mb_s": 0.0, "device": None}
        return Record(
            metrics={"ops_per_s": statistics.fmean(samples), "lat_ms": 10.0 / ctx.options["speed"],
                     "busy_pct": 50.0, "wall_elapsed_s": elapsed},
            method="slept and wrote 256 KiB with fsync", extra=extra,
        )

    def check(self, ctx):
        from refbench.suites import storage

        storage.say_verdicts(ctx)
        return [Finding("journal written", ctx.state["journal"].exists()),
                Finding("the test's own check", not ctx.options["fail_check"], "fail_check was set" if ctx.options["fail_check"] else "")]

    def summarize(self, records):
        time.sleep(float(os.environ.get("SLEEPY_SUMMARIZE_S", "0")))  # a report long enough to be killed in
        rows = [{"case": r.case_id, "ops_per_s": r.metrics["ops_per_s"], "lat_ms": r.metrics["lat_ms"]} for r in records]
        return [Table("per_case", "Per case", rows, note="synthetic figures")]

    def charts(self, tables):
        rows = tables[0].rows
        return [Chart("ops", "Throughput by case", "case", "ops/s", {"ops": [(r["case"], r["ops_per_s"]) for r in rows]})]

    def headlines(self, records, tables):
        if not records:
            return []
        best = max(records, key=lambda r: r.metrics["ops_per_s"])
        return [Headline("peak throughput", best.metrics["ops_per_s"], "ops/s", best.case_id, "ops_per_s",
                         f"latency {best.metrics['lat_ms']:g} ms", figure=f"ops/s, {best.case_id}")]
