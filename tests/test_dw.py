"""The data-warehouse rating: its capacity rules, relative throughput, and a run on real engines."""

from __future__ import annotations

import pytest

from refbench.suites.dw.capacity import CapacityRules, whole_tb


def test_capacity_rules_reproduce_paper_000():
    rules = CapacityRules()
    assert whole_tb(rules.maximum_tb(12_000)) == 41  # 12,000 GB data volume → "Maximum User Data Capacity (TB) 41"
    assert rules.maximum_tb(12_000) == pytest.approx(40.5)
    rating = rules.rate(12_000, physical_scan_mb_s=4_849, memory_gb=512)
    assert whole_tb(rating["rated_tb"]) == 36 and rating["decided_by"] == "memory limit"  # "Rated User Capacity (TB) 36"
    assert rating["limits_tb"]["throughput limit"] > rating["limits_tb"]["maximum user data capacity"]


def test_each_limit_can_decide_and_the_rules_are_configurable():
    rules = CapacityRules()
    assert rules.rate(100, physical_scan_mb_s=10_000, memory_gb=10_000)["decided_by"] == "maximum user data capacity"
    assert rules.rate(100_000, physical_scan_mb_s=50, memory_gb=10_000)["decided_by"] == "throughput limit"
    strict = CapacityRules(free_space_pct=20, temp_reserve_pct=50, compression=2)
    assert strict.maximum_tb(1000) == pytest.approx(1000 * 0.8 * 0.5 * 2 / 1000)
    assert strict.rate(1000, None, 1)["rules"]["compression"] == 2
