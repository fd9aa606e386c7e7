"""The device suite: what the SSD characterization paper did to an SSD, on fio — compatibility checks,
preconditioning, and the access-mode × queue-depth × block-size sweep — plus a steady-state test per point.

Cases, in order, per target: the checks (probe, verify, dd, fs-stress for directories, accounting), the two
preconditioning phases, then the sweep points. Every one is a recorded case, so an interrupted run resumes at
the first unfinished one.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from refbench.engines.fio import FioError, FioResult, fio_binary, run_fio
from refbench.errors import UserError
from refbench.fileio import atomic_write_text
from refbench.options import DAY_S, PIB, Option, Plan, PlanError
from refbench.suites import Case, Estimate, Finding, Record, SuiteBase
from refbench.suites.device import checks
from refbench.suites.device.sweep import (
    AccessMode, access_modes, base_job, bs_id, precondition_random, precondition_sequential, run_point, size_label,
)
from refbench.suites.device.targets import DEFAULT_FILE_SIZE, Target, mark_created, resolve

KiB, MiB, GiB = 2**10, 2**20, 2**30
PAPER_BLOCK_SIZES = [512, 1 * KiB, 2 * KiB, 4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, 1 * MiB]
PAPER_QUEUE_DEPTHS = [1, 2, 4, 8, 16, 32, 64, 128]
DEFAULT_TARGET = "(run work directory)"
CHECKS = ("probe", "verify", "dd", "fs-stress", "accounting")
# For --dry-run's estimate: fio's start and stop around each point and check (0.4–0.8 s a point measured with
# 0.01 s runtimes, tests/test_device_sweep.py), and a write rate for the preconditioning and the checks, which
# depend on the device: the 2-core VM's virtio disk wrote 1.2 GB/s (README), a SATA SSD about 0.5.
FIO_START_S = 1.0
ASSUMED_WRITE_B_S = 500e6


def _sector_multiple(block_size: int) -> str | None:
    # Direct I/O moves whole sectors: fio refuses a block size that is not a multiple of the 512-byte sector.
    return None if block_size % 512 == 0 else "must be a multiple of 512 bytes"


class DeviceSuite(SuiteBase):
    name = "device"
    # What a cluster run totals across nodes (sum) or averages (mean); the first is charted by node count.
    node_figures = {"iops": "sum", "mb_s": "sum", "read_lat_p99_us": "mean", "write_lat_p99_us": "mean"}
    # Wall time on the 2-core VM: quick measured with `refbench device --profile quick` (README); the others as README says.
    summary = ("Characterize storage with fio like the SSD characterization paper: compatibility checks, preconditioning, and the "
               "random/sequential × 0/30/100% write × queue depth × block size sweep, with steady state per point. "
               "TARGETs are files, directories or block devices (block devices need --destroy-data); "
               "with none, a test file in the run's work directory.")
    targets_help = ("Files, directories or block devices to measure: a directory gets a test file inside it; a path "
                    "that does not exist is refused; an existing file is only "
                    "overwritten with --destroy-data; a block device needs --destroy-data and is refused while it, or "
                    "anything stacked on it, is mounted, swap or in use, or while it holds a file system, RAID/LVM or "
                    "partition table signature. A path on an fstab mount point that is not mounted is refused. Default: "
                    "a test file in the run's work directory.")
    examples = [
        "refbench device /mnt/nvme0                       # quick sweep of a test file in that directory",
        "refbench device /mnt/sas /mnt/nvme --profile standard   # two targets, side by side",
        "refbench device /dev/nvme1n1 --destroy-data --profile full   # the SSD characterization paper's 576 points on a raw device",
        "refbench device /data --block-sizes 4k,64k --iodepths 1,32 --write-shares 0,30",
    ]
    options = {
        "size": Option(int, 0, "Test region in bytes (e.g. 4g); 0 = whole block device, or a 256 MiB / 4 GiB / "
                       "32 GiB test file for quick / standard / full.", minimum=0, maximum=PIB, unit="bytes"),
        "block_sizes": Option(list, {"quick": [4 * KiB, 128 * KiB], "standard": [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB],
                                     "full": PAPER_BLOCK_SIZES}, "Block sizes (512, 4k, 1m…).", item=int, minimum=512,
                            maximum=64 * MiB, unit="bytes", check=_sector_multiple),
        "iodepths": Option(list, {"quick": [1, 16], "standard": [1, 4, 16, 64], "full": PAPER_QUEUE_DEPTHS},
                           "Queue depths per worker.", item=int, minimum=1, maximum=4096),
        "numjobs": Option(int, {"quick": 2, "standard": 4, "full": 12}, "fio workers per point (the SSD characterization paper: 12).", minimum=1, maximum=1024),
        "patterns": Option(list, ["random", "sequential"], "Access patterns.", item=str, choices=("random", "sequential")),
        "write_shares": Option(list, [0, 30, 100], "Write percentages (the SSD characterization paper: 0, 30, 100).", item=int, minimum=0, maximum=100, unit="%"),
        # Fractions of a second (fio takes milliseconds) serve smoke tests of the whole matrix, not measurements.
        "min_runtime_s": Option(float, {"quick": 2, "standard": 10, "full": 60}, "Seconds a point runs at least.", minimum=0.01,
                                maximum=DAY_S, unit="s"),
        "max_runtime_s": Option(float, {"quick": 2, "standard": 30, "full": 60}, "Seconds a point runs at most.", minimum=0.01,
                                maximum=DAY_S, unit="s"),
        "ss_window": Option(int, {"quick": 2, "standard": 5, "full": 5},
                            "Steady-state window in one-second rounds (SNIA: 5; quick's 2 is a smoke test).", minimum=2,
                            maximum=3600),
        "stop_at_steady_state": Option(bool, {"quick": True, "standard": True, "full": False},
                                       "Stop a point once steady state holds (full runs the paper's fixed 60 s and only records it)."),
        "precondition": Option(bool, True, "Precondition before the sweep."),
        "precondition_passes": Option(int, {"quick": 1, "standard": 2, "full": 2}, "Full sequential 128 KiB write passes.", minimum=1,
                                      maximum=100),
        "precondition_random_s": Option(int, {"quick": 3, "standard": 300, "full": 3600},
                                        "Longest 4 KiB random-write phase (stops at steady state).", minimum=1,
                                        maximum=DAY_S, unit="s"),
        "checks": Option(bool, True, "Run the compatibility checks."),
        "check_size": Option(int, {"quick": 32 * MiB, "standard": 1 * GiB, "full": 0},
                             "Bytes the verify/dd/accounting checks cover; 0 = the whole target.", minimum=0,
                             maximum=PIB, unit="bytes"),
        "fs_stress_files": Option(int, {"quick": 64, "standard": 512, "full": 4096}, "Files in the file-system stress test.",
                                  minimum=1, maximum=100_000),
        "ioengine": Option(str, "libaio", "fio ioengine.", choices=("libaio", "io_uring", "psync")),
        "destroy_data": Option(bool, False, "Allow writing to block devices and existing files (destroys their data); a "
                               "mounted, in-use or signed device is refused even so."),
    }

    # ---- the matrix --------------------------------------------------------------------------------

    def cases(self, plan: Plan) -> list[Case]:
        o = plan.options[self.name]
        _check_options(o)
        specs = plan.targets or [DEFAULT_TARGET]
        cases: list[Case] = []
        for index, spec in enumerate(specs):
            if spec != DEFAULT_TARGET:
                target = resolve(spec, index, o, plan.profile)  # refuses unsafe targets before anything is written
                _check_region(target, o)
            label, is_dir = f"t{index}", spec == DEFAULT_TARGET or Path(spec).is_dir()
            if o["checks"]:
                for name in CHECKS:
                    if name != "fs-stress" or is_dir:
                        cases.append(Case(f"{label}-check-{name}", {"target": label, "kind": "check", "check": name},
                                          f"{label} check: {name}"))
            if o["precondition"]:
                for phase in ("seq", "rand"):
                    cases.append(Case(f"{label}-precondition-{phase}", {"target": label, "kind": "precondition", "phase": phase},
                                      f"{label} precondition: {'128 KiB sequential writes' if phase == 'seq' else '4 KiB random writes'}"))
            for mode in access_modes(o["patterns"], o["write_shares"]):
                for qd in o["iodepths"]:
                    for bs in o["block_sizes"]:
                        cases.append(Case(
                            f"{label}-{mode.id}-qd{qd}-bs{bs_id(bs)}",
                            {"target": label, "kind": "point", "pattern": mode.pattern, "write_pct": mode.write_pct,
                             "iodepth": qd, "bs": bs},
                            f"{label} {mode.title} QD{qd} {size_label(bs)}",
                        ))
        return cases

    def estimate(self, plan: Plan, cases: list[Case]) -> Estimate:
        o = plan.options[self.name]
        points = sum(c.params["kind"] == "point" for c in cases)
        checks_run = sum(c.params["kind"] == "check" for c in cases)
        seconds = points * (o["max_runtime_s"] + FIO_START_S) + checks_run * FIO_START_S
        written, space = 0, []
        for index, spec in enumerate(plan.targets or [DEFAULT_TARGET]):
            if spec == DEFAULT_TARGET:
                size = o["size"] or DEFAULT_FILE_SIZE[plan.profile]
                space.append((plan.work_dir or plan.runs_dir, size, f"device t{index}: the test file in the run's work directory"))
            else:
                target = resolve(spec, index, o, plan.profile)
                size = target.size_bytes
                path = Path(target.path)
                if target.kind == "file":
                    grows = size - (path.stat().st_size if path.exists() else 0)
                    space.append((str(path.parent), max(0, grows), f"device t{index}: test file {path.name}"))
            region = min(o["check_size"] or size, size)
            written += (o["precondition_passes"] * size if o["precondition"] else 0) + (2 * region if o["checks"] else 0)
            seconds += o["precondition_random_s"] if o["precondition"] else 0
        seconds += written / ASSUMED_WRITE_B_S
        # The repeats measure each target's peak random and peak sequential point again.
        peaks = len({(c.params["target"], c.params["pattern"]) for c in cases if c.params["kind"] == "point"})
        again = (plan.repeats - 1) * peaks if plan.repeats > 1 else 0
        seconds += again * (o["max_runtime_s"] + FIO_START_S)
        stop = "to steady state, at most" if o["stop_at_steady_state"] else "each"
        return Estimate(seconds, f"{points} points × {o['max_runtime_s']:g} s ({stop}) + {FIO_START_S:g} s of fio start "
                        f"each, checks and preconditioning ({written / 1e9:,.1f} GB written at an assumed "
                        f"{ASSUMED_WRITE_B_S / 1e6:,.0f} MB/s)" + (f", the {peaks} peak points {plan.repeats - 1} more "
                                                                   f"time{'s' if plan.repeats > 2 else ''} each" if again else ""), space)

    # ---- preparing targets ---------------------------------------------------------------------------

    def prepare(self, ctx) -> None:
        fio_binary()
        o = ctx.options
        specs = ctx.plan.targets or [str(ctx.work_dir)]
        targets = {}
        for index, spec in enumerate(specs):
            target = resolve(spec, index, o, ctx.plan.profile)
            _check_region(target, o)
            targets[target.label] = target
            ctx.log(f"{target.label}: {target.description}; {target.size_bytes / GiB:.2f} GiB measured")
            if target.directory:  # what the tests write in a directory goes with the run's work data, even after a kill
                ctx.claim(Path(target.path), Path(target.directory) / checks.FS_STRESS_DIR)
            self._create(ctx, target)
        ctx.state["targets"] = targets

    def _create(self, ctx, target: Target) -> None:
        """Creates a file target at its size and, when no preconditioning will, writes it once so reads hit the
        device rather than unwritten extents. Remembered in the work directory, so resume does not redo it."""
        if target.kind != "file":
            return
        state_file = ctx.work_dir / f"{target.label}.json"
        state = json.loads(state_file.read_text()) if state_file.exists() else {}
        path = Path(target.path)
        existed = path.exists()
        if not existed or path.stat().st_size < target.size_bytes:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if not existed:
                mark_created(fd)
            try:
                os.posix_fallocate(fd, 0, target.size_bytes)
            except OSError as exc:
                raise UserError(f"cannot create the {target.size_bytes / GiB:.2f} GiB test file {path}: {exc.strerror}.") from None
            finally:
                os.close(fd)
        state.setdefault("created", target.create or not existed)
        if not ctx.options["precondition"] and not state.get("filled"):
            with ctx.task(f"{target.label}: writing the test file once", total=1.0) as task:
                job = base_job(target, ctx.options) | {"name": "fill", "rw": "write", "bs": "1m", "iodepth": 16}
                run_fio(job, ctx.raw_dir(f"{target.label}-fill"),
                        on_sample=lambda s, r: task.update(int(r["jobs"][0]["write"]["io_bytes"]) / target.size_bytes) or False)
            state["filled"] = True
        atomic_write_text(state_file, json.dumps(state))

    # ---- measuring ------------------------------------------------------------------------------------

    def measure(self, ctx, case: Case) -> Record:
        target: Target = ctx.state["targets"][case.params["target"]]
        extra = {"target_path": target.path, "target_spec": target.spec, "target_kind": target.kind, "device": target.device,
                 "target_description": f"{target.label} = {target.spec}: {target.description}"}
        kind = case.params["kind"]
        if kind == "check":
            return self._check_case(ctx, case, target, extra)
        if kind == "precondition":
            return self._precondition_case(ctx, case, target, extra)
        return self._point_case(ctx, case, target, extra)

    def _check_case(self, ctx, case: Case, target: Target, extra: dict[str, Any]) -> Record:
        name, raw = case.params["check"], ctx.raw_dir(case)
        region = min(ctx.options["check_size"] or target.size_bytes, target.size_bytes)
        try:
            if name == "probe":
                result = checks.probe(target)
            elif name == "verify":
                result = checks.verify(target, region, raw)
            elif name == "dd":
                result = checks.dd_write_read(target, region)
            elif name == "fs-stress":
                result = checks.fs_stress(Path(target.directory or Path(target.path).parent), ctx.options["fs_stress_files"])
            else:
                result = checks.accounting(target, region, raw)
        except (OSError, FioError) as exc:
            result = checks.CheckResult(False, f"{type(exc).__name__}: {exc}")
        return Record({"passed": result.passed, **result.metrics}, method=CHECK_METHODS[name], extra=extra | {"detail": result.detail})

    def _precondition_case(self, ctx, case: Case, target: Target, extra: dict[str, Any]) -> Record:
        raw, o = ctx.raw_dir(case), ctx.options
        if case.params["phase"] == "seq":
            with ctx.task(f"{target.label}: precondition {o['precondition_passes']}× 128 KiB sequential write", total=1.0) as task:
                result = precondition_sequential(target, o, raw, on_progress=lambda done: task.update(done))
            m = result.metrics()
            return Record({"write_mb_s": m["write_mb_s"], "bytes_written": result.io_bytes(), "passes": o["precondition_passes"],
                           "elapsed_s": m["runtime_s"]},
                          method=f"fio: rw=write bs=128k iodepth=32 direct=1 loops={o['precondition_passes']} over the whole target",
                          extra=extra | _written(result))
        with ctx.task(f"{target.label}: precondition 4 KiB random write (until steady state)", total=o["precondition_random_s"]) as task:
            point = precondition_random(target, o, raw, on_second=_live(ctx, task, "precondition", 4096))
        m = point.fio.metrics()
        return Record({"write_iops": m["write_iops"], "write_mb_s": m["write_mb_s"], "elapsed_s": m["runtime_s"],
                       "steady_state_reached": point.steady_state_reached, "steady_state_at_s": point.steady_state_at_s},
                      method=(f"fio: rw=randwrite bs=4k iodepth=32 numjobs={o['numjobs']} direct=1, up to "
                              f"{o['precondition_random_s']} s, stopped once IOPS reached steady state "
                              f"(SNIA: range ≤ 20%, slope ≤ 10% over {o['ss_window']} s)"),
                      extra=extra | _written(point.fio))

    def _point_case(self, ctx, case: Case, target: Target, extra: dict[str, Any]) -> Record:
        p, o = case.params, ctx.options
        mode = AccessMode(p["pattern"], p["write_pct"])
        t0 = time.time()
        try:
            with ctx.task(case.title, total=o["max_runtime_s"]) as task:
                point = run_point(target, mode, p["iodepth"], p["bs"], o, ctx.raw_dir(case),
                                  on_second=_live(ctx, task, case.title, p["bs"]))
        except FioError as exc:
            return Record({"error": str(exc)}, method="fio failed for this point", extra=extra)
        t1 = time.time()
        metrics = point.fio.metrics()
        metrics |= {"steady_state_reached": point.steady_state_reached, "steady_state_at_s": point.steady_state_at_s,
                    "steady_state_window_iops": point.window_iops, "stopped_early": point.fio.stopped_early}
        # Most of the last second is enough (as for every record): waiting for the sample after t1 cost up to a
        # second a point, which is the whole of fio's time at short points and 1.7% of a 60-second one.
        ctx.telemetry.wait_for_sample_after(t1, slack_s=1.0)
        window = ctx.telemetry.window(t0, t1)
        if window is not None:
            metrics["host_cpu_user_pct"] = window.cpu.get("user_pct")
            metrics["host_cpu_system_pct"] = window.cpu.get("system_pct")
            device = window.disks.get(target.device or "")
            metrics["device_busy_pct"] = device["busy_pct"] if device else None
        return Record(metrics, method=(
            f"fio: rw={mode.fio_rw}{f' rwmixwrite={mode.write_pct}' if 0 < mode.write_pct < 100 else ''} "
            f"numjobs={o['numjobs']} direct=1 ioengine={o['ioengine']} group_reporting; IOPS sampled every second, "
            f"{o['min_runtime_s']:g}–{o['max_runtime_s']:g} s per point, "
            f"{'stopped' if o['stop_at_steady_state'] else 'steady state recorded'} once range ≤ 20% and slope ≤ 10% "
            f"of the mean over {o['ss_window']} s (SNIA); latencies are completion latencies (clat)"),
            extra=extra | _written(point.fio))

    # ---- correctness ------------------------------------------------------------------------------

    def check(self, ctx) -> list[Finding]:
        records = ctx.run.records(self.name)
        findings = [
            Finding(f"{r.params['target']} {r.params['check']}", bool(r.metrics.get("passed")), r.extra.get("detail", ""))
            for r in records if r.params.get("kind") == "check"
        ]
        points = [r for r in records if r.params.get("kind") == "point"]
        failed = [r for r in points if "error" in r.metrics]
        if points:
            first = [r for r in points if r.params.get("repeat", 1) == 1]  # the rest: repeats of the peak points
            measured = sum(1 for r in first if "error" not in r.metrics)
            again = len(points) - len(first)
            detail = f"{measured} of {len(first)} points measured" + (f", and {again} repeats of the peak points" if again else "")
            if failed:
                detail += f"; first failure: {failed[0].case_id}: {failed[0].metrics['error']}"
            findings.append(Finding("sweep points completed", not failed, detail))
        for target in ctx.state.get("targets", {}).values():
            _remove_created_file(ctx, target)
        return findings


CHECK_METHODS = {
    "probe": "Opened the target, read its size, sector sizes, model and rotational flag from sysfs, and read 4 KiB with O_DIRECT.",
    "verify": "fio wrote the region with verify=crc32c (64 KiB blocks, direct I/O), then a second fio run with verify_only=1 read every block back and checked it.",
    "dd": "Sequential 1 MiB O_DIRECT writes over the region (each block stamped with its offset), fsync, then read back; SHA-256 of both compared.",
    "fs-stress": "Files of 4 KiB–1 MiB written with fsync, dropped from the page cache, read back and checksummed, then deleted.",
    "accounting": "fio read the region with direct I/O; its byte count was compared with the /proc/diskstats delta of the device underneath (limit 5%).",
}


def _check_options(o: dict[str, Any]) -> None:
    if o["min_runtime_s"] > o["max_runtime_s"]:
        raise PlanError(f"[device] min_runtime_s ({o['min_runtime_s']:g}) must not exceed max_runtime_s ({o['max_runtime_s']:g}).")


def _check_region(target: Target, o: dict[str, Any]) -> None:
    largest = max(o["block_sizes"])
    if target.size_bytes // o["numjobs"] < largest:
        raise PlanError(f"[device] the test region of {target.spec} ({target.size_bytes} bytes) is too small for "
                        f"{o['numjobs']} sequential workers of {size_label(largest)} blocks; raise size or lower numjobs.")


def _remove_created_file(ctx, target: Target) -> None:
    state_file = ctx.work_dir / f"{target.label}.json"
    if target.kind == "file" and state_file.exists() and json.loads(state_file.read_text()).get("created"):
        Path(target.path).unlink(missing_ok=True)
        state_file.unlink()


def _live(ctx, task, title: str, block_bytes: int):
    """fio's second by second: the bar advanced, and the last second's IOPS and MB/s shown live."""
    def on_second(seconds: int, iops: float) -> None:
        task.update(seconds)
        ctx.live(f"{title}: {iops:,.0f} IOPS, {iops * block_bytes / 1e6:,.1f} MB/s in the last second ({seconds} s)")
    return on_second


def _written(result: FioResult) -> dict[str, int]:
    """What fio wrote, by its own count: the runner tells the device's writes by others from it (direct I/O, so the
    device was asked to write exactly these bytes)."""
    return {"own_written_bytes": int(result.job["write"]["io_bytes"])}
