"""KLD math, token inputs and probe files (wikitools.quality), on hand-made captures whose
divergence is known in closed form."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from wikitools.core.errors import InputError, UsageError
from wikitools.quality import capture as cap
from wikitools.quality import divergence
from wikitools.quality.probe import load_probes
from wikitools.quality.tokens import TokenInput, from_file, from_seed, input_hash


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


class _SGLangStandIn:
    """Answers `/generate` as SGLang's code reads (see wikitools.quality.capture): a prefix is
    taken from its radix cache only up to `min(len - 1, logprob_start_len)` tokens, the answer
    lists from `logprob_start_len` on (the first entry null) and names `cached_tokens`.
    Its "model" is a toy: position i's logits are the sum of the keys of tokens 0..i, a key read
    back from the cache is rounded to one decimal when `fp8`, a freshly computed one is exact."""

    VOCAB = 4

    def __init__(self, fp8: bool, radix: bool = True) -> None:
        self.fp8, self.radix = fp8, radix
        self.cached: list[list[int]] = []  # prompts whose keys are in the cache
        self.requests: list[dict[str, object]] = []

    def _key(self, token: int, read_back: bool) -> list[float]:
        exact = [math.sin(token * 0.37 + v) for v in range(self.VOCAB)]
        return [round(k, 1) for k in exact] if read_back and self.fp8 else exact

    def _prefix(self, ids: list[int], start: int) -> int:
        limit = min(len(ids) - 1, start)
        best = 0
        for old in self.cached if self.radix else ():
            n = 0
            while n < min(limit, len(old)) and old[n] == ids[n]:
                n += 1
            best = max(best, n)
        return best

    def answer(self, body: dict) -> dict:
        self.requests.append(body)
        ids, start, k = body["input_ids"], body["logprob_start_len"], body["top_logprobs_num"]
        prefix = self._prefix(ids, start)
        keys = [self._key(t, i < prefix) for i, t in enumerate(ids)]
        tops, scored = [], []
        for pos in range(start + 1, len(ids)):  # the distribution that predicts ids[pos]
            logits = [sum(key[v] for key in keys[:pos]) for v in range(self.VOCAB)]
            norm = math.log(sum(math.exp(x) for x in logits))
            lps = [x - norm for x in logits]
            order = sorted(range(self.VOCAB), key=lambda v: -lps[v])[:k]
            tops.append([[lps[v], v, str(v)] for v in order])
            scored.append([lps[ids[pos]], ids[pos], str(ids[pos])])
        tops, scored = [None, *tops], [[None, ids[start], str(ids[start])], *scored]
        self.cached.append(ids)
        meta = {"input_top_logprobs": tops, "input_token_logprobs": scored,
                "cached_tokens": prefix}
        return {"text": "x", "meta_info": meta}


def _sglang_capture(stand_in: _SGLangStandIn, ids: tuple[int, ...]) -> cap.Capture:
    """A capture of `ids` from `stand_in`, served over HTTP on 127.0.0.1 for the one call."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_a: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(stand_in.answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        return cap.capture(f"http://127.0.0.1:{server.server_address[1]}", "m", from_list(ids),
                           3, api="sglang", timeout=30)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def from_list(ids: tuple[int, ...]) -> TokenInput:
    return TokenInput(ids, "test")


def test_sglang_captures_read_the_kv_cache_for_the_second_half(
        tmp_path: Path) -> None:
    ids = (1, 3, 0, 2, 2, 1, 3, 0, 1, 2)
    bf16 = _sglang_capture(_SGLangStandIn(fp8=False), ids)
    fp8_server = _SGLangStandIn(fp8=True)
    fp8 = _sglang_capture(fp8_server, ids)
    # two requests: from 0, then from the middle, whose prefix came from the cache
    assert [r["logprob_start_len"] for r in fp8_server.requests] == [0, 5]
    assert fp8.cache_read == {"from_position": 5, "cached_tokens": 5}
    assert len(fp8.positions) == len(ids) - 1
    # the first half was computed fresh (equal to BF16), the second against the FP8 cache
    assert fp8.positions[:5] == bf16.positions[:5]
    div = divergence.divergence(bf16, fp8)
    assert all(v == 0 for v in div.per_position[:5]) and all(v > 0 for v in div.per_position[5:])
    path = tmp_path / "c.json"
    path.write_text(cap.dumps(fp8))
    assert cap.load(path) == fp8


def test_sglang_without_its_prefix_cache_captures_nothing_of_the_kv_format() -> None:
    ids = (1, 3, 0, 2, 2, 1, 3, 0, 1, 2)
    bf16 = _sglang_capture(_SGLangStandIn(fp8=False), ids)
    fp8 = _sglang_capture(_SGLangStandIn(fp8=True, radix=False), ids)
    assert fp8.cache_read == {"from_position": 5, "cached_tokens": 0}
    assert fp8.positions == bf16.positions  # what the byte-identity check then reports


def test_an_sglang_answer_that_does_not_fit_the_input_is_a_capture_error() -> None:
    class Shifted(_SGLangStandIn):
        def answer(self, body: dict) -> dict:
            meta = super().answer(body)["meta_info"]
            meta["input_token_logprobs"] = meta["input_token_logprobs"][:1] + [
                [lp, (t + 1) % self.VOCAB, s] for lp, t, s in meta["input_token_logprobs"][1:]]
            return {"meta_info": meta}

    with pytest.raises(cap.CaptureError, match="not the last tokens of the input"):
        _sglang_capture(Shifted(fp8=False), (1, 3, 0, 2, 2, 1))

    class Broken(_SGLangStandIn):
        def answer(self, body: dict) -> dict:
            return {"meta_info": {
                "input_top_logprobs": [None, "x"], "input_token_logprobs": [None, [0.0, 0]]}}

    with pytest.raises(cap.CaptureError, match=r"not a list of \[log-probability, token id"):
        _sglang_capture(Broken(fp8=False), (1, 3, 0))
