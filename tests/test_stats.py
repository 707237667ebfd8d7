"""Medians, spreads and the noisy mark of repeated measurements."""

from __future__ import annotations

from wikitools.runbook.records.stats import NOISY_SPREAD, median_metrics, relative_change, spread_of


def test_median_of_samples_keeps_every_key():
    got = median_metrics([
        {"output_throughput": 100.0, "completed": 64, "tool": "vllm-bench-serve"},
        {"output_throughput": 130.0, "completed": 64, "tool": "vllm-bench-serve"},
        {"output_throughput": 110.0, "completed": 63, "tool": "vllm-bench-serve",
         "p99_ttft_ms": 5.0},
    ])
    assert got == {"output_throughput": 110.0, "completed": 64, "tool": "vllm-bench-serve",
                   "p99_ttft_ms": 5.0}


def test_median_of_one_sample_is_the_sample():
    assert median_metrics([{"a": 1.5, "b": None}]) == {"a": 1.5, "b": None}
    assert median_metrics([]) == {}


def test_even_count_median_and_integer_counts():
    got = median_metrics([{"x": 1.0, "n": 2}, {"x": 2.0, "n": 4}])
    assert got == {"x": 1.5, "n": 2}  # counts stay whole numbers (the lower middle)


def test_spread_and_noisy_threshold():
    sp = spread_of([452.0, 499.0, 541.0])
    assert (sp.median, sp.low, sp.high, sp.count) == (499.0, 452.0, 541.0, 3)
    assert round(sp.relative, 3) == 0.178 and sp.noisy
    calm = spread_of([6451.0, 6443.0, 6460.0])
    assert calm.relative < NOISY_SPREAD and not calm.noisy
    assert spread_of([None, "x", True]) is None
    assert spread_of([5.0]).relative == 0.0


def test_relative_change():
    assert relative_change(100.0, 67.0) == -0.33
    assert relative_change(0.0, 5.0) is None
