"""The tuning audit: the settings the reference papers tune, their current value, what we recommend and why.

Recommendations follow the tuned profile of the SAS mixed-analytics paper and common
database-vendor guidance. Each check says "unknown" when the host does not expose the setting (VMs,
containers) instead of failing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from refbench.host.sysfs import UNKNOWN, SysRoot, bracketed

OK, CHANGE, UNKNOWN_STATUS = "ok", "change", "unknown"


@dataclass
class Check:
    setting: str
    current: str
    recommended: str
    status: str  # ok | change | unknown
    why: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit(root: SysRoot | None = None, inventory: dict[str, Any] | None = None) -> list[Check]:
    root = root or SysRoot()
    checks = [
        _cpu_governor(root),
        _energy_bias(root),
        _thp(root),
        _sysctl(root, "vm.dirty_ratio", 40, "==",
                "the mixed-analytics paper raises it to 40 so bursts of writes are absorbed in memory instead of stalling writers"),
        _sysctl(root, "vm.dirty_background_ratio", 10, "==",
                "the mixed-analytics paper sets 10: background write-back starts early enough to keep dirty data flowing to storage"),
        _sysctl(root, "vm.swappiness", 10, "<=",
                "the mixed-analytics paper sets 10: keep database and analytics memory resident rather than swap it out"),
        _sched_granularity(root, "min_granularity_ns", 10_000_000),
        _sched_granularity(root, "wakeup_granularity_ns", 15_000_000),
        _swap(root),
        _numa_balancing(root),
    ]
    devices = (inventory or {}).get("block_devices")
    if devices is None:
        from refbench.host.inventory import block_devices

        devices = block_devices(root)
    for device in devices:
        if device["name"].startswith("loop"):
            continue
        checks.append(_io_scheduler(device))
        checks.append(_read_ahead(device))
    return checks


def _cpu_governor(root: SysRoot) -> Check:
    governors = _per_cpu(root, "cpufreq/scaling_governor")
    current = ", ".join(sorted(set(governors))) if governors else UNKNOWN
    return Check(
        "CPU frequency governor", current, "performance",
        _status(governors and set(governors) == {"performance"}, governors),
        "the mixed-analytics paper's profile pins the governor to performance so clock ramp-up does not add latency or cut throughput",
        "cpupower frequency-set -g performance",
    )


def _energy_bias(root: SysRoot) -> Check:
    bias = _per_cpu(root, "power/energy_perf_bias")
    if bias:
        current = ", ".join(sorted(set(bias)))
        good = set(bias) == {"0"}
        recommended = "0 (performance)"
    else:
        bias = _per_cpu(root, "cpufreq/energy_performance_preference")
        current = ", ".join(sorted(set(bias))) if bias else UNKNOWN
        good = bool(bias) and set(bias) == {"performance"}
        recommended = "performance"
    return Check(
        "CPU energy/performance bias", current, recommended, _status(good, bias),
        "the mixed-analytics paper sets energy_perf_bias=performance: power saving trades away throughput under load",
        "x86_energy_perf_policy performance",
    )


def _thp(root: SysRoot) -> Check:
    value = bracketed(root.read("/sys/kernel/mm/transparent_hugepage/enabled"))
    return Check(
        "Transparent huge pages", value or UNKNOWN, "never",
        _status(value == "never", value),
        "the mixed-analytics paper sets transparent_huge_pages=never; databases (PostgreSQL, Oracle, MongoDB) advise the same because "
        "compaction and khugepaged stalls show up as latency spikes",
        "echo never > /sys/kernel/mm/transparent_hugepage/enabled",
    )


def _sysctl(root: SysRoot, name: str, target: int, how: str, why: str) -> Check:
    value = root.read_int("/proc/sys/" + name.replace(".", "/"))
    good = value is not None and (value == target if how == "==" else value <= target)
    return Check(
        name, UNKNOWN if value is None else str(value), (f"≤ {target}" if how == "<=" else str(target)),
        _status(good, value), why, f"sysctl -w {name}={target}",
    )


def _sched_granularity(root: SysRoot, leaf: str, target: int) -> Check:
    # Kernels before 5.13 expose these as sysctls; later ones under debugfs; 6.6+ (EEVDF) dropped wakeup.
    value = root.read_int(f"/proc/sys/kernel/sched_{leaf}")
    if value is None:
        value = root.read_int(f"/sys/kernel/debug/sched/{leaf}")
    return Check(
        f"kernel.sched_{leaf}", UNKNOWN if value is None else str(value), str(target),
        _status(value == target, value),
        "the mixed-analytics paper lengthens scheduler time slices so busy workers are preempted less often (fewer context switches)",
        f"sysctl -w kernel.sched_{leaf}={target}  (on kernels ≥ 5.13: /sys/kernel/debug/sched/{leaf})",
    )


def _swap(root: SysRoot) -> Check:
    text = root.read("/proc/swaps")
    if text is None:
        return Check("Swap", UNKNOWN, "a small swap area with vm.swappiness ≤ 10", UNKNOWN_STATUS,
                     "a little swap lets the kernel page out idle memory instead of invoking the OOM killer mid-run")
    areas = text.splitlines()[1:]
    total_kib = sum(int(a.split()[2]) for a in areas if len(a.split()) > 2 and a.split()[2].isdigit())
    current = f"{total_kib / 2**20:.1f} GiB in {len(areas)} area(s)" if areas else "none"
    return Check(
        "Swap", current, "a small swap area with vm.swappiness ≤ 10", OK if areas else CHANGE,
        "the mixed-analytics paper's swappiness=10 assumes swap exists: a little swap lets the kernel page out idle memory instead of "
        "invoking the OOM killer mid-run, while low swappiness keeps the working set resident",
        "fallocate -l 4G /swapfile && chmod 600 /swapfile && mkswap /swapfile && swapon /swapfile",
    )


def _numa_balancing(root: SysRoot) -> Check:
    value = root.read_int("/proc/sys/kernel/numa_balancing")
    nodes = [n for n in root.listdir("/sys/devices/system/node") if n.startswith("node") and n[4:].isdigit()]
    if value is not None and len(nodes) == 1:
        return Check("kernel.numa_balancing", str(value), "0 on multi-socket hosts", OK,
                     "single NUMA node: automatic NUMA balancing has nothing to move")
    return Check(
        "kernel.numa_balancing", UNKNOWN if value is None else str(value), "0", _status(value == 0, value),
        "automatic NUMA balancing migrates database pages between nodes behind the engine's back; database vendors "
        "advise turning it off and placing memory explicitly",
        "sysctl -w kernel.numa_balancing=0",
    )


def _io_scheduler(device: dict[str, Any]) -> Check:
    name, current, rotational = device["name"], device.get("scheduler"), device.get("rotational")
    available = device.get("schedulers_available") or []
    if rotational:
        recommended, good = "mq-deadline", current in ("mq-deadline", "deadline")
        why = "a rotating disk benefits from request sorting with a deadline, which bounds read latency"
    else:
        recommended = "none" if "none" in available or not available else "noop"
        good = current in ("none", "noop", "mq-deadline")
        why = ("an SSD or array has its own deep queues; the kernel scheduler only adds CPU cost and latency "
               "(none, or mq-deadline, are the usual choices)")
    return Check(
        f"I/O scheduler ({name})", current or UNKNOWN, recommended,
        _status(good, current), why, f"echo {recommended} > /sys/block/{name}/queue/scheduler",
    )


READ_AHEAD_KB = 4096


def _read_ahead(device: dict[str, Any]) -> Check:
    name, value = device["name"], device.get("read_ahead_kb")
    return Check(
        f"Read-ahead ({name})", UNKNOWN if value is None else f"{value} KiB", f"≥ {READ_AHEAD_KB} KiB for scan-heavy data",
        _status(value is not None and value >= READ_AHEAD_KB, value),
        "decision-support and analytics scans read sequentially; a large read-ahead (tuned's throughput-performance "
        "uses 4096) keeps the device queue full. OLTP data files do not need it",
        f"blockdev --setra {READ_AHEAD_KB * 2} /dev/{name}",
    )


def _per_cpu(root: SysRoot, leaf: str) -> list[str]:
    values = []
    for cpu in root.listdir("/sys/devices/system/cpu"):
        if cpu.startswith("cpu") and cpu[3:].isdigit():
            value = root.read(f"/sys/devices/system/cpu/{cpu}/{leaf}")
            if value is not None:
                values.append(value)
    return values


def _status(good: Any, current: Any) -> str:
    if current is None or current == [] or current == UNKNOWN:
        return UNKNOWN_STATUS
    return OK if good else CHANGE


def tuned_profile() -> str:
    """A tuned profile in the shape of the mixed-analytics paper's sas-performance profile, plus the disk settings above."""
    return f"""# refbench database/analytics tuned profile, after the sas-performance profile of the SAS
# mixed-analytics paper. Install:
#   mkdir -p /etc/tuned/refbench-performance && cp THIS_FILE /etc/tuned/refbench-performance/tuned.conf
#   tuned-adm profile refbench-performance
[main]
summary=refbench: database and analytics throughput (after the mixed-analytics paper's sas-performance)

[cpu]
force_latency=1
governor=performance
energy_perf_bias=performance
min_perf_pct=100

[vm]
transparent_huge_pages=never

[disk]
# none suits SSDs and arrays; use mq-deadline for rotating disks
elevator=none
readahead=>{READ_AHEAD_KB}

[sysctl]
kernel.sched_min_granularity_ns = 10000000
kernel.sched_wakeup_granularity_ns = 15000000
vm.dirty_ratio = 40
vm.dirty_background_ratio = 10
vm.swappiness = 10
kernel.numa_balancing = 0
"""
