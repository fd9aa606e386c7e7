"""Capacity rules of the data-warehouse rating (the DWFT rating paper's "maximum" and "rated" user data capacity), stated
openly. TB here is 10^12 bytes and GB 10^9, as the paper counts.

Maximum user data capacity (the DWFT rating paper: 41 TB from a 12,000 GB data volume):
    data volume × (1 − free-space reserve) × (1 − temp reserve) × compression ratio
with the paper's defaults: 10% free space "recommended", 25% "reserved for TempDB", 5:1 compression.
12,000 GB × 0.90 × 0.75 × 5 = 40.5 TB, which the paper prints as 41.

Rated user data capacity = the smallest of three limits, and the report names the one that decided:
- the maximum user data capacity above;
- a throughput limit: the compressed user data the row store scans end to end in ``scan_hours`` at its
  measured physical scan rate (default 1 hour, refbench's rule: a full scan must fit in an hour);
- a memory limit: server memory / ``memory_gb_per_tb`` (default 14.2 GB per TB, the ratio of the DWFT rating paper's
  rated configuration: 512 GB for 36 TB; refbench's rule, calibrated on that paper).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

FREE_SPACE_PCT = 10.0
TEMP_RESERVE_PCT = 25.0
COMPRESSION = 5.0
SCAN_HOURS = 1.0
MEMORY_GB_PER_TB = 14.2


def whole_tb(tb: float) -> int:
    """Whole terabytes as the paper prints them: halves round up (40.5 → 41), unlike Python's round()."""
    return int(tb + 0.5)


def shown_tb(tb: float) -> float:
    """Whole terabytes like the paper from 10 TB up; below that two decimals, or a small system would rate 0."""
    return whole_tb(tb) if tb >= 10 else round(tb, 2)


@dataclass(frozen=True)
class CapacityRules:
    free_space_pct: float = FREE_SPACE_PCT
    temp_reserve_pct: float = TEMP_RESERVE_PCT
    compression: float = COMPRESSION
    scan_hours: float = SCAN_HOURS
    memory_gb_per_tb: float = MEMORY_GB_PER_TB

    def maximum_tb(self, data_volume_gb: float) -> float:
        return (data_volume_gb * (1 - self.free_space_pct / 100) * (1 - self.temp_reserve_pct / 100)
                * self.compression / 1000)

    def throughput_limit_tb(self, physical_scan_mb_s: float) -> float:
        return physical_scan_mb_s * 3600 * self.scan_hours * self.compression / 1e6

    def memory_limit_tb(self, memory_gb: float) -> float:
        return memory_gb / self.memory_gb_per_tb

    def rate(self, data_volume_gb: float, physical_scan_mb_s: float | None, memory_gb: float) -> dict[str, Any]:
        """The three limits, the rated capacity and the limit that decided it."""
        limits = {"maximum user data capacity": self.maximum_tb(data_volume_gb),
                  "memory limit": self.memory_limit_tb(memory_gb)}
        if physical_scan_mb_s:
            limits["throughput limit"] = self.throughput_limit_tb(physical_scan_mb_s)
        decided_by = min(limits, key=limits.get)
        return {"rated_tb": limits[decided_by], "decided_by": decided_by,
                "limits_tb": {k: round(v, 3) for k, v in limits.items()}, "rules": asdict(self)}
