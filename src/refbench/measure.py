"""Shared measurement: the steady-state test.

Steady state follows the SNIA Performance Test Specification: over a window of N rounds (default 5),
(max − min) ≤ 20% of the window average AND the least-squares line across the window moves (slope × span)
≤ 10% of the average. fio's own ``ss=iops_slope`` checks the slope alone, which accepts windows whose
samples scatter widely around a flat line; the range test catches those.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

RANGE_LIMIT = 0.20
SLOPE_LIMIT = 0.10


@dataclass(frozen=True)
class SteadyState:
    reached: bool
    mean: float
    range_fraction: float  # (max − min) / mean over the window
    slope_fraction: float  # |slope| × (n − 1) / mean: how far the fitted line moves across the window


def steady_state(samples: Sequence[float], window: int = 5, range_limit: float = RANGE_LIMIT,
                 slope_limit: float = SLOPE_LIMIT) -> SteadyState:
    """Tests the last ``window`` samples (one per round) against both SNIA criteria."""
    if window < 2 or len(samples) < window:
        return SteadyState(False, math.nan, math.nan, math.nan)
    ys = list(samples[-window:])
    mean = sum(ys) / window
    if mean <= 0:
        return SteadyState(False, mean, math.inf, math.inf)
    xs = range(window)
    x_mean = (window - 1) / 2
    slope = sum((x - x_mean) * (y - mean) for x, y in zip(xs, ys)) / sum((x - x_mean) ** 2 for x in xs)
    range_fraction = (max(ys) - min(ys)) / mean
    slope_fraction = abs(slope) * (window - 1) / mean
    return SteadyState(range_fraction <= range_limit and slope_fraction <= slope_limit, mean, range_fraction, slope_fraction)
