"""KLD math, token inputs and probe files (wikitools.quality), on hand-made captures whose
divergence is known in closed form."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from wikitools.core.errors import InputError, UsageError
from wikitools.quality import capture as cap
from wikitools.quality import divergence
from wikitools.quality.probe import load_probes
from wikitools.quality.tokens import from_file, from_seed, input_hash


def _capture(positions: list[list[tuple[int, float]]], top_k: int = 2,
             sha: str = "sha256:x") -> cap.Capture:
    return cap.Capture("m", "vllm", top_k, sha, "seed:0", tuple(tuple(p) for p in positions))


def _lp(*probs: float) -> list[float]:
    return [math.log(p) for p in probs]


def test_full_vocabulary_kld_is_the_closed_form_and_renormalises_rounding() -> None:
    p, q = (0.7, 0.2, 0.1), (0.5, 0.3, 0.2)
    want = sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))
    # rounded log-probabilities whose probabilities sum to 1.003: renormalised first
    ref = _capture([[(i, lp + 0.003) for i, lp in enumerate(_lp(*p))]], top_k=-1)
    cand = _capture([[(i, lp) for i, lp in enumerate(_lp(*q))]], top_k=-1)
    div = divergence.divergence(ref, cand)
    assert div.per_position[0] == pytest.approx(want, rel=1e-9)
    assert divergence.divergence(ref, ref).per_position == (0.0,)


def test_top_k_folds_the_tail_into_one_bucket_and_is_a_lower_bound() -> None:
    p, q = (0.6, 0.3, 0.06, 0.04), (0.5, 0.3, 0.1, 0.1)
    full = sum(a * math.log(a / b) for a, b in zip(p, q, strict=True))
    ref = _capture([[(0, math.log(0.6)), (1, math.log(0.3))]])
    cand = _capture([[(0, math.log(0.5)), (1, math.log(0.3))]])
    folded = 0.6 * math.log(0.6 / 0.5) + 0.1 * math.log(0.1 / 0.2)
    got = divergence.divergence(ref, cand).per_position[0]
    assert got == pytest.approx(folded, rel=1e-9)
    assert 0 < got < full


def test_a_reference_token_missing_from_the_candidates_top_k_is_estimated_and_counted() -> None:
    ref = _capture([[(0, math.log(0.6)), (1, math.log(0.3))]])
    cand = _capture([[(0, math.log(0.5)), (2, math.log(0.2))]])
    div = divergence.divergence(ref, cand)
    # token 1's q: the leftover 0.3 shared by one missing token, capped at the k-th (0.2)
    q1 = 0.2
    want = (0.6 * math.log(0.6 / 0.5) + 0.3 * math.log(0.3 / q1)
            + 0.1 * math.log(0.1 / (1 - 0.5 - q1)))
    assert div.estimated == 1
    assert div.per_position[0] == pytest.approx(want, rel=1e-9)
    assert div.top1_agree == 1


def test_summary_means_run_sd_and_position_sd() -> None:
    runs = [divergence.Divergence((0.1, 0.3), 2, 0), divergence.Divergence((0.3, 0.5), 1, 0)]
    s = divergence.summarise(runs, 20)
    assert s.mean == pytest.approx(0.3)
    assert s.run_sd == pytest.approx(math.sqrt(0.02))  # means 0.2 and 0.4
    assert s.position_sd == pytest.approx(0.1)  # per-position means 0.2 and 0.4
    assert (s.positions, s.runs, s.top_k) == (2, 2, 20)
    assert s.top1_agreement == pytest.approx(0.75)
    assert divergence.summarise(runs[:1], 20).run_sd is None


def test_captures_of_different_inputs_are_refused() -> None:
    with pytest.raises(InputError, match="not the same tokens"):
        divergence.divergence(_capture([[(0, 0.0)]], sha="sha256:a"),
                              _capture([[(0, 0.0)]], sha="b"))


def test_capture_files_round_trip(tmp_path: Path) -> None:
    c = _capture([[(5, -0.25), (7, -1.5)], [(1, -0.1), (2, -2.5)]])
    path = tmp_path / "c.json"
    path.write_text(cap.dumps(c))
    assert cap.load(path) == c
    path.write_text("{}")
    with pytest.raises(InputError, match="not a KLD capture"):
        cap.load(path)


def test_seeded_input_is_reproducible_and_pinned_by_hash(tmp_path: Path) -> None:
    a, b = from_seed(0, 16, 3, 512), from_seed(0, 16, 3, 512)
    assert a.ids == b.ids and a.sha256 == b.sha256 == input_hash(list(a.ids))
    assert all(3 <= i < 512 for i in a.ids)
    assert from_seed(1, 16, 3, 512).sha256 != a.sha256
    f = tmp_path / "ids.json"
    f.write_text(json.dumps(list(a.ids)))
    assert from_file(f).sha256 == a.sha256
    with pytest.raises(UsageError):
        from_seed(0, 1, 3, 512)


def test_probe_files_are_read_with_located_errors(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('# header\n{"prompt": "2+2=", "expect": "4"}\n\n'
                 '{"prompt": "Say hi", "match": "(?i)hi", "max_tokens": 4}\n')
    probes = load_probes(f, "p.jsonl")
    assert [p.line for p in probes] == [2, 4]
    assert probes[0].check(" 4\n") and not probes[0].check("5")
    assert probes[1].check("Oh HI there") and probes[1].expected == "/(?i)hi/"
    f.write_text('{"prompt": "x", "expect": "1", "match": "1"}\n')
    with pytest.raises(InputError, match=r"p.jsonl:1:1: give either"):
        load_probes(f, "p.jsonl")
    f.write_text('{"prompt": "x", "match": "("}\n')
    with pytest.raises(InputError, match=r"p.jsonl:1:1: bad regular expression"):
        load_probes(f, "p.jsonl")
