"""The KLD and probe clients against hostile servers (tests/fakes/answer_server.py, real HTTP on
127.0.0.1): answers of the wrong shape, NaN log-probabilities, huge answers, answers dripped
byte by byte, and probe patterns that backtrack. Each gives a located message and an exit
status, never a traceback, never a number made up."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes.answer_server import Behaviour, serving

from wikitools.cli import main
from wikitools.core.errors import InputError
from wikitools.quality.probe import load_probes

TOKENS = ["--seed", "0", "--positions", "3"]  # two positions to capture


def _capture(url: str, out: Path, *extra: str) -> int:
    return main(["kld", "capture", "--base-url", url, "--model", "m", *TOKENS,
                 "--out", str(out), *extra])


def _vllm(*positions: Any) -> bytes:
    return json.dumps({"choices": [{"prompt_logprobs": [None, *positions]}]}).encode()


def _sglang(*positions: Any) -> bytes:
    return json.dumps({"meta_info": {"input_top_logprobs": [None, *positions]}}).encode()


GOOD_VLLM = {"5": {"logprob": -0.5}, "6": {"logprob": -1.5}}


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_kld_capture_refuses_log_probabilities_that_are_not_finite(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    body = _vllm(GOOD_VLLM, {"5": {"logprob": 0}}).replace(b'"logprob": 0', b'"logprob": '
                                                           + value.encode())
    out = tmp_path / "cap.json"
    with serving(Behaviour(body)) as url:
        assert _capture(url, out, "--top-k", "2") == 1
    err = capsys.readouterr().err
    assert (f"{url}/v1/completions: choices[0].prompt_logprobs[2]['5']: log-probability "
            f"{float(value)} is not a finite number") in err
    assert not out.exists()


VLLM_SHAPES = {
    "a string": b'"hello"',
    "a list": b"[]",
    "choices a string": b'{"choices": "x"}',
    "no prompt_logprobs": b'{"choices": [{}]}',
    "position a list": _vllm([1, 2]),
    "entry a number": _vllm({"5": 3}),
    "token id a word": _vllm({"five": {"logprob": -1}}),
    "logprob a string": _vllm({"5": {"logprob": "low"}}),
    "empty position": _vllm({}),
}
SGLANG_SHAPES = {
    "entries a number": b'{"meta_info": {"input_top_logprobs": 5}}',
    "empty list answer": b"[]",
    "entry too short": _sglang([[-1.0]]),
    "token id a word": _sglang([[-1.0, "five", "x"]]),
    "logprob null": _sglang([[None, 5, "x"]]),
    "position a number": _sglang(7),
}


@pytest.mark.parametrize(("api", "body"), [
    *(("vllm", b) for b in VLLM_SHAPES.values()), *(("sglang", b) for b in SGLANG_SHAPES.values())
], ids=[*(f"vllm-{k}" for k in VLLM_SHAPES), *(f"sglang-{k}" for k in SGLANG_SHAPES)])
def test_kld_capture_of_an_answer_of_the_wrong_shape_is_a_located_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], api: str, body: bytes) -> None:
    out = tmp_path / "cap.json"
    with serving(Behaviour(body)) as url:
        assert _capture(url, out, "--api", api, "--top-k", "2") == 1
    err = capsys.readouterr().err
    path = "/v1/completions" if api == "vllm" else "/generate"
    assert err.startswith(f"wiki: error: {url}{path}: "), err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_kld_score_refuses_a_capture_holding_nan(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "ref.json"
    with serving(Behaviour(_vllm(GOOD_VLLM, GOOD_VLLM))) as url:
        assert _capture(url, good, "--top-k", "2") == 0
    data = json.loads(good.read_text())
    data["positions"][1][0][1] = math.nan
    bad = tmp_path / "cand.json"
    bad.write_text(json.dumps(data))  # NaN, as Python's json writes it
    capsys.readouterr()
    assert main(["kld", "score", str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert f"{bad.as_posix()}: positions[1]: log-probability nan is not a finite number" in err
    assert "mean KLD" not in out


def _probes(tmp_path: Path, *items: dict[str, Any]) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


@pytest.mark.parametrize("body", [b'"hello"', b'{"choices": ["x"]}', b'{"choices": [{}]}'],
                         ids=["a string", "choice a string", "no text"])
def test_probe_answer_of_the_wrong_shape_is_a_located_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: bytes) -> None:
    probes = _probes(tmp_path, {"prompt": "2+2=", "expect": "4"})
    out = tmp_path / "result.json"
    with serving(Behaviour(body)) as url:
        code = main(["probe", str(probes), "--base-url", url, "--model", "m", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.startswith(f"wiki: error: {probes.as_posix()}:1:1: {url}/v1/completions: the "
                          "answer has no choices[0].text string: "), err
    assert not out.exists()


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
def test_probe_answer_of_300_mb_is_refused_after_a_bounded_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], length: bool) -> None:
    probes = _probes(tmp_path, {"prompt": "2+2=", "expect": "4"})
    out = tmp_path / "result.json"
    size = 300 * 1024 * 1024
    behaviour = Behaviour(b"a" * size) if length else Behaviour(stream_bytes=size)
    with serving(behaviour) as url:
        code = main(["probe", str(probes), "--base-url", url, "--model", "m", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"{url}/v1/completions: the answer is over 4 MiB; the rest was not read" in err
    assert behaviour.sent < 64 * 1024 * 1024  # the client stopped reading long before the end
    assert not out.exists()


def _wiki(*args: str) -> subprocess.CompletedProcess[str]:
    """`wiki` in a subprocess with a deadline: the behaviours below used to never finish."""
    return subprocess.run([sys.executable, "-m", "wikitools", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_probe_pattern_that_backtracks_catastrophically_answers(tmp_path: Path) -> None:
    probes = _probes(tmp_path, {"prompt": "digits", "match": r"^(\d+)+$"})
    out = tmp_path / "result.json"
    with serving(Behaviour(json.dumps({"choices": [{"text": "1" * 64 + "x"}]}).encode())) as url:
        done = _wiki("probe", str(probes), "--base-url", url, "--model", "m", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr == "0/1 correct at c8\n"
    assert json.loads(out.read_text())["failures"][0]["expected"] == r"/^(\d+)+$/"


def test_probe_pattern_outside_re2_syntax_is_a_located_error(tmp_path: Path) -> None:
    probes = _probes(tmp_path, {"prompt": "x", "expect": "y"}, {"prompt": "x", "match": r"(a)\1"})
    with pytest.raises(InputError, match=r"p\.jsonl:2:1: bad regular expression \(RE2 syntax"):
        load_probes(probes, "p.jsonl")


def test_probe_timeout_is_a_deadline_for_an_answer_dripped_byte_by_byte(tmp_path: Path) -> None:
    probes = _probes(tmp_path, {"prompt": "2+2=", "expect": "4"})
    out = tmp_path / "result.json"
    with serving(Behaviour(drip_s=0.2)) as url:
        done = _wiki("probe", str(probes), "--base-url", url, "--model", "m", "--out", str(out),
                     "--timeout", "3")
    assert done.returncode == 0, done.stderr
    (failure,) = json.loads(out.read_text())["failures"]
    assert failure["answer"] == "(request failed: no whole answer within 3 s)"


def test_kld_timeout_is_a_deadline_for_an_answer_dripped_byte_by_byte(tmp_path: Path) -> None:
    out = tmp_path / "cap.json"
    with serving(Behaviour(drip_s=0.2)) as url:
        done = _wiki("kld", "capture", "--base-url", url, "--model", "m", *TOKENS,
                     "--out", str(out), "--timeout", "3")
    assert done.returncode == 1
    assert done.stderr == f"wiki: error: {url}/v1/completions: no whole answer within 3 s\n"
    assert not out.exists()
