"""A KLD capture: the log-probabilities an engine gives each position of a fixed token input,
read through the engine's own API, written as one deterministic JSON file.

vLLM (read in the 0.26.0 sources, `sampling_params.py`, `config/model.py`,
`entrypoints/openai/completion/protocol.py`): `/v1/completions` takes `"prompt_logprobs": K` with
token-id prompts and answers `choices[0].prompt_logprobs`, one entry per prompt token, the first
`null`, each a mapping `"<token id>" -> {"logprob", "rank", "decoded_token"}` holding the K most
likely tokens plus the prompt's own token. K is capped by the server's `--max-logprobs` (default
20); `-1` on either side means the model's whole vocabulary, so a full-vocabulary capture needs a
server started with `--max-logprobs -1`. A log-probability of -inf is returned as -9999.0, and
streaming is refused with prompt log-probabilities.

SGLang: `/generate` with `input_ids`, `return_logprob`, `logprob_start_len: 0` and
`top_logprobs_num: K` answers `meta_info.input_top_logprobs`, one list of
`[logprob, token id, text]` per position, the first `null`."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikitools.core.errors import InputError, WikiError
from wikitools.quality import answers
from wikitools.quality.tokens import TokenInput, read_json

FORMAT = "wiki-kld-capture/1"
APIS = ("vllm", "sglang")


class CaptureError(WikiError):
    """The engine did not give the log-probabilities asked for; the message says what it said."""

    exit_code = 1


@dataclass(frozen=True, slots=True)
class Capture:
    """Per-position (token id, log-probability) pairs, most likely first; `top_k` -1 when the
    engine gave the whole vocabulary. Position i predicts token i+1 of the input."""

    model: str
    api: str
    top_k: int
    input_sha256: str
    input_source: str
    positions: tuple[tuple[tuple[int, float], ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "model": self.model,
            "api": self.api,
            "top_k": self.top_k,
            "input_sha256": self.input_sha256,
            "input_source": self.input_source,
            "positions": [[[i, lp] for i, lp in pos] for pos in self.positions],
        }


def dumps(capture: Capture) -> str:
    return json.dumps(capture.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"


def file_hash(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


ANSWER_LIMIT = 2048 * answers.MIB  # ~30 million top-k entries: lower --top-k or the positions


def _token(value: Any) -> int | None:
    """A token id as JSON gives it: a non-negative integer, or its decimal digits (vLLM's
    mapping keys)."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def pair(token: Any, logprob: Any, where: str) -> tuple[int, float]:
    """(token id, log-probability) checked: a NaN or infinite log-probability is refused, never
    written into a capture (it would make every KLD sum NaN, or a fake 0)."""
    tid = _token(token)
    if tid is None:
        raise CaptureError(f"{where}: token id {str(token)[:40]!r} is not a non-negative integer")
    if isinstance(logprob, bool) or not isinstance(logprob, int | float):
        raise CaptureError(f"{where}: log-probability {str(logprob)[:40]!r} is not a number")
    if not math.isfinite(logprob):
        raise CaptureError(f"{where}: log-probability {logprob} is not a finite number; the "
                           "engine's answer is refused")
    return tid, float(logprob)


def _position(pairs: list[tuple[int, float]], where: str) -> tuple[tuple[int, float], ...]:
    if not pairs:
        raise CaptureError(f"{where}: no log-probabilities at this position")
    return tuple(pairs)


def load(path: Path, shown: str | None = None) -> Capture:
    where = shown or path.as_posix()
    data = read_json(path, where, "the capture")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{where}: not a KLD capture (format {FORMAT} expected)")
    try:
        positions = tuple(
            _position([pair(i, lp, f"{where}: positions[{n}]") for i, lp in pos],
                      f"{where}: positions[{n}]")
            for n, pos in enumerate(data["positions"]))
        return Capture(str(data["model"]), str(data["api"]), int(data["top_k"]),
                       str(data["input_sha256"]), str(data.get("input_source", "")), positions)
    except CaptureError as exc:
        raise InputError(str(exc)) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: malformed capture ({exc})") from None


def capture(base_url: str, model: str, tokens: TokenInput, top_k: int, api: str = "vllm",
            timeout: float = 600.0) -> Capture:
    """Ask the server for the log-probabilities of every position of `tokens`; the whole
    answer within `timeout` seconds."""
    if top_k == 0 or top_k < -1:
        raise InputError(f"--top-k {top_k}: expected a positive number, or -1 for the whole "
                         "vocabulary")
    base = base_url.rstrip("/").removesuffix("/v1")
    if api == "vllm":
        positions = _vllm(base, model, tokens, top_k, timeout)
    elif api == "sglang":
        positions = _sglang(base, tokens, top_k, timeout)
    else:
        raise InputError(f"--api {api}: expected one of {', '.join(APIS)}")
    if len(positions) != len(tokens.ids) - 1:
        raise CaptureError(f"the server gave {len(positions)} positions for "
                           f"{len(tokens.ids)} tokens")
    return Capture(model, api, top_k, tokens.sha256, tokens.source, positions)


