"""The runs catalog at scale: 1,000 run directories, and how long the catalog, `refbench runs`, `refbench history`
and every page of `refbench serve` take over them.

The runs are copies of real ones. Once, the benchmark makes a few real quick runs (`refbench device`, `refbench
oltp` and `refbench run --suite device --suite oltp`, about 3 minutes, kept in DIR/sources for the next time); then it
copies them into DIR/runs with varied names, start times (spread over seven months), hosts, tags (tags.json) and
figures: every throughput figure of the records and headlines is multiplied, and every latency divided, by a factor
that grows with the firmware tag and differs by host, with a few percent of noise, so that trends have a shape.
What a copy does not change (raw output, charts, tables, report.html, telemetry) is hard-linked to the source, so
1,000 runs take about 340 MB.

Measured, each --repeats times in rounds (one of each per round, so that a neighbour's burst spreads over all):
  build           Catalog(runs).update() in this process, with no catalog file: indexing every run from nothing
  no change       Catalog(runs).update() when nothing changed
  one new run     Catalog(runs).update() after one new run directory appeared (the scan of the others included)
  index one run   Catalog(runs).index(run), what the runner does as a run ends
  runs            `refbench runs --runs-dir RUNS` (all, the newest 50, filtered, --json), the CLI end to end as a
                  subprocess, beside `refbench --version` (the floor under every command)
  history         `refbench history oltp.nopm --runs-dir RUNS` (and --json), when the checkout has the command
  damaged         `refbench runs` once after the page of the catalog's runs table was overwritten (the catalog
                  rebuilt from the run directories)
  serve           GET of every page of `refbench serve --runs-dir RUNS` (a subprocess on a loopback port), when the
                  checkout has the command: the runs list (newest, all, filtered, with the most tag filters a query
                  takes), a run's report, a trend (and with the most tag filters), a comparison of 3 runs, of the
                  most runs a comparison takes, and of one run named 150 times with another, a run's progress, and
                  1,000 tag filters (refused with a 400); the server's first request apart

Times are absolute (the targets of the issue that asked for the catalog: < 0.2 s to index a run, < 1 s for
`refbench runs` and for every page), so the load average of the machine is printed with them, and the CPU seconds
of the process doing the work (issue 27's target: every page within 2 s of the server's CPU, the maximum over the
repeats).

Usage: .venv/bin/python bench/catalog_bench.py [--runs 1000] [--dir /var/tmp/refbench-catalog-bench] [--repeats 5] [--keep]
Prints a Markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from refbench.catalog import CATALOG_FILE, MAX_TAG_FILTERS, Catalog  # noqa: E402
from refbench.engines.managed import free_port  # noqa: E402
from refbench.runstore import Run, iso, list_runs  # noqa: E402
from refbench.web import MAX_COMPARED_RUNS  # noqa: E402

REFBENCH = [sys.executable, "-m", "refbench"]
SOURCES = [  # (name, the CLI arguments after `refbench`): real quick runs, about 1 min, 30 s and 1 min 30 s here
    ("device", ["device", "--profile", "quick"]),
    ("oltp", ["oltp", "--profile", "quick"]),
    ("mixed", ["run", "--suite", "device", "--suite", "oltp", "--profile", "quick"]),
]
HOSTS = {"db-a01": 1.0, "db-a02": 0.97, "db-b01": 1.35, "lab-vm1": 0.55, "lab-vm2": 0.6}
FIRMWARE = ["2.0", "2.1", "2.2", "2.3"]  # in time order; each release a little faster
ARRAYS = ["raid10", "raid5", "jbod"]
FIRST_START = datetime(2026, 4, 1, tzinfo=timezone.utc)
SPAN = timedelta(days=210)
THROUGHPUT = ("iops", "mb_s", "nopm", "tpm", "_per_s", "_per_min", "_count")
LATENCY = ("lat_",)
PAGE_CPU_S = 2.0


# ---- the runs ---------------------------------------------------------------------------------------------

def make_sources(sources: Path) -> list[Path]:
    """The real runs the copies are made from: made once, reused while DIR/sources holds them all complete."""
    made = {run.meta["name"]: run.path for run in list_runs(sources) if run.meta.get("status") == "complete"}
    for name, argv in SOURCES:
        if name not in made:
            print(f"making the source run '{name}': refbench {' '.join(argv)}", flush=True)
            out = subprocess.run([*REFBENCH, *argv, "--runs-dir", str(sources), "--name", name], capture_output=True,
                                 text=True, cwd=sources)
            if out.returncode != 0:
                sys.exit(f"the source run '{name}' failed (exit {out.returncode}):\n"
                         f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
            made[name] = Path(out.stdout.strip().splitlines()[-1])
    return [made[name] for name, _ in SOURCES]


def scaled(metric: str, value: Any, factor: float) -> Any:
    """A figure as a `factor` times faster machine would give it: throughput up, latency down, the rest as is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if any(word in metric for word in LATENCY):
        return round(value / factor, 3)
    if any(word in metric for word in THROUGHPUT):
        return round(value * factor, 3)
    return value


