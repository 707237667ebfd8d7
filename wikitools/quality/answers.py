"""A server's answer as the quality clients (KLD captures, probes) read it: at most a given
number of bytes, and within one deadline for the whole answer, however slowly its bytes come
(a read timeout alone restarts with every byte a server drips)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from wikitools.core.errors import InputError

MIB = 1024 * 1024


class AnswerError(InputError):
    """No usable answer: the server could not be reached, took longer than the deadline, or
    sent more bytes than the limit. The message says which, without the URL."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON; AnswerError when it is not (NaN and Infinity are JSON here, as
        Python reads them: callers check the numbers they use)."""
        try:
            return json.loads(self.body)
        except ValueError:
            raise AnswerError("the answer is not JSON") from None

    def text(self, limit: int = 300) -> str:
        return self.body[:limit].decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    url: str
    body: Mapping[str, Any] | None = None


class TooBig(AnswerError):
    """More bytes than the limit: the rest is not read."""


def _too_big(limit: int) -> TooBig:
    return TooBig(f"the answer is over {limit / MIB:g} MiB; the rest was not read")


async def _read(client: httpx.AsyncClient, req: Request, limit: int) -> Answer:
    async with client.stream(req.method, req.url, json=req.body) as r:
        declared = r.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_big(limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in r.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise _too_big(limit)
            chunks.append(chunk)
        return Answer(r.status_code, b"".join(chunks))


async def _fetch(client: httpx.AsyncClient, req: Request, limit: int, timeout: float) -> Answer:
    try:
        async with asyncio.timeout(timeout):
            return await _read(client, req, limit)
    except TimeoutError:
        raise AnswerError(f"no whole answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise AnswerError(f"{type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Outcome:
    answer: Answer | None
    error: AnswerError | None

    def unwrap(self) -> Answer:
        if self.answer is None:
            assert self.error is not None
            raise self.error
        return self.answer


def fetch(req: Request, *, limit: int, timeout: float) -> Answer:
    """One request; its whole answer within `timeout` seconds and `limit` bytes."""
    return fetch_all([req], concurrency=1, limit=limit, timeout=timeout)[0].unwrap()


def fetch_all(requests: Sequence[Request], *, concurrency: int, limit: int,
              timeout: float) -> list[Outcome]:
    """Every request, `concurrency` at a time, each with its own deadline; outcomes in the
    order of `requests`."""

    async def run() -> list[Outcome]:
        gate = asyncio.Semaphore(max(1, concurrency))
        async with httpx.AsyncClient(timeout=timeout) as client:

            async def one(req: Request) -> Outcome:
                async with gate:
                    try:
                        return Outcome(await _fetch(client, req, limit, timeout), None)
                    except AnswerError as exc:
                        return Outcome(None, exc)

            return list(await asyncio.gather(*(one(r) for r in requests)))

    return asyncio.run(run())
