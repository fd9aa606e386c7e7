"""The storage throughput test SAS asks of storage for its analytics workloads (the rhel_iotest method): one
writer per physical core writes its own file in 64 KiB blocks and fsyncs it, then all read their files back
at once; the result is MB/s per core for writing and for reading, judged against SAS's guidance of 100–150 MB/s
of sustained throughput per physical core. fio does the I/O (psync, 64 KiB, end_fsync — dd's way).

The files should be larger than memory, or reading back measures the page cache. When they are not (the quick
profile), fio drops them from the page cache before reading (invalidate=1) and the result says how much of the
read-back came from the device, read from /proc/diskstats.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from refbench.engines.fio import FioError, run_fio
from refbench.errors import UserError
from refbench.host.telemetry import SECTOR_BYTES, read_disks
from refbench.suites.device.targets import device_of

BLOCK = "64k"
GUIDANCE_MB_S = (100, 150)  # per physical core, SAS's storage guidance
PROC = Path("/proc")


def verdict(per_core_mb_s: float) -> str:
    low, high = GUIDANCE_MB_S
    if per_core_mb_s < low:
        return f"below the guidance ({low}–{high} MB/s per core)"
    return f"meets the guidance ({low}–{high} MB/s per core)" if per_core_mb_s <= high else f"above the guidance (> {high} MB/s per core)"


def run(directory: Path, writers: int, file_mib: int, memory_bytes: int, raw_dir: Path,
        zero_buffers: bool = False) -> dict[str, Any]:
    """``zero_buffers`` writes zeros as rhel_iotest's dd from /dev/zero does; by default fio writes data that does not
    compress, because storage that detects zeros or compresses can shortcut them."""
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    total = writers * file_mib * 2**20
    free = shutil.disk_usage(directory).free
    if free < total * 1.05:
        raise UserError(f"the storage throughput test needs {total / 1e9:.1f} GB in {directory}, which has "
                        f"{free / 1e9:.1f} GB free; lower iotest_file_mib.")
    common = {"name": "iotest", "directory": str(directory), "filename_format": "refbench-iotest.$jobnum",
              "bs": BLOCK, "size": f"{file_mib}Mi", "numjobs": writers, "ioengine": "psync", "group_reporting": True, "zero_buffers": zero_buffers}
    device = device_of(directory)
    try:
        write = run_fio({**common, "rw": "write", "end_fsync": 1}, raw_dir / "write").metrics()
        before, t0 = read_disks(PROC), time.monotonic()
        read = run_fio({**common, "rw": "read", "invalidate": 1}, raw_dir / "read").metrics()
        after, seconds = read_disks(PROC), time.monotonic() - t0
    except FioError as exc:
        raise UserError(f"the storage throughput test in {directory} failed: {exc}") from exc
    finally:
        for path in directory.glob("refbench-iotest.*"):
            path.unlink(missing_ok=True)
        if created:
            directory.rmdir()
    from_device = None
    if device and device in before and device in after:
        from_device = min(100.0, (after[device][1] - before[device][1]) * SECTOR_BYTES / total * 100)
    exceeds_memory = total >= memory_bytes
    warning = "" if exceeds_memory else (
        f"the files ({total / 1e9:.1f} GB) are smaller than memory ({memory_bytes / 1e9:.1f} GB), so they cannot defeat "
        "the page cache by size; fio dropped them from the cache before reading back"
        + (f", and {from_device:.0f}% of the bytes read back came from {device}" if from_device is not None else
           ", and how much came from the device is unknown (no block device under the directory)"))
    return {
        "directory": str(directory), "device": device, "writers": writers, "file_mib": file_mib, "block": BLOCK,
        "write_mb_s": write["write_mb_s"], "read_mb_s": read["read_mb_s"],
        "write_mb_s_per_core": round(write["write_mb_s"] / writers, 1), "read_mb_s_per_core": round(read["read_mb_s"] / writers, 1),
        "read_phase_s": round(seconds, 2), "read_from_device_pct": None if from_device is None else round(from_device, 1),
        "files_exceed_memory": exceeds_memory, "warning": warning, "zero_buffers": zero_buffers,
    }