def copy_run(source: Path, runs: Path, index: int, count: int, rng: random.Random) -> Path:
    """One synthetic run from a real one; `index` of `count` places it in time (with a few hours of jitter)."""
    meta = json.loads((source / "run.json").read_text())
    started = FIRST_START + SPAN * (index / count) + timedelta(minutes=rng.uniform(0, 600))
    shift_s = started.timestamp() - _parse(meta["started_utc"]).timestamp()
    host = rng.choice(list(HOSTS))
    firmware = FIRMWARE[min(len(FIRMWARE) - 1, int(len(FIRMWARE) * index / count))]
    tags = {"firmware": firmware, "array": rng.choice(ARRAYS), "kernel": rng.choice(["6.1", "6.6"])}
    factor = HOSTS[host] * (1 + 0.08 * FIRMWARE.index(firmware)) * (0.9 if tags["array"] == "raid5" else 1.0)
    factor *= math.exp(rng.gauss(0, 0.04))
    name = f"{meta['name']}-{host}-{index:04d}"
    path = runs / f"{started.strftime('%Y%m%dT%H%M%SZ')}-{name}"
    path.mkdir()

    def shifted(stamp: str | None) -> str | None:
        return iso(_parse(stamp) + timedelta(seconds=shift_s)) if stamp else stamp

    for item in source.iterdir():  # what the catalog does not read is shared with the source
        if item.name not in ("run.json", "verdict.json", "records", "tags.json", "run.lock", "work"):
            _link_tree(item, path / item.name)
    for record_file in sorted((source / "records").glob("*/*.json")):
        record = json.loads(record_file.read_text())
        record["metrics"] = {k: scaled(k, v, factor) for k, v in record["metrics"].items()}
        extra = record["extra"]  # the samples behind a figure's spread move with it
        if "samples" in extra:
            extra["samples"] = {k: [scaled(k, v, factor) for v in values] for k, values in extra["samples"].items()}
        if "series" in extra:
            extra["series"] = [{k: scaled(k, v, factor) for k, v in point.items()} for point in extra["series"]]
        record.update(host=host, started_utc=shifted(record.get("started_utc")),
                      ended_utc=shifted(record.get("ended_utc")), started_epoch_s=record["started_epoch_s"] + shift_s,
                      ended_epoch_s=record["ended_epoch_s"] + shift_s)
        target = path / "records" / record_file.parent.name / record_file.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(record, indent=2))
    verdicts = json.loads((source / "verdict.json").read_text())
    for verdict in verdicts:
        for headline in verdict["headlines"]:
            headline["value"] = scaled(headline["metric"], headline["value"], factor)
    (path / "verdict.json").write_text(json.dumps(verdicts, indent=2))
    Run(path).tags_path.write_text(json.dumps(tags))
    meta.update(name=name, host=host, started_utc=shifted(meta["started_utc"]), ended_utc=shifted(meta["ended_utc"]),
                plan={**meta["plan"], "name": name, "runs_dir": str(runs)})
    (path / "run.json").write_text(json.dumps(meta, indent=2))
    return path


