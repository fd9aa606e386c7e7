"""What comparing demo runs costs: `refbench compare A B` as a user runs it, and the dashboard's /compare of three.

The runs are real demo runs (`refbench run --plan plans/quick.toml`, about 6 minutes each; the benchmark makes the
missing ones once and keeps them in DIR/runs). Measured in rounds, each --repeats times:
  floor             `refbench --version`: Python and refbench's imports, under every command
  scipy             `python -c "import scipy.special"`: the statistics compare tests with, imported by every compare
  compare           `refbench compare A B --out FILE` (two demo runs), the command's CPU seconds
  compare's work    the same command run inside this process with SciPy and refbench imported already
  /compare          GET /compare?run=A&run=B&run=C of `refbench serve` (three demo runs), its wall time and the
                    server's CPU seconds (10 ms ticks); each round another order of the three (another baseline),
                    so that no answer comes from the page's cache of drawn charts; the server's first request apart

CPU seconds are the targets of issue 50 (compare of two demo runs within 1 s of CPU, the dashboard's /compare of three
within 1 s); the floor and SciPy's import are measured in the same rounds so that the command's figure can be read
against what any command costs.

Usage: .venv/bin/python bench/compare_bench.py [--dir /var/tmp/refbench-compare-bench] [--repeats 5]
Prints a Markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import statistics
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from catalog_bench import REFBENCH, Timings, children_cpu_s, cli, get, process_cpu_s  # noqa: E402
from refbench.engines.managed import free_port  # noqa: E402

DEMO_RUNS = 3


def demo_runs(runs: Path) -> list[Path]:
    """The three newest finished demo runs in RUNS, made first when fewer are there."""
    def finished() -> list[Path]:
        return sorted(p for p in runs.glob("*-demo") if (p / "verdict.json").is_file())
    for _ in range(DEMO_RUNS - len(finished())):
        print("making a demo run (about 6 minutes)…", flush=True)
        out = subprocess.run([*REFBENCH, "run", "--plan", str(ROOT / "plans" / "quick.toml"), "--runs-dir", str(runs)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"the demo run failed (exit {out.returncode}): {out.stderr[-2000:]}")
    return finished()[-DEMO_RUNS:]


def in_process(*args: str) -> None:
    from refbench.cli import main

    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        try:
            sys.argv = ["refbench", *args]
            main()
        except SystemExit as exc:
            if exc.code:
                raise SystemExit(f"refbench {' '.join(args)} failed in process (exit {exc.code})") from None


def serve(runs: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    with open(log, "w") as err:
        server = subprocess.Popen([*REFBENCH, "serve", "--runs-dir", str(runs), "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=err)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while "dashboard: " not in log.read_text():
        if server.poll() is not None or time.time() > deadline:
            raise SystemExit(f"refbench serve did not start; its log: {log}")
        time.sleep(0.1)
    return server, base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/refbench-compare-bench"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    runs = args.dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    a, b, c = demo_runs(runs)
    out = args.dir / "compare.html"
    compare = ["compare", str(a), str(b), "--out", str(out)]
    t = Timings()
    import scipy.special  # noqa: F401  so that "compare's work" is the comparison, not the import

    in_process(*compare)  # once: refbench's modules imported, as a command has them
    server, base = serve(runs, args.dir / "serve.log")
    orders = ["/compare?" + "&".join(f"run={r.name}" for r in order) for order in itertools.permutations((a, b, c))]
    if args.repeats >= len(orders):
        raise SystemExit(f"--repeats takes at most {len(orders) - 1}: one order of the three runs a round, and the first apart")
    try:
        server_cpu = process_cpu_s(server.pid)
        t.take("/compare, the server's first", "GET /compare?run=A&run=B&run=C", lambda: get(base + orders[0]), server_cpu)
        for page in orders[1:args.repeats + 1]:
            t.take("floor", "refbench --version", cli("--version"), children_cpu_s)
            t.take("scipy", 'python -c "import scipy.special"',
                   lambda: subprocess.run([sys.executable, "-c", "import scipy.special"], check=True), children_cpu_s)
            t.take("compare", "refbench compare A B --out FILE", cli(*compare), children_cpu_s)
            t.take("compare's work", "the same, in process, imports done", lambda: in_process(*compare))
            t.take("/compare", "GET /compare?run=A&run=B&run=C, in another order", lambda: get(base + page), server_cpu)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"\nruns: {a.name}, {b.name}, {c.name}; load average {min(t.loads):.1f}–{max(t.loads):.1f}; "
          f"{args.repeats} rounds, {os.cpu_count()} CPUs\n")
    print("| measurement | command or request | median s | max s | median CPU s | max CPU s |\n|---|---|---|---|---|---|")
    for what in t.times:
        times, cpu = t.times[what], t.cpu[what]
        print(f"| {what} | `{t.commands[what]}` | {statistics.median(times):.3f} | {max(times):.3f} | "
              f"{statistics.median(cpu):.3f} | {max(cpu):.3f} |")


if __name__ == "__main__":
    main()
