"""Repeated measurements: the median of each metric over a sweep point's samples, its spread,
and whether the spread is too large for the median to be trusted."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A point whose samples spread more than this around their median is marked noisy.
NOISY_SPREAD = 0.10

# Metrics whose spread the tables and the regression check look at.
KEY_METRICS = ("output_throughput", "median_ttft_ms", "median_tpot_ms")


def number(value: Any) -> float | None:
    """`value` as a float when it is a real, finite number (bools, strings, NaN, infinities and
    integers too large for a float are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        n = float(value)
    except OverflowError:
        return None
    return n if math.isfinite(n) else None


@dataclass(frozen=True, slots=True)
class Spread:
    """Median, minimum and maximum of one metric over the samples that have it."""

    median: float
    low: float
    high: float
    count: int

    @property
    def relative(self) -> float:
        """(max − min) / median; 0 when there is one sample or the median is 0."""
        if self.count < 2 or self.median == 0:
            return 0.0
        return (self.high - self.low) / abs(self.median)

    @property
    def noisy(self) -> bool:
        return self.relative > NOISY_SPREAD

    @property
    def half_range(self) -> float:
        """The ± the tables print: half the min–max range, relative to the median (0.029 for
        ±2.9 %); 0 for one sample."""
        return self.relative / 2

    @property
    def band(self) -> tuple[float, float]:
        """median ± half the range (what a table's `561.2 ±1.7 %` means); a single sample,
        which has no range of its own, gets the noise threshold: ±NOISY_SPREAD / 2."""
        half = (self.high - self.low) / 2 if self.count > 1 else abs(self.median) * NOISY_SPREAD / 2
        return self.median - half, self.median + half


def beyond_spread(old: Spread, new: Spread) -> bool:
    """True when two medians differ by more than their spreads: the bands the tables print
    (median ± half the range) do not overlap."""
    lo_o, hi_o = old.band
    lo_n, hi_n = new.band
    return hi_n < lo_o or hi_o < lo_n


def spread_of(values: Sequence[Any]) -> Spread | None:
    nums = [n for n in (number(v) for v in values) if n is not None]
    if not nums:
        return None
    return Spread(statistics.median(nums), min(nums), max(nums), len(nums))


def median_metrics(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One metrics mapping for a point: the median of every numeric metric over the samples
    (integers stay integers when every sample agrees); other values from the first sample."""
    if not samples:
        return {}
    if len(samples) == 1:
        return dict(samples[0])
    keys = sorted({k for s in samples for k in s})
    out: dict[str, Any] = {}
    for key in keys:
        values = [s.get(key) for s in samples]
        nums = [n for n in (number(v) for v in values) if n is not None]
        if nums and len(nums) == len([v for v in values if v is not None]):
            if all(isinstance(v, int) and not isinstance(v, bool) for v in values if v is not None):
                ints = sorted(int(v) for v in values if v is not None)
                out[key] = ints[(len(ints) - 1) // 2] if len(set(ints)) > 1 else ints[0]
            else:
                out[key] = statistics.median(nums)
        else:
            out[key] = next((v for v in values if v is not None), None)
    return out


def relative_change(old: float, new: float) -> float | None:
    """(new − old) / old, None when old is 0."""
    if old == 0:
        return None
    return (new - old) / abs(old)


__all__ = ["KEY_METRICS", "NOISY_SPREAD", "Spread", "beyond_spread", "median_metrics",
           "number", "relative_change", "spread_of"]
