"""Correctness probes: prompts with checkable answers (an exact answer or a regular expression
per item), sent to an OpenAI-compatible server at a given concurrency; the result is `n/N correct
at cC`, and each failure is kept with the prompt, the answer and what was expected.

A probe file is JSON Lines, one object per line: `{"prompt": …, "expect": …}` (the answer,
stripped, must equal it) or `{"prompt": …, "match": …}` (a Python regular expression searched in
the answer); `"max_tokens"` is optional (default 32). Lines that are empty or start with `#` are
skipped."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from wikitools.core.errors import InputError

FORMAT = "wiki-probe-result/1"


@dataclass(frozen=True, slots=True)
class Probe:
    line: int
    prompt: str
    expect: str | None
    match: re.Pattern[str] | None
    max_tokens: int

    @property
    def expected(self) -> str:
        return self.expect if self.expect is not None else f"/{self.match.pattern}/"  # type: ignore[union-attr]

    def check(self, answer: str) -> bool:
        if self.expect is not None:
            return answer.strip() == self.expect
        assert self.match is not None
        return self.match.search(answer) is not None


def load_probes(path: Path, shown: str | None = None) -> tuple[Probe, ...]:
    where = shown or path.as_posix()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{where}: cannot read the probe file: {exc.strerror or exc}") from None
    probes = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}:{n}:1: not JSON ({exc.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise InputError(f"{where}:{n}:1: expected an object with a \"prompt\" string")
        expect, pattern = item.get("expect"), item.get("match")
        if (expect is None) == (pattern is None) or not isinstance(expect or pattern, str):
            raise InputError(f"{where}:{n}:1: give either \"expect\" or \"match\" (a string)")
        try:
            match = re.compile(pattern) if pattern is not None else None
        except re.error as exc:
            raise InputError(f"{where}:{n}:1: bad regular expression: {exc}") from None
        max_tokens = item.get("max_tokens", 32)
        if type(max_tokens) is not int or max_tokens < 1:
            raise InputError(f"{where}:{n}:1: max_tokens must be a positive integer")
        probes.append(Probe(n, item["prompt"], expect, match, max_tokens))
    if not probes:
        raise InputError(f"{where}: no probes")
    return tuple(probes)


def _ask(http: httpx.Client, base: str, model: str, probe: Probe, chat: bool) -> str:
    if chat:
        body: dict[str, Any] = {"model": model, "temperature": 0, "max_tokens": probe.max_tokens,
                                "messages": [{"role": "user", "content": probe.prompt}]}
        r = http.post(f"{base}/v1/chat/completions", json=body)
        r.raise_for_status()
        return str(r.json()["choices"][0]["message"].get("content") or "")
    body = {"model": model, "temperature": 0, "max_tokens": probe.max_tokens,
            "prompt": probe.prompt}
    r = http.post(f"{base}/v1/completions", json=body)
    r.raise_for_status()
    return str(r.json()["choices"][0].get("text") or "")


def run_probes(base_url: str, model: str, probes: tuple[Probe, ...], concurrency: int,
               chat: bool = False, timeout: float = 300.0) -> dict[str, Any]:
    """Send every probe, `concurrency` at a time; the result object (failures included). A
    request that fails counts as a wrong answer, with the error as its answer."""
    base = base_url.rstrip("/").removesuffix("/v1")

    def one(http: httpx.Client, probe: Probe) -> tuple[Probe, str, bool]:
        try:
            answer = _ask(http, base, model, probe, chat)
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            return probe, f"(request failed: {type(exc).__name__}: {exc})", False
        return probe, answer, probe.check(answer)

    with httpx.Client(timeout=timeout) as http, \
            ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        done = list(pool.map(lambda p: one(http, p), probes))
    failures = [{"line": p.line, "prompt": p.prompt, "answer": a, "expected": p.expected}
                for p, a, ok in done if not ok]
    return {"format": FORMAT, "model": model, "api": "chat" if chat else "completions",
            "concurrency": concurrency, "total": len(probes),
            "correct": len(probes) - len(failures), "failures": failures}
