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

vLLM's attention reads what it compares: its FlashAttention backend
(`vllm/v1/attention/backends/flash_attn.py`) writes each step's keys and values into the paged
KV cache and then computes attention from `key_cache`/`value_cache`, also during a prefill, so a
capture of one request sees an FP8 cache.

SGLang: `/generate` with `input_ids`, `return_logprob`, `logprob_start_len` and
`top_logprobs_num: K` answers `meta_info.input_top_logprobs` and `input_token_logprobs`, one
entry per input token from `logprob_start_len` on, the first `null` (no earlier token of the
answer predicts it: `scheduler_output_processor_mixin.py` pads it), each later one the
`[logprob, token id, text]` lists (resp. the triple) of the distribution that predicts that
token; and `meta_info.cached_tokens`, the prompt tokens taken from its prefix cache. Its prefill
attention uses the fresh keys and values of the tokens being computed and reads the KV cache
only for a prefix already in it (seen on an H200 with SGLang 0.5.17: captures with an FP8 KV
cache were byte for byte those with BF16): a reused prefix (the radix cache) or the earlier
chunks of a prompt longer than `--chunked-prefill-size` (`managers/scheduler.py` calls a chunked
request's `init_next_round_input()` without the tree cache, so it keeps the earlier chunks as
its prefix). The reuse is capped at `logprob_start_len` (`Req._compute_max_prefix_len` in
`python/sglang/srt/managers/schedule_batch.py`: `min(input_len - 1, logprob_start_len)` when
log-probabilities are asked), so one request with `logprob_start_len: 0` below one chunk never
reads the cache, and an FP8 KV cache would score exactly as BF16. The capture therefore asks
twice: the whole input from position 0 (which also leaves it in the radix cache), then the same
input from its middle, whose second half is computed against the first half read back from the
cache; the capture keeps the first half of the first answer and the second answer, and records
where the cache was read from and how many tokens SGLang said it took from the cache
(`cache_read`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from wikitools.core.errors import InputError, WikiError
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
    # SGLang: {"from_position": first position computed against the cache, "cached_tokens":
    # what the engine said it took from its cache}; None where one request reads the cache.
    cache_read: Mapping[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT,
            "model": self.model,
            "api": self.api,
            "top_k": self.top_k,
            "input_sha256": self.input_sha256,
            "input_source": self.input_source,
            "positions": [[[i, lp] for i, lp in pos] for pos in self.positions],
        }
        if self.cache_read is not None:
            out["cache_read"] = dict(self.cache_read)
        return out


def dumps(capture: Capture) -> str:
    return json.dumps(capture.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"


def file_hash(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def load(path: Path, shown: str | None = None) -> Capture:
    where = shown or path.as_posix()
    data = read_json(path, where, "the capture")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{where}: not a KLD capture (format {FORMAT} expected)")
    try:
        positions = tuple(tuple((int(i), float(lp)) for i, lp in pos)
                          for pos in data["positions"])
        read = data.get("cache_read")
        cache_read = {str(k): int(v) for k, v in read.items()} if read is not None else None
        return Capture(str(data["model"]), str(data["api"]), int(data["top_k"]),
                       str(data["input_sha256"]), str(data.get("input_source", "")), positions,
                       cache_read)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: malformed capture ({exc})") from None


def capture(base_url: str, model: str, tokens: TokenInput, top_k: int, api: str = "vllm",
            timeout: float = 600.0) -> Capture:
    """Ask the server for the log-probabilities of every position of `tokens`."""
    if top_k == 0 or top_k < -1:
        raise InputError(f"--top-k {top_k}: expected a positive number, or -1 for the whole "
                         "vocabulary")
    base = base_url.rstrip("/").removesuffix("/v1")
    cache_read: dict[str, int] | None = None
    with httpx.Client(timeout=timeout) as http:
        if api == "vllm":
            positions = _vllm(http, base, model, tokens, top_k)
        elif api == "sglang":
            positions, cache_read = _sglang(http, base, tokens, top_k)
        else:
            raise InputError(f"--api {api}: expected one of {', '.join(APIS)}")
    if len(positions) != len(tokens.ids) - 1:
        raise CaptureError(f"the server gave {len(positions)} positions for "
                           f"{len(tokens.ids)} tokens")
    return Capture(model, api, top_k, tokens.sha256, tokens.source, positions, cache_read)


def _post(http: httpx.Client, url: str, body: Mapping[str, Any]) -> Any:
    try:
        r = http.post(url, json=body)
    except httpx.HTTPError as exc:
        raise CaptureError(f"{url}: {type(exc).__name__}: {exc}") from None
    if r.status_code != 200:
        raise CaptureError(f"{url} answered HTTP {r.status_code}: {r.text[:300]}")
    try:
        return r.json()
    except ValueError:
        raise CaptureError(f"{url}: the answer is not JSON") from None


def _top(pairs: list[tuple[int, float]], top_k: int) -> tuple[tuple[int, float], ...]:
    """Most likely first (ties by id); the K best only: the prompt's own token, which vLLM adds
    beyond the top K, is left out so that every position holds the same set size."""
    ordered = sorted(pairs, key=lambda p: (-p[1], p[0]))
    return tuple(ordered if top_k == -1 else ordered[:top_k])


def _vllm(http: httpx.Client, base: str, model: str, tokens: TokenInput,
          top_k: int) -> tuple[tuple[tuple[int, float], ...], ...]:
    body = {"model": model, "prompt": list(tokens.ids), "max_tokens": 1, "temperature": 0,
            "prompt_logprobs": top_k}
    data = _post(http, f"{base}/v1/completions", body)
    try:
        entries = data["choices"][0]["prompt_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise CaptureError("the answer has no choices[0].prompt_logprobs") from None
    if not isinstance(entries, list) or not entries:
        raise CaptureError("prompt_logprobs is empty")
    out = []
    for entry in entries[1:]:
        if not isinstance(entry, dict):
            raise CaptureError("a prompt_logprobs entry after the first is not a mapping")
        out.append(_top([(int(k), float(v["logprob"])) for k, v in entry.items()], top_k))
    return tuple(out)


Positions = tuple[tuple[tuple[int, float], ...], ...]


def _sglang_ask(http: httpx.Client, base: str, ids: list[int], top_k: int,
                start: int) -> dict[str, Any]:
    """SGLang's `meta_info` for the input's log-probabilities from position `start` on."""
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 1, "temperature": 0},
            "return_logprob": True, "logprob_start_len": start, "top_logprobs_num": top_k}
    data = _post(http, f"{base}/generate", body)
    if isinstance(data, list):
        data = data[0] if data else {}
    meta = data.get("meta_info") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("input_top_logprobs"), list):
        raise CaptureError("the answer has no meta_info.input_top_logprobs")
    return meta


def _sglang_positions(meta: dict[str, Any], ids: list[int],
                      top_k: int) -> tuple[int, Positions]:
    """(the first capture position the answer covers, its positions). SGLang's lists run from
    `logprob_start_len` to the end, with a `null` where no earlier token predicts one; each
    entry of `input_token_logprobs` names the token it scores, which places the list."""
    try:
        tops = [e for e in meta["input_top_logprobs"] if e is not None]
        scored = [int(e[1]) for e in meta.get("input_token_logprobs") or ()
                  if e and e[0] is not None]
        first = len(ids) - 1 - len(tops)
        if len(scored) != len(tops) or not tops or first < 0:
            raise CaptureError("input_top_logprobs and input_token_logprobs do not cover the "
                               "input's last tokens")
        if scored != ids[first + 1:]:
            raise CaptureError("the scored tokens are not the last tokens of the input")
        out = tuple(_top([(int(e[1]), float(e[0])) for e in entry], top_k) for entry in tops)
    except (TypeError, ValueError, IndexError, KeyError):
        raise CaptureError("an input_top_logprobs or input_token_logprobs entry is not "
                           "[logprob, token id, text]") from None
    return first, out


def _sglang(http: httpx.Client, base: str, tokens: TokenInput,
            top_k: int) -> tuple[Positions, dict[str, int]]:
    """Two requests (the module's docstring says why): the whole input from position 0, then
    from its middle against the first half read back from the cache."""
    if top_k == -1:
        raise InputError("--top-k -1: SGLang's API gives top-k log-probabilities only")
    ids = list(tokens.ids)
    first, whole = _sglang_positions(_sglang_ask(http, base, ids, top_k, 0), ids, top_k)
    if first != 0:
        raise CaptureError(f"asked from position 0, SGLang answered from {first + 1}")
    meta = _sglang_ask(http, base, ids, top_k, len(ids) // 2)  # at least 1: two ids or more
    start, tail = _sglang_positions(meta, ids, top_k)
    cached = meta.get("cached_tokens")
    read = {"from_position": start,
            "cached_tokens": cached if type(cached) is int and cached >= 0 else 0}
    return whole[:start] + tail, read


def served_model(base_url: str, timeout: float = 30.0) -> str:
    """The first model id of the server's /v1/models."""
    base = base_url.rstrip("/").removesuffix("/v1")
    with httpx.Client(timeout=timeout) as http:
        try:
            r = http.get(f"{base}/v1/models")
            data = r.json().get("data") if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            raise CaptureError(f"{base}/v1/models: {type(exc).__name__}") from None
    if not data or not isinstance(data[0], dict) or not data[0].get("id"):
        raise CaptureError(f"{base}/v1/models named no model; give --model")
    return str(data[0]["id"])
