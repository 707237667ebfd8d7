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
        read = data.get("cache_read")
        cache_read = {str(k): int(v) for k, v in read.items()} if read is not None else None
        return Capture(str(data["model"]), str(data["api"]), int(data["top_k"]),
                       str(data["input_sha256"]), str(data.get("input_source", "")), positions,
                       cache_read)
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
    cache_read: dict[str, int] | None = None
    if api == "vllm":
        positions = _vllm(base, model, tokens, top_k, timeout)
    elif api == "sglang":
        positions, cache_read = _sglang(base, tokens, top_k, timeout)
    else:
        raise InputError(f"--api {api}: expected one of {', '.join(APIS)}")
    if len(positions) != len(tokens.ids) - 1:
        raise CaptureError(f"the server gave {len(positions)} positions for "
                           f"{len(tokens.ids)} tokens")
    return Capture(model, api, top_k, tokens.sha256, tokens.source, positions, cache_read)


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


Positions = tuple[tuple[tuple[int, float], ...], ...]


def _sglang_ask(url: str, ids: list[int], top_k: int, start: int,
                timeout: float) -> dict[str, Any]:
    """SGLang's `meta_info` for the input's log-probabilities from position `start` on."""
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 1, "temperature": 0},
            "return_logprob": True, "logprob_start_len": start, "top_logprobs_num": top_k}
    data = _post(url, body, timeout)
    if isinstance(data, list):
        data = data[0] if data else {}
    meta = data.get("meta_info") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("input_top_logprobs"), list):
        raise CaptureError(f"{url}: the answer has no meta_info.input_top_logprobs")
    return meta


def _sglang_top(entry: Any, top_k: int, where: str) -> tuple[tuple[int, float], ...]:
    if not isinstance(entry, list):
        raise CaptureError(f"{where}: not a list of [log-probability, token id, text]")
    pairs = []
    for j, e in enumerate(entry):
        if not isinstance(e, list) or len(e) < 2:
            raise CaptureError(f"{where}[{j}]: not a [log-probability, token id, …] list")
        pairs.append(pair(e[1], e[0], f"{where}[{j}]"))
    return _top(list(_position(pairs, where)), top_k)


def _sglang_positions(meta: dict[str, Any], ids: list[int], top_k: int,
                      url: str) -> tuple[int, Positions]:
    """(the first capture position the answer covers, its positions). SGLang's lists run from
    `logprob_start_len` to the end, with a `null` where no earlier token predicts one; each
    entry of `input_token_logprobs` names the token it scores, which places the list."""
    tops = [e for e in meta["input_top_logprobs"] if e is not None]
    scored = meta.get("input_token_logprobs")
    scored = [e[1] for e in scored if isinstance(e, list) and len(e) > 1 and e[0] is not None] \
        if isinstance(scored, list) else []
    first = len(ids) - 1 - len(tops)
    if len(scored) != len(tops) or not tops or first < 0:
        raise CaptureError(f"{url}: input_top_logprobs and input_token_logprobs do not cover "
                           "the input's last tokens")
    if scored != ids[first + 1:]:
        raise CaptureError(f"{url}: the scored tokens are not the last tokens of the input")
    where = f"{url}: meta_info.input_top_logprobs"
    return first, tuple(_sglang_top(e, top_k, f"{where}[{n}]") for n, e in enumerate(tops, 1))


def _sglang(base: str, tokens: TokenInput, top_k: int,
            timeout: float) -> tuple[Positions, dict[str, int]]:
    """Two requests (the module's docstring says why): the whole input from position 0, then
    from its middle against the first half read back from the cache."""
    if top_k == -1:
        raise InputError("--top-k -1: SGLang's API gives top-k log-probabilities only")
    ids, url = list(tokens.ids), f"{base}/generate"
    first, whole = _sglang_positions(_sglang_ask(url, ids, top_k, 0, timeout), ids, top_k, url)
    if first != 0:
        raise CaptureError(f"{url}: asked from position 0, SGLang answered from {first + 1}")
    meta = _sglang_ask(url, ids, top_k, len(ids) // 2, timeout)  # at least 1: two ids or more
    start, tail = _sglang_positions(meta, ids, top_k, url)
    cached = meta.get("cached_tokens")
    read = {"from_position": start,
            "cached_tokens": cached if type(cached) is int and cached >= 0 else 0}
    return whole[:start] + tail, read


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