def _parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def _link_tree(source: Path, target: Path) -> None:
    if source.is_dir():
        target.mkdir(mode=source.stat().st_mode & 0o777)
        for item in source.iterdir():
            _link_tree(item, target / item.name)
    else:
        os.link(source, target)


def make_runs(sources: list[Path], runs: Path, count: int, seed: int = 18) -> None:
    rng = random.Random(seed)
    runs.mkdir(parents=True)
    for index in range(count):
        copy_run(sources[index % len(sources)], runs, index, count, rng)


# ---- measuring --------------------------------------------------------------------------------------------

class Timings:
    """Every measurement's wall and CPU times, in the order taken, and the load average around them. The CPU time
    (of this process, of the command's process, or of the server's) moves less with the neighbours' load than the
    wall time, which is what the targets are about."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.commands: dict[str, str] = {}
        self.loads: list[float] = []
        self.sizes: dict[str, int] = {}  # bytes of each page

    def take(self, what: str, command: str, action: Callable[[], Any],
             cpu_s: Callable[[], float] = time.process_time) -> Any:
        self.loads.append(os.getloadavg()[0])
        c0, t0 = cpu_s(), time.perf_counter()
        result = action()
        self.times.setdefault(what, []).append(time.perf_counter() - t0)
        self.cpu.setdefault(what, []).append(cpu_s() - c0)
        self.commands[what] = command
        print(f"{what}: {self.times[what][-1]:.3f} s, CPU {self.cpu[what][-1]:.3f} s "
              f"(load average {self.loads[-1]:.1f})", flush=True)
        return result


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu_s(pid: int) -> Callable[[], float]:
    """The CPU seconds a running process has used so far (in clock ticks, 10 ms here)."""
    def read() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return read


def catalog_update(runs: Path) -> int:
    catalog = Catalog(runs)
    try:
        return catalog.update(lambda message: print(message, file=sys.stderr))
    finally:
        catalog.close()


def cli(*args: str) -> Callable[[], str]:
    def run() -> str:
        out = subprocess.run([*REFBENCH, *args], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"refbench {' '.join(args)} failed (exit {out.returncode}): {out.stderr[-2000:]}")
        return out.stdout
    return run


def has_command(name: str) -> bool:
    return subprocess.run([*REFBENCH, name, "--help"], capture_output=True).returncode == 0


def measure_catalog(t: Timings, runs: Path, sources: list[Path], count: int, repeats: int) -> None:
    rng = random.Random(1)
    for round_ in range(repeats):
        (runs / CATALOG_FILE).unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            (runs / (CATALOG_FILE + suffix)).unlink(missing_ok=True)
        indexed = t.take("build", "Catalog(RUNS).update(), no catalog file", lambda: catalog_update(runs))
        assert indexed == count, f"the build indexed {indexed} runs of {count}"
        indexed = t.take("no change", "Catalog(RUNS).update(), nothing changed", lambda: catalog_update(runs))
        assert indexed == 0, f"an update with nothing changed indexed {indexed} runs"
        new = copy_run(sources[round_ % len(sources)], runs, count + round_, count, rng)
        indexed = t.take("one new run", "Catalog(RUNS).update(), one new run directory", lambda: catalog_update(runs))
        assert indexed == 1, f"an update after one new run indexed {indexed}"
        with Catalog(runs) as catalog:  # what the runner does as a run ends (catalog.index_run)
            t.take("index one run", "Catalog(RUNS).index(Run(NEW))", lambda: catalog.index(Run(new)))
        shutil.rmtree(new)
        catalog_update(runs)  # back to `count` runs for what follows


def measure_cli(t: Timings, runs: Path, repeats: int, history: bool) -> None:
    where = ["--runs-dir", str(runs)]
    commands = {
        "python + refbench import": ["--version"],  # the floor under every command
        "runs": ["runs", *where],  # the table of the newest 50, as a user gets it
        "runs --limit 0": ["runs", *where, "--limit", "0"],  # the same query, a table of all of them
        "runs, filtered": ["runs", *where, "--suite", "oltp", "--host", "db-a01", "--tag", "firmware=2.3"],
        "runs --json": ["runs", *where, "--json"],
    }
    if history:
        commands |= {"history": ["history", "oltp.nopm", *where],
                     "history --json": ["history", "oltp.nopm", *where, "--json"]}
    for _ in range(repeats):
        for what, args in commands.items():
            t.take(what, "refbench " + " ".join(args), cli(*args), children_cpu_s)
    # Once: the catalog rebuilt after a page of it was overwritten (what a damaged catalog costs the next command).
    overwrite_runs_page(runs / CATALOG_FILE)
    t.take("runs, a damaged catalog", "refbench runs --runs-dir RUNS, the runs table's page overwritten",
           cli("runs", *where), children_cpu_s)


def overwrite_runs_page(catalog_file: Path) -> None:
    with sqlite3.connect(catalog_file) as db:
        page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with open(catalog_file, "r+b") as f:
        f.seek((page - 1) * page_size)
        f.write(os.urandom(page_size))


def get(url: str, expected: int = 200) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    if status != expected:
        raise SystemExit(f"GET {url} answered {status}, not {expected}: {body[-2000:].decode(errors='replace')}")
    return body


def measure_serve(t: Timings, runs: Path, log: Path, repeats: int, pages: dict[str, str]) -> None:
    port = free_port()
    with open(log, "w") as err:
        server = subprocess.Popen([*REFBENCH, "serve", "--runs-dir", str(runs), "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=err)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:  # not listening yet
                if server.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"refbench serve did not listen on {base}; its log: {log}") from None
                time.sleep(0.1)
        # The first page the server answers also brings the catalog up to date and imports what pages need.
        server_cpu_s = process_cpu_s(server.pid)
        t.take("GET runs list, first request", "GET / (the server's first request)", lambda: get(base + "/"),
               server_cpu_s)
        for _ in range(repeats):
            for what, path in pages.items():
                expected = NOT_OK.get(what, 200)
                page = t.take(f"GET {what}", f"GET {shown(path)}", lambda: get(base + path, expected), server_cpu_s)
                t.sizes[f"GET {what}"] = len(page)
    finally:
        server.terminate()
        server.wait(timeout=30)


def serve_pages(runs: Path) -> dict[str, str]:
    """The pages to time, with runs that exist in RUNS: the newest oltp run's report and progress, the three newest
    oltp runs compared, and what the dashboard bounds: the most runs a comparison takes (the newest device + oltp
    runs, the ones with the most figures), one run named 150 times, the most tag filters a query takes, and 1,000 of
    them (refused)."""
    catalog = Catalog(runs)
    try:
        oltp = [r["run"] for r in catalog.runs(suite="oltp")]
        mixed = [r["run"] for r in catalog.runs(suite="device") if len(r["suites"]) > 1]
    finally:
        catalog.close()

    def runs_query(names: list[str]) -> str:
        return "&".join(f"run={name}" for name in names)

    tags = [f"tag=t{i}%3D1" for i in range(MAX_TAG_FILTERS - 1)] + ["tag=firmware%3D2.3"]
    return {"runs list": "/", "runs list, all runs": "/?all=1",
            "runs list, filtered": "/?suite=oltp&host=db-a01&tag=firmware%3D2.3", "run report": f"/runs/{oltp[0]}/",
            "trend": "/history?figure=oltp.nopm",
            "compare (3 runs)": "/compare?" + runs_query(oltp[:3]),
            "progress": f"/progress/{oltp[0]}",
            f"compare ({MAX_COMPARED_RUNS} device + oltp runs, the cap)": "/compare?" + runs_query(mixed[:MAX_COMPARED_RUNS]),
            "compare (one run named 150 times, and another)": "/compare?" + runs_query([oltp[0]] * 150 + [oltp[1]]),
            f"runs list, {MAX_TAG_FILTERS} tag filters (the cap)": "/?" + "&".join(tags),
            f"trend, {MAX_TAG_FILTERS} tag filters": "/history?figure=oltp.nopm&" + "&".join(tags),
            TAGS_REFUSED: "/?" + "&".join(f"tag=t{i}%3D1" for i in range(1000))}


# Pages timed for the work they do, whose answer is not a 200: past a cap (a 400 and its sentence), a figure no run
# with these tags has (a 404 and the names of the figures they do have).
TAGS_REFUSED = "runs list, 1,000 tag filters (refused)"
NOT_OK = {TAGS_REFUSED: 400, f"trend, {MAX_TAG_FILTERS} tag filters": 404}


def shown(path: str, limit: int = 100) -> str:
    """A request as the table shows it: a query of 150 runs or 1,000 tags cut short."""
    return path if len(path) <= limit else f"{path[:limit]}… ({len(path):,} characters)"


# ---- main -------------------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000, help="synthetic runs in the catalog (default: 1000)")
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/refbench-catalog-bench"),
                        help="scratch directory: sources/ (real runs, kept) and runs/ (the copies, removed at the end)")
    parser.add_argument("--repeats", type=int, default=5, help="measurements of each figure (default: 5)")
    parser.add_argument("--keep", action="store_true", help="keep DIR/runs (the copies) at the end")
    args = parser.parse_args()
    if args.runs < 3:
        parser.error("--runs must be at least 3 (a comparison takes 3 runs)")

    (args.dir / "sources").mkdir(parents=True, exist_ok=True)
    sources = make_sources(args.dir / "sources")
    runs = args.dir / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    t0 = time.perf_counter()
    make_runs(sources, runs, args.runs)
    print(f"made {args.runs} runs in {runs} from {', '.join(p.name for p in sources)} "
          f"in {time.perf_counter() - t0:.1f} s", flush=True)
    t = Timings()
    try:
        measure_catalog(t, runs, sources, args.runs, args.repeats)
        history = has_command("history")
        measure_cli(t, runs, args.repeats, history)
        serve = has_command("serve")
        if serve:
            pages = serve_pages(runs)
            if not history:  # the trend page is the history command's
                del pages["trend"]
            measure_serve(t, runs, args.dir / "serve.log", args.repeats, pages)
    finally:
        if not args.keep:
            shutil.rmtree(runs, ignore_errors=True)
    print_table(t, args, history, serve)


def print_table(t: Timings, args: argparse.Namespace, history: bool, serve: bool) -> None:
    # The issue's: indexing a run, `refbench runs` as a user types it (and filtered, and --json), every page.
    targets = {"index one run": 0.2, "runs": 1.0, "runs, filtered": 1.0, "runs --json": 1.0}
    print(f"\n{args.runs} runs, {args.repeats} repeats, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"load average (1 min) during the measurements: {min(t.loads):.1f}–{max(t.loads):.1f}\n")
    print("| measurement | command | median s | max s | median CPU s | max CPU s | target |")
    print("|---|---|---|---|---|---|---|")
    for what, times in t.times.items():
        target = targets.get(what, 1.0 if what.startswith("GET ") else None)
        met = target is not None and statistics.median(times) < target
        verdicts = [] if target is None else [f"< {target:g} s ({'ok' if met else 'MISSED'})"]
        if what.startswith("GET "):  # issue 27: every page within PAGE_CPU_S of the server's CPU, each time
            verdicts.append(f"CPU < {PAGE_CPU_S:g} s ({'ok' if max(t.cpu[what]) < PAGE_CPU_S else 'MISSED'})")
        size = f" ({t.sizes[what] / 1000:,.0f} kB)" if what in t.sizes else ""
        print(f"| {what}{size} | `{t.commands[what]}` | {statistics.median(times):.3f} | {max(times):.3f} | "
              f"{statistics.median(t.cpu[what]):.3f} | {max(t.cpu[what]):.3f} | {', '.join(verdicts)} |")
    if not history:
        print("\n`refbench history` is not in this checkout: not measured.")
    if not serve:
        print("\n`refbench serve` is not in this checkout: not measured.")


if __name__ == "__main__":
    main()
