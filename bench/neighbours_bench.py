"""What each neighbour made on purpose (tests/neighbours.py) costs a quick oltp run, and what refbench says of it: the
same case quiet, then beside a CPU loop taking 20% of the machine, a 4 KiB random direct writer, a 1 MiB sequential
one on the same disk, and (with --memory) a process holding all of the memory but 250 MB. Per repeat: NOPM, the
machine's split (others' CPU, steal, the server's threads queued, others' writes) and the disturbed reason.

    .venv/bin/python bench/neighbours_bench.py                       # quick oltp, 2 users, 3 repeats each
    .venv/bin/python bench/neighbours_bench.py --memory --warehouses 8 --users 4 --cache-mb 1024
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))
REFBENCH = str(ROOT / ".venv" / "bin" / "refbench")


def run(work: Path, label: str, a) -> list[dict]:
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    command = [REFBENCH, "oltp", "--users", str(a.users), "--warehouses", str(a.warehouses), "--repeats", str(a.repeats),
               "--data-dir", str(data), "--runs-dir", str(work / "runs"), "--name", label, "-q"]
    if a.cache_mb:
        command += ["--set", f"oltp.cache_mb={a.cache_mb}"]
    p = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "REFBENCH_DISTURBED": ""})
    if p.returncode not in (0, 1):  # 1: a check failed (a starved run may commit too few to judge its mix)
        sys.exit(p.stderr)
    out = []
    for path in sorted((Path(p.stdout.strip().splitlines()[-1]) / "records" / "oltp").glob("u*.json")):
        r = json.loads(path.read_text())
        storage = r["extra"].get("storage") or {}
        m = storage.get("machine") or {}
        out.append({"case": path.stem, "nopm": r["metrics"]["nopm"], "others_pct": m.get("others_pct"),
                    "steal_pct": m.get("steal_pct"), "queued": m.get("server_runqueue_avg"),
                    "others_write_mb_s": m.get("others_write_mb_s"), "disturbed": r["extra"].get("disturbed")})
    return out


def main() -> None:
    import neighbours

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=2)
    ap.add_argument("--warehouses", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache-mb", type=int, default=0, help="the server's cache bound (0: none, as the quick profile)")
    ap.add_argument("--memory", action="store_true", help="only quiet and the memory hog")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="refbench-neighbours-bench-", dir="/var/tmp") as scratch:
        work = Path(scratch)
        work.chmod(0o755)
        made = {"quiet": contextlib.nullcontext}
        if a.memory:
            made["a memory hog leaving 250 MB"] = lambda: neighbours.memory_hog(250, work / "hog-ready")
        else:
            made |= {"a CPU loop at 20%": lambda: neighbours.cpu_loop(0.2),
                     "a 4 KiB random writer": lambda: neighbours.writer(work, "4k"),
                     "a 1 MiB sequential writer": lambda: neighbours.writer(work, "1m")}
        quiet = None
        for label, neighbour in made.items():
            with neighbour():
                rows = run(work, label.split()[0] if label == "quiet" else "beside", a)
            median = statistics.median(r["nopm"] for r in rows)
            quiet = quiet or median
            print(f"\n{label}: NOPM {median:,.0f} median ({1 - median / quiet:+.0%} lost)", flush=True)
            for r in rows:
                print(f"  {r['case']:<6} NOPM {r['nopm']:>9,.0f}  others {r['others_pct']}% steal {r['steal_pct']}% "
                      f"queued {r['queued']} others' writes {r['others_write_mb_s']} MB/s: {r['disturbed'] or 'clean'}")


if __name__ == "__main__":
    main()
