"""Analytics benchmark: refbench's storage throughput test (fio, one psync writer per core, 64 KiB blocks,
end_fsync, then concurrent read-back) against the vendor's own method, rhel_iotest's dd: one
`dd if=/dev/zero bs=64k conv=fsync` per core at once, then one `dd of=/dev/null bs=64k` per core at once after
the files are dropped from the page cache. They run in alternating rounds on the same directory, refbench twice:
writing zeros as dd does (iotest_zero_buffers: the same method, so the ratio should be 1 within the noise,
target within 10%) and writing incompressible data (its default, which storage cannot shortcut).

Usage: .venv/bin/python bench/analytics_bench.py [--dir /var/tmp] [--file-mib 1024] [--rounds 3]
Prints Markdown for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from refbench.host.inventory import collect
from refbench.host.pagecache import evict
from refbench.suites.analytics import iotest


def dd_iotest(directory: Path, writers: int, file_mib: int) -> tuple[float, float]:
    """(write, read) MB/s per core the way rhel_iotest measures them: wall time of all dd's together."""
    files = [directory / f"dd-iotest.{i}" for i in range(writers)]
    t0 = time.monotonic()
    procs = [subprocess.Popen(["dd", "if=/dev/zero", f"of={f}", "bs=64k", f"count={file_mib * 16}", "conv=fsync"],
                              stderr=subprocess.DEVNULL) for f in files]
    assert all(p.wait() == 0 for p in procs)
    write_s = time.monotonic() - t0
    evict(files)
    t0 = time.monotonic()
    procs = [subprocess.Popen(["dd", f"if={f}", "of=/dev/null", "bs=64k"], stderr=subprocess.DEVNULL) for f in files]
    assert all(p.wait() == 0 for p in procs)
    read_s = time.monotonic() - t0
    for f in files:
        f.unlink()
    total_mb = writers * file_mib * 2**20 / 1e6
    return total_mb / write_s / writers, total_mb / read_s / writers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp"))
    parser.add_argument("--file-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    writers = collect()["cpu"]["cores"] or os.cpu_count() or 1
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    work = Path(tempfile.mkdtemp(prefix="refbench-analytics-bench-", dir=args.dir))
    rows = []
    try:
        for round_ in range(1, args.rounds + 1):
            zeros = iotest.run(work / "fio", writers, args.file_mib, memory, work / "raw", zero_buffers=True)
            theirs = dd_iotest(work, writers, args.file_mib)
            ours = iotest.run(work / "fio", writers, args.file_mib, memory, work / "raw")
            rows.append((round_, zeros["write_mb_s_per_core"], theirs[0], zeros["read_mb_s_per_core"], theirs[1],
                         ours["write_mb_s_per_core"], ours["read_mb_s_per_core"]))
            print(f"round {round_}: zeros write {zeros['write_mb_s_per_core']:.1f} vs dd {theirs[0]:.1f}, read "
                  f"{zeros['read_mb_s_per_core']:.1f} vs dd {theirs[1]:.1f}; incompressible write "
                  f"{ours['write_mb_s_per_core']:.1f}, read {ours['read_mb_s_per_core']:.1f} MB/s per core", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{writers} writers × {args.file_mib} MiB in {args.dir}, {args.rounds} alternating rounds\n")
    print("| round | write, refbench zeros | write, dd | ratio | read, refbench zeros | read, dd | ratio "
          "| write, refbench incompressible | read, refbench incompressible |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r, fw, dw, fr, dr, iw, ir in rows:
        print(f"| {r} | {fw:.1f} | {dw:.1f} | {fw / dw:.2f} | {fr:.1f} | {dr:.1f} | {fr / dr:.2f} | {iw:.1f} | {ir:.1f} |")
    print(f"\nMB/s per core. Median ratio refbench (zeros) / dd: write {statistics.median(r[1] / r[2] for r in rows):.2f}, "
          f"read {statistics.median(r[3] / r[4] for r in rows):.2f}. Median incompressible / zeros, refbench: write "
          f"{statistics.median(r[5] / r[1] for r in rows):.2f}, read {statistics.median(r[6] / r[3] for r in rows):.2f}.")


if __name__ == "__main__":
    main()
