"""refbench host and clean: the host's inventory and tuning audit, and removing the work data runs left on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.table import Table as RichTable

from refbench import runner
from refbench.cli.console import RUNS_DIR_HELP, epilog, err, out, print_json, print_table
from refbench.errors import UserError
from refbench.fileio import atomic_write_text
from refbench.formats import fmt
from refbench.runstore import Run, list_runs

commands = typer.Typer()


@commands.command(short_help="Remove the work data a kept or interrupted run left.",
                  epilog=epilog("refbench clean runs/20261122T070000Z-lab-a  # a kept or interrupted run",
                                "refbench clean --all-work --runs-dir /data/refbench-runs  # every run not running"))
def clean(
    run_ref: Optional[str] = typer.Argument(None, metavar="RUN", help="Run directory, or a unique part of its name."),
    all_work: bool = typer.Option(False, "--all-work", help="Every run in the runs directory that is not running."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
) -> None:
    """Remove the work data a kept or interrupted run left: generated data, database directories and test files,
    in its targets too (never a target itself, nor anything refbench did not create). Its records and report stay;
    a run in use by another process is refused."""
    if (run_ref is None) == (not all_work):
        raise UserError("name a RUN or give --all-work (not both).")
    runs = list_runs(runs_dir) if all_work else [Run.find(run_ref or "", runs_dir)]
    removed = runner.clean(runs, err, each=all_work)
    tunes = []
    if all_work:  # and what tunes killed with their watchdog left: their loaded database and its copy
        from refbench.tune.leftovers import remove_data_of_dead_tunes

        tunes = remove_data_of_dead_tunes(Path(runs_dir) / "tune", lambda line: err.print(line, soft_wrap=True))
    where = f"{len(runs)} run(s) in {runs_dir}" if all_work else str(runs[0].path)
    err.print(f"work data removed: {sum(size for _, size in removed) / 1e6:,.1f} MB from {where}" if removed
              else f"no work data left by {where}" + (f" (the data of {len({p.parent for p in tunes})} killed tune(s) removed)" if tunes else ""),
              soft_wrap=True)


@commands.command(short_help="Inventory the host and audit its tuning.",
                  epilog=epilog("refbench host", "refbench host --json > host.json",
                                "refbench host --tuned-profile /etc/tuned/refbench-performance/tuned.conf"))
def host(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    tuned_profile: Optional[Path] = typer.Option(None, "--tuned-profile", help="Write a tuned profile (like the mixed analytics paper's) to PATH."),
    sysroot: Path = typer.Option(Path("/"), "--sysroot", hidden=True, help="Read /proc and /sys under this root (tests)."),
) -> None:
    """Inventory the host and audit its tuning against what the reference papers set (the mixed analytics paper's
    tuned profile)."""
    from refbench.host import inventory, tuning
    from refbench.host.sysfs import SysRoot

    root = SysRoot(sysroot)
    inv = inventory.collect(root)
    checks = tuning.audit(root, inv)
    if tuned_profile is not None:
        try:
            atomic_write_text(tuned_profile, tuning.tuned_profile())
        except OSError as exc:
            raise UserError(f"cannot write the tuned profile to {tuned_profile}: {exc.strerror}.") from None
        err.print(f"tuned profile written to {tuned_profile}")
    if as_json:
        print_json({"inventory": inv, "audit": [c.to_dict() for c in checks]})
        return
    _print_host(inv, checks)


def _print_host(inv: dict[str, Any], checks: list) -> None:
    cpu, mem, system, numa = inv["cpu"], inv["memory"], inv["system"], inv["numa"]
    facts = RichTable(show_header=False, title="Host inventory", title_justify="left")
    for k, v in [
        ("host", inv.get("hostname")), ("system", " ".join(filter(None, [system["vendor"], system["product"]])) or None),
        ("virtualization", system["virtualization"]), ("distribution", system["distribution"]), ("kernel", system["kernel"]),
        ("CPU", cpu["model"]), ("sockets / cores / threads", f"{fmt(cpu['sockets'])} / {fmt(cpu['cores'])} / {fmt(cpu['threads'])}"),
        ("memory", f"{fmt(mem['total_gib'])} GiB (swap {fmt(mem['swap_total_gib'])} GiB)"), ("NUMA nodes", numa["nodes"]),
        *((t, v or "not found") for t, v in inv["tools"].items()),
    ]:
        facts.add_row(k, "unknown" if v is None else str(v))
    print_table(facts)
    devices = RichTable("device", "model", "size", "rot", "sector L/P B", "scheduler", "nr_req", "read-ahead",
                        title="Block devices", title_justify="left")
    for d in inv["block_devices"]:
        size = f"{d['size_bytes'] / 1e9:,.1f} GB" if d["size_bytes"] else "unknown"
        devices.add_row(d["name"], d["model"] or "unknown", size, fmt(d["rotational"]),
                        f"{fmt(d['logical_sector_bytes'])}/{fmt(d['physical_sector_bytes'])}", d["scheduler"] or "unknown",
                        fmt(d["nr_requests"]), f"{fmt(d['read_ahead_kb'])} KiB")
    print_table(devices)
    mounts = RichTable("device", "mount point", "fs", "size", "free", title="File systems", title_justify="left")
    for m in inv["mounts"]:  # capacity in GB, as the block devices' sizes and the space checks say it
        mounts.add_row(m["device"], m["mountpoint"], m["fstype"],
                       *(f"{m[k] * 2**30 / 1e9:,.1f} GB" if m.get(k) is not None else "unknown" for k in ("size_gib", "free_gib")))
    print_table(mounts)
    audit = RichTable("setting", "current", "recommended", "status", title="Tuning audit", title_justify="left")
    for c in checks:
        style = {"ok": "green", "change": "red", "unknown": "yellow"}[c.status]
        audit.add_row(c.setting, c.current, c.recommended, f"[{style}]{c.status}[/{style}]")
    print_table(audit)
    for c in (c for c in checks if c.status == "change"):
        out.print(f"[bold]{c.setting}[/bold]: {c.why}. Fix:")
        out.print(f"  [cyan]{escape(c.fix)}[/cyan]", soft_wrap=True)  # whole, for copying: the terminal wraps it
    out.print("[dim]unknown = this host does not expose the setting (common in VMs and containers). "
              "--tuned-profile FILE writes the recommended values as a tuned profile.[/dim]")
