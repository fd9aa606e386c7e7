"""refbench host on fake /proc and /sys trees: full ones parse right, sparse ones say unknown, none crash."""

from __future__ import annotations

from pathlib import Path

from refbench.host import tuning
from refbench.host.inventory import collect
from refbench.host.sysfs import SysRoot

CPUINFO = "".join(
    f"processor\t: {i}\nmodel name\t: Test CPU 9000\nphysical id\t: {i // 4}\ncore id\t\t: {(i // 2) % 2}\ncpu MHz\t\t: 2500.000\n\n"
    for i in range(8)
)


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def full_tree(root: Path) -> Path:
    write(root, "proc/cpuinfo", CPUINFO)
    write(root, "proc/meminfo", "MemTotal:       16777216 kB\nMemAvailable:    8388608 kB\nSwapTotal:       2097152 kB\nHugePages_Total:       0\n")
    write(root, "proc/sys/kernel/osrelease", "6.1.0-test\n")
    write(root, "etc/os-release", 'PRETTY_NAME="Test Linux 1"\n')
    write(root, "proc/sys/vm/dirty_ratio", "40\n")
    write(root, "proc/sys/vm/dirty_background_ratio", "10\n")
    write(root, "proc/sys/vm/swappiness", "60\n")
    write(root, "proc/sys/kernel/numa_balancing", "1\n")
    write(root, "proc/swaps", "Filename Type Size Used Priority\n/swapfile file 2097148 0 -2\n")
    write(root, "sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n")
    for cpu in range(8):
        write(root, f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "performance" if cpu else "powersave")
    for node in (0, 1):
        write(root, f"sys/devices/system/node/node{node}/cpulist", f"{node * 4}-{node * 4 + 3}")
    dev = "sys/block/nvme0n1"
    write(root, f"{dev}/size", str(2 * 10**9 // 512))
    write(root, f"{dev}/device/model", "Fake NVMe 2TB")
    write(root, f"{dev}/queue/rotational", "0")
    write(root, f"{dev}/queue/logical_block_size", "512")
    write(root, f"{dev}/queue/physical_block_size", "4096")
    write(root, f"{dev}/queue/scheduler", "[none] mq-deadline kyber")
    write(root, f"{dev}/queue/nr_requests", "1023")
    write(root, f"{dev}/queue/read_ahead_kb", "128")
    write(root, f"{dev}/nvme0n1p1/partition", "1")
    write(root, "proc/self/mounts", "/dev/nvme0n1p1 /data xfs rw,noatime 0 0\nproc /proc proc rw 0 0\n")
    return root


def test_full_fake_tree_is_parsed(tmp_path):
    root = SysRoot(full_tree(tmp_path))
    inv = collect(root)
    assert inv["cpu"] == {"model": "Test CPU 9000", "sockets": 2, "cores": 4, "threads": 8, "mhz": 2500.0}
    assert inv["memory"]["total_gib"] == 16.0 and inv["memory"]["swap_total_gib"] == 2.0
    assert inv["numa"]["nodes"] == 2
    assert inv["system"] | {} == inv["system"] and inv["system"]["kernel"] == "6.1.0-test"
    (dev,) = inv["block_devices"]
    assert dev["name"] == "nvme0n1" and dev["model"] == "Fake NVMe 2TB" and dev["size_bytes"] == 2 * 10**9 // 512 * 512
    assert dev["rotational"] is False and dev["physical_sector_bytes"] == 4096 and dev["scheduler"] == "none"
    assert dev["partitions"] == ["nvme0n1p1"]
    assert [m["mountpoint"] for m in inv["mounts"]] == ["/data"]

    checks = {c.setting: c for c in tuning.audit(root, inv)}
    assert checks["Transparent huge pages"].status == "ok"
    assert checks["CPU frequency governor"].status == "change"  # one CPU is on powersave
    assert checks["vm.dirty_ratio"].status == "ok"
    assert checks["vm.swappiness"].status == "change" and checks["vm.swappiness"].current == "60"
    assert checks["kernel.numa_balancing"].status == "change"  # two nodes, balancing on
    assert checks["I/O scheduler (nvme0n1)"].status == "ok"
    assert checks["Read-ahead (nvme0n1)"].status == "change"
    assert checks["Swap"].status == "ok"
    assert checks["kernel.sched_min_granularity_ns"].status == "unknown"


def test_host_cli_on_a_sparse_tree_says_unknown(tmp_path, refbench):
    root = tmp_path / "root"
    write(root, "proc/meminfo", "MemTotal: 1048576 kB\n")
    write(root, "sys/block/sda/size", "not a number")
    write(root, "sys/block/sda/queue/scheduler", "")
    (root / "sys/block/sdb").mkdir(parents=True)
    result = refbench("host", "--sysroot", str(root), "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    assert data["inventory"]["cpu"]["model"] is None
    assert data["inventory"]["memory"]["total_gib"] == 1.0
    assert {d["name"] for d in data["inventory"]["block_devices"]} == {"sda", "sdb"}
    statuses = {c["setting"]: c["status"] for c in data["audit"]}
    assert statuses["vm.dirty_ratio"] == "unknown" and statuses["Transparent huge pages"] == "unknown"
    assert statuses["I/O scheduler (sda)"] == "unknown"

    text = refbench("host", "--sysroot", str(root))
    assert text.code == 0, text.stderr
    assert "unknown" in text.stdout


def test_host_cli_on_an_empty_tree_and_tuned_profile(tmp_path, refbench):
    (tmp_path / "empty").mkdir()
    profile = tmp_path / "tuned.conf"
    result = refbench("host", "--sysroot", str(tmp_path / "empty"), "--tuned-profile", str(profile))
    assert result.code == 0, result.stderr
    text = profile.read_text()
    for line in ("governor=performance", "energy_perf_bias=performance", "transparent_huge_pages=never",
                 "vm.dirty_ratio = 40", "vm.dirty_background_ratio = 10", "vm.swappiness = 10",
                 "kernel.sched_min_granularity_ns = 10000000"):
        assert line in text


def test_host_on_this_machine_reports_tools(refbench):
    result = refbench("host", "--json")
    assert result.code == 0, result.stderr
    inv = result.json()["inventory"]
    assert inv["cpu"]["threads"] and inv["memory"]["total_gib"] > 0
    assert inv["tools"]["fio"].startswith("fio-")  # setup installs fio
    assert "PostgreSQL" in inv["tools"]["postgresql"]


def test_unwritable_tuned_profile_is_one_sentence(tmp_path, refbench):
    result = refbench("host", "--json", "--tuned-profile", "/proc/refbench-cannot-write-here")
    assert result.code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "cannot write the tuned profile" in result.stderr


def test_at_80_columns_nothing_is_cut_and_every_fix_is_whole(tmp_path):
    """A table too wide for the terminal is stacked, not elided ("75,9…"); a Fix: command is printed on one line
    of its own (the terminal wraps it), so that it can be copied whole."""
    import json
    import subprocess

    from conftest import cli_env, refbench_command

    root = full_tree(tmp_path / "root")
    shown = subprocess.run(refbench_command("host", "--sysroot", str(root)), capture_output=True, text=True,
                           env=cli_env(COLUMNS="80"))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "…" not in shown.stdout
    fixes = [c["fix"] for c in json.loads(subprocess.run(refbench_command("host", "--sysroot", str(root), "--json"),
                                                         capture_output=True, text=True, env=cli_env()).stdout)["audit"]
             if c["status"] == "change"]
    assert fixes and all(f"  {fix}" in lines for fix in fixes)
    assert all(len(line) <= 80 for line in lines if line.strip() not in fixes)