def _post(url: str, body: Mapping[str, Any], timeout: float) -> Any:
    try:
        answer = answers.fetch(answers.Request("POST", url, body), limit=ANSWER_LIMIT,
                               timeout=timeout)
        if answer.status != 200:
            raise CaptureError(f"{url} answered HTTP {answer.status}: {answer.text()}")
        return answer.json()
    except answers.AnswerError as exc:
        raise CaptureError(f"{url}: {exc}") from None


def _top(pairs: list[tuple[int, float]], top_k: int) -> tuple[tuple[int, float], ...]:
    """Most likely first (ties by id); the K best only: the prompt's own token, which vLLM adds
    beyond the top K, is left out so that every position holds the same set size."""
    ordered = sorted(pairs, key=lambda p: (-p[1], p[0]))
    return tuple(ordered if top_k == -1 else ordered[:top_k])


def _entries(data: Any, path: tuple[str | int, ...], url: str) -> list[Any]:
    """The per-position list at `path` in the answer (the first position, which predicts
    nothing, dropped); CaptureError naming the path when the answer is not shaped so."""
    shown = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")
    node = data
    for key in path:
        ok = (isinstance(node, dict) and isinstance(key, str) and key in node) or (
            isinstance(node, list) and isinstance(key, int) and len(node) > key)
        if not ok:
            raise CaptureError(f"{url}: the answer has no {shown}")
        node = node[key]
    if not isinstance(node, list) or not node:
        raise CaptureError(f"{url}: {shown} is not a non-empty list")
    return node[1:]


def _vllm(base: str, model: str, tokens: TokenInput, top_k: int,
          timeout: float) -> tuple[tuple[tuple[int, float], ...], ...]:
    body = {"model": model, "prompt": list(tokens.ids), "max_tokens": 1, "temperature": 0,
            "prompt_logprobs": top_k}
    url = f"{base}/v1/completions"
    entries = _entries(_post(url, body, timeout), ("choices", 0, "prompt_logprobs"), url)
    out = []
    for n, entry in enumerate(entries, 1):
        where = f"{url}: choices[0].prompt_logprobs[{n}]"
        if not isinstance(entry, dict):
            raise CaptureError(f"{where}: not a mapping of token ids to log-probabilities")
        pairs = [pair(k, v.get("logprob") if isinstance(v, dict) else None, f"{where}[{k!r}]")
                 for k, v in entry.items()]
        out.append(_top(list(_position(pairs, where)), top_k))
    return tuple(out)


def _sglang(base: str, tokens: TokenInput, top_k: int,
            timeout: float) -> tuple[tuple[tuple[int, float], ...], ...]:
    if top_k == -1:
        raise InputError("--top-k -1: SGLang's API gives top-k log-probabilities only")
    body = {"input_ids": list(tokens.ids),
            "sampling_params": {"max_new_tokens": 1, "temperature": 0},
            "return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": top_k}
    url = f"{base}/generate"
    data = _post(url, body, timeout)
    path: tuple[str | int, ...] = ("meta_info", "input_top_logprobs")
    entries = _entries(data, (0, *path) if isinstance(data, list) else path, url)
    out = []
    for n, entry in enumerate(entries, 1):
        where = f"{url}: meta_info.input_top_logprobs[{n}]"
        if not isinstance(entry, list):
            raise CaptureError(f"{where}: not a list of [log-probability, token id, text]")
        pairs = []
        for j, e in enumerate(entry):
            if not isinstance(e, list) or len(e) < 2:
                raise CaptureError(f"{where}[{j}]: not a [log-probability, token id, …] list")
            pairs.append(pair(e[1], e[0], f"{where}[{j}]"))
        out.append(_top(list(_position(pairs, where)), top_k))
    return tuple(out)


def served_model(base_url: str, timeout: float = 30.0) -> str:
    """The first model id of the server's /v1/models."""
    url = base_url.rstrip("/").removesuffix("/v1") + "/v1/models"
    try:
        answer = answers.fetch(answers.Request("GET", url), limit=answers.MIB, timeout=timeout)
        data = answer.json() if answer.status == 200 else None
    except answers.AnswerError as exc:
        raise CaptureError(f"{url}: {exc}") from None
    models = data.get("data") if isinstance(data, dict) else None
    first = models[0] if isinstance(models, list) and models else None
    if not isinstance(first, dict) or not first.get("id"):
        raise CaptureError(f"{url} named no model; give --model")
    return str(first["id"])
