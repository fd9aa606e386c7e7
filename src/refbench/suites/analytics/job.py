"""One job of the mixed analytics workload, as its own process: ``python -m refbench.suites.analytics.job``
with the job's description as JSON on the command line. It runs one test and writes the test's checks to the
result file; the launcher measures it from outside (the kernel's accounting of the process)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    spec = json.loads(sys.argv[1])
    # Engines size their thread pools when they load, so this comes before any of them is imported.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS"):
        os.environ[var] = str(spec["threads"])
    import importlib

    from refbench.host.pagecache import evict
    from refbench.suites.analytics.catalog import TESTS, JobContext

    importlib.import_module(spec["module"])  # only this test's engines: a job's CPU time should be its test's
    test = TESTS[spec["test"]]
    ctx = JobContext(Path(spec["data"]), Path(spec["work"]), Path(spec["util"]), spec["rows"], spec["threads"],
                     spec["memory_mb"], spec["seed"], spec["fsync"])
    if spec["evict_inputs"]:
        evict([ctx.data / name for name in test.inputs])
    started = time.monotonic()
    test.run(ctx)
    result = {"checks": ctx.checks, "inner_elapsed_s": round(time.monotonic() - started, 3)}
    Path(spec["result"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
