"""Correctness probes: prompts with checkable answers (an exact answer or a regular expression
per item), sent to an OpenAI-compatible server at a given concurrency; the result is `n/N correct
at cC`, and each failure is kept with the prompt, the answer and what was expected.

A probe file is JSON Lines, one object per line: `{"prompt": …, "expect": …}` (the answer,
stripped, must equal it) or `{"prompt": …, "match": …}` (a regular expression searched in the
answer, in RE2's syntax: Python's without backreferences and lookaround, so that matching never
backtracks); `"max_tokens"` is optional (default 32). Lines that are empty or start with `#`
are skipped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import re2

from wikitools.core.errors import InputError, WikiError
from wikitools.quality import answers

FORMAT = "wiki-probe-result/1"
ANSWER_LIMIT = 4 * answers.MIB  # a probe's answer is a few hundred tokens of text


class ProbeError(WikiError):
    """The server's answer to a probe is not an answer (too big, not JSON, no text)."""

    exit_code = 1


def _compile(pattern: str) -> re2._Regexp:
    """RE2: matching time grows with the answer's length only, whatever the pattern (Python's
    `re` backtracks, and `^(\\d+)+$` against a long answer would not finish)."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


@dataclass(frozen=True, slots=True)
class Probe:
    line: int
    prompt: str
    expect: str | None
    match: re2._Regexp | None
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
            match = _compile(pattern) if pattern is not None else None
        except re2.error as exc:
            why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
            raise InputError(f"{where}:{n}:1: bad regular expression (RE2 syntax: no "
                             f"backreferences or lookaround): {why}") from None
        max_tokens = item.get("max_tokens", 32)
        if type(max_tokens) is not int or max_tokens < 1:
            raise InputError(f"{where}:{n}:1: max_tokens must be a positive integer")
        probes.append(Probe(n, item["prompt"], expect, match, max_tokens))
    if not probes:
        raise InputError(f"{where}: no probes")
    return tuple(probes)


def _request(base: str, model: str, probe: Probe, chat: bool) -> answers.Request:
    body: dict[str, Any] = {"model": model, "temperature": 0, "max_tokens": probe.max_tokens}
    if chat:
        body["messages"] = [{"role": "user", "content": probe.prompt}]
        return answers.Request("POST", f"{base}/v1/chat/completions", body)
    return answers.Request("POST", f"{base}/v1/completions", {**body, "prompt": probe.prompt})


def _text(data: Any, chat: bool) -> str | None:
    """The answer's text: choices[0].text, or choices[0].message.content (absent or null in a
    chat answer that only calls tools: the empty text); None when the answer is not shaped so."""
    choices = data.get("choices") if isinstance(data, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    if chat:
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            return None
        text = message.get("content")
        return "" if text is None else text if isinstance(text, str) else None
    text = first.get("text") if isinstance(first, dict) else None
    return text if isinstance(text, str) else None


def _answer(outcome: answers.Outcome, probe: Probe, req: answers.Request, chat: bool,
            where: str) -> str:
    """The probe's answer text. A failed request is a wrong answer (its error is the answer);
    an answer that is too big or not shaped as the API's is a ProbeError naming the probe."""
    at = f"{where}:{probe.line}:1: {req.url}"
    if isinstance(outcome.error, answers.TooBig):
        raise ProbeError(f"{at}: {outcome.error}")
    if outcome.error is not None:
        return f"(request failed: {outcome.error})"
    answer = outcome.unwrap()
    if answer.status != 200:
        return f"(request failed: HTTP {answer.status}: {answer.text()})"
    try:
        text = _text(answer.json(), chat)
    except answers.AnswerError as exc:
        raise ProbeError(f"{at}: {exc}") from None
    if text is None:
        field = "choices[0].message.content" if chat else "choices[0].text"
        raise ProbeError(f"{at}: the answer has no {field} string: {answer.text(120)!r}")
    return text


def run_probes(base_url: str, model: str, probes: tuple[Probe, ...], concurrency: int,
               chat: bool = False, timeout: float = 300.0, where: str = "probes") -> dict[str, Any]:
    """Send every probe, `concurrency` at a time, each answered within `timeout` seconds in
    all; the result object (failures included). A request that fails counts as a wrong
    answer, with the error as its answer; an answer over ANSWER_LIMIT or not shaped as the
    API's is a ProbeError located at the probe's line of `where`."""
    base = base_url.rstrip("/").removesuffix("/v1")
    requests = [_request(base, model, p, chat) for p in probes]
    outcomes = answers.fetch_all(requests, concurrency=concurrency, limit=ANSWER_LIMIT,
                                 timeout=timeout)
    failures = []
    for probe, req, outcome in zip(probes, requests, outcomes, strict=True):
        text = _answer(outcome, probe, req, chat, where)
        if not probe.check(text):
            failures.append({"line": probe.line, "prompt": probe.prompt, "answer": text,
                             "expected": probe.expected})
    return {"format": FORMAT, "model": model, "api": "chat" if chat else "completions",
            "concurrency": concurrency, "total": len(probes),
            "correct": len(probes) - len(failures), "failures": failures}
