"""Whether the host changed between the sides of a comparison, from the canary each case takes before and after
it is measured (refbench.host.canary): what no process counter sees — another VM on shared storage, a busy
hypervisor — moves the canary."""

from __future__ import annotations

from typing import Any

from refbench.host import canary
from refbench.report.compare import letters_of
from refbench.runstore import Run


def probes(side: list[Run]) -> list[dict[str, Any]]:
    return [p for run in side for r in run.records() for p in (r.extra.get("canary") or {}).values()]


def host_changed(sides: list[list[Run]]) -> list[str]:
    """One sentence per side whose canaries differ from A's beyond A's own spread ("the host changed between A and
    B: fsync 0.26 → 0.85 ms"); none when they agree or a side has no canary (runs from before it)."""
    base, out = probes(sides[0]), []
    for letter, side in zip(letters_of(len(sides))[1:], sides[1:]):
        if base and (mine := probes(side)) and (changed := canary.moved(base, mine)):
            out.append(f"the host changed between A and {letter}: {changed} (the canary before and after each case)")
    return out
