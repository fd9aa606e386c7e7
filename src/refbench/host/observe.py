"""REFBENCH_OBSERVE=off: measure without refbench's own observers of the host — the canary and the split of the
machine's time — so that bench/observe_bench.py can say what they cost (the session sampler has its own switch,
--no-sample-sessions). Nothing is judged disturbed then: nothing was watched."""

from __future__ import annotations

import os
from typing import Any


def observing() -> bool:
    return os.environ.get("REFBENCH_OBSERVE", "").lower() != "off"


class Unobserved:
    """Stands in for a MachineTime (refbench.host.contention): the interval is not split."""

    def start(self) -> None:
        pass

    def stop(self, own_written_bytes: float | None = None) -> dict[str, Any]:
        return {}
