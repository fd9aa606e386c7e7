"""What the host is: CPU, memory, NUMA, block devices, mounts, kernel, distribution, tool versions."""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import socket
import subprocess
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from refbench.host.sysfs import SysRoot, bracketed

PSEUDO_FS = {
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "securityfs", "debugfs", "tracefs",
    "pstore", "bpf", "mqueue", "hugetlbfs", "configfs", "fusectl", "autofs", "binfmt_misc", "rpc_pipefs",
    "nsfs", "efivarfs", "ramfs", "selinuxfs",
}


def collect(root: SysRoot | None = None) -> dict[str, Any]:
    root = root or SysRoot()
    return {
        "hostname": socket.gethostname() if root.is_live else None,
        "system": system_info(root),
        "cpu": cpu_info(root),
        "memory": memory_info(root),
        "numa": numa_info(root),
        "block_devices": block_devices(root),
        "mounts": mounts(root),
        "tools": tool_versions() if root.is_live else {},
    }


def system_info(root: SysRoot) -> dict[str, Any]:
    os_release = _key_values(root.read("/etc/os-release") or "")
    return {
        "kernel": root.read("/proc/sys/kernel/osrelease"),
        "distribution": os_release.get("PRETTY_NAME"),
        "architecture": platform.machine() if root.is_live else None,
        "vendor": root.read("/sys/class/dmi/id/sys_vendor"),
        "product": root.read("/sys/class/dmi/id/product_name"),
        "virtualization": _virtualization(root),
    }


def _virtualization(root: SysRoot) -> str | None:
    cpuinfo = root.read("/proc/cpuinfo") or ""
    if root.path("/.dockerenv").exists() or "container" in (root.read("/proc/1/environ") or ""):
        return "container"
    if re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M):
        product = root.read("/sys/class/dmi/id/product_name") or ""
        return f"virtual machine ({product})" if product else "virtual machine"
    return "none" if cpuinfo else None


def cpu_info(root: SysRoot) -> dict[str, Any]:
    text = root.read("/proc/cpuinfo")
    if not text:
        return {"model": None, "sockets": None, "cores": None, "threads": None}
    processors = [_key_values(block, sep=":") for block in text.split("\n\n") if block.strip()]
    processors = [p for p in processors if "processor" in p]
    model = next((p.get("model name") for p in processors if p.get("model name")), None)
    sockets = {p.get("physical id") for p in processors if "physical id" in p}
    cores = {(p.get("physical id"), p.get("core id")) for p in processors if "core id" in p}
    return {
        "model": model,
        "sockets": len(sockets) or None,
        "cores": len(cores) or None,
        "threads": len(processors) or None,
        "mhz": _float(processors[0].get("cpu MHz")) if processors else None,
    }


def memory_info(root: SysRoot) -> dict[str, Any]:
    meminfo = _key_values(root.read("/proc/meminfo") or "", sep=":")

    def gib(key: str) -> float | None:
        value = meminfo.get(key)
        return round(int(value.split()[0]) / 2**20, 2) if value else None

    return {
        "total_gib": gib("MemTotal"),
        "available_gib": gib("MemAvailable"),
        "swap_total_gib": gib("SwapTotal"),
        "hugepages_total": int(meminfo["HugePages_Total"]) if "HugePages_Total" in meminfo else None,
    }


def numa_info(root: SysRoot) -> dict[str, Any]:
    nodes = [n for n in root.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)]
    return {
        "nodes": len(nodes) or None,
        "cpus_per_node": {n: root.read(f"/sys/devices/system/node/{n}/cpulist") for n in nodes},
    }


def block_devices(root: SysRoot) -> list[dict[str, Any]]:
    devices = []
    for name in root.listdir("/sys/block"):
        if name.startswith(("ram", "zram")):
            continue
        base = f"/sys/block/{name}"
        sectors = root.read_int(f"{base}/size")
        if name.startswith("loop") and not sectors:
            continue  # an unused loop device
        rotational = root.read_int(f"{base}/queue/rotational")
        devices.append(
            {
                "name": name,
                "model": root.read(f"{base}/device/model"),
                "size_bytes": sectors * 512 if sectors is not None else None,
                "rotational": None if rotational is None else bool(rotational),
                "logical_sector_bytes": root.read_int(f"{base}/queue/logical_block_size"),
                "physical_sector_bytes": root.read_int(f"{base}/queue/physical_block_size"),
                "scheduler": bracketed(root.read(f"{base}/queue/scheduler")),
                "schedulers_available": (root.read(f"{base}/queue/scheduler") or "").replace("[", "").replace("]", "").split() or None,
                "nr_requests": root.read_int(f"{base}/queue/nr_requests"),
                "read_ahead_kb": root.read_int(f"{base}/queue/read_ahead_kb"),
                "partitions": [p for p in root.listdir(base) if p.startswith(name) and root.path(f"{base}/{p}/partition").exists()],
            }
        )
    return devices


def mounts(root: SysRoot) -> list[dict[str, Any]]:
    text = root.read("/proc/self/mounts") or root.read("/proc/mounts") or ""
    out, seen = [], set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[2] in PSEUDO_FS:
            continue
        mountpoint = parts[1].replace("\\040", " ")
        if mountpoint in seen:
            continue  # stacked mounts: the last one listed is the visible one, but one row is enough
        seen.add(mountpoint)
        entry = {"device": parts[0], "mountpoint": mountpoint, "fstype": parts[2], "options": parts[3]}
        if root.is_live:
            try:
                st = os.statvfs(mountpoint)
                entry["size_gib"] = round(st.f_blocks * st.f_frsize / 2**30, 1)
                entry["free_gib"] = round(st.f_bavail * st.f_frsize / 2**30, 1)
            except OSError:
                pass
        out.append(entry)
    return out


def tool_versions() -> dict[str, str | None]:
    return {
        "python": platform.python_version(),
        "refbench": _package_version("refbench"),
        "fio": _command_version(["fio", "--version"]),
        "postgresql": _command_version([postgres_binary("postgres") or "postgres", "--version"]),
        "duckdb": _package_version("duckdb"),
    }


def postgres_binary(name: str) -> str | None:
    """A PostgreSQL server binary: on PATH, else the newest Debian-packaged one."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return candidates[-1] if candidates else None


def _command_version(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.splitlines()[0] if out else None


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _key_values(text: str, sep: str = "=") -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, found, value = line.partition(sep)
        if found:
            out[key.strip()] = value.strip().strip('"')
    return out


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
