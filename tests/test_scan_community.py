"""`wiki runbook scan` on community page shapes (tests/fixtures/community): every launcher shape
the community wiki uses is found and read right (engine, model, tensor-parallel size), and no
block that is not a launcher is reported as one. benchmarks/bench_scan.py prints the figures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("bench_scan", REPO / "benchmarks" / "bench_scan.py")
assert _SPEC and _SPEC.loader
bench_scan = importlib.util.module_from_spec(_SPEC)
sys.modules["bench_scan"] = bench_scan
_SPEC.loader.exec_module(bench_scan)

PAGES = REPO / "tests" / "fixtures" / "community"


def test_fixture_corpus_is_large_and_varied() -> None:
    pages, expected = bench_scan.expectations(PAGES)
    assert len(expected) >= 113
    engines = {e.engine for e in expected}
    assert engines == {"vllm", "sglang"}
    texts = "\n".join(p.text for p in pages)
    for shape in ("docker run", "docker exec", "entrypoint:", "command:", "$${", '"$@"',
                  "--tp-size", "--tp ", "-tp ", '\\"', "bash -lc", "<<'", "vllm/vllm-openai"):
        assert shape in texts, shape


def test_scan_reads_community_launchers() -> None:
    s = bench_scan.score(PAGES)
    report = "\n".join(s.lines() + list(s.misses))
    assert s.found >= 0.95 * s.launchers, report
    assert s.engine_right == s.found, report
    assert s.model_right >= 0.95 * s.found, report
    assert s.tp_right >= 0.95 * s.found, report
    assert s.false_positives == 0, report
