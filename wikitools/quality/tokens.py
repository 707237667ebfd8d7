"""The fixed token input of a KLD capture: a file of token ids, or ids drawn from a seed. Either
way the input is pinned by the SHA-256 of its canonical form, so a reference and a candidate are
known to have scored the same tokens."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from wikitools.core.errors import InputError, UsageError


@dataclass(frozen=True, slots=True)
class TokenInput:
    ids: tuple[int, ...]
    source: str  # "seed:S:N:LO-HI" or the file as named

    @property
    def sha256(self) -> str:
        return input_hash(self.ids)


def input_hash(ids: tuple[int, ...] | list[int]) -> str:
    """SHA-256 of the ids as compact JSON (`[1,2,3]`): the same ids, the same hash, whatever
    file or seed they came from."""
    text = json.dumps(list(ids), separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def from_seed(seed: int, count: int, low: int, high: int) -> TokenInput:
    """`count` ids drawn uniformly from [low, high) by Python's Mersenne Twister seeded with
    `seed`: the same on every machine and Python 3 release (random.Random's integer draws are
    documented as reproducible for a given seed)."""
    if count < 2:
        raise UsageError(f"--positions {count}: a capture needs at least 2 tokens")
    if not 0 <= low < high:
        raise UsageError(f"--id-range {low}-{high}: expected 0 <= LOW < HIGH")
    rng = random.Random(seed)
    ids = tuple(rng.randrange(low, high) for _ in range(count))
    return TokenInput(ids, f"seed:{seed}:{count}:{low}-{high}")


def read_json(path: Path, where: str, what: str) -> object:
    """A JSON file's value; an unreadable or malformed file is an input error naming `what`."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{where}: cannot read {what}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(f"{where}: not JSON ({exc})") from None


def from_file(path: Path, shown: str | None = None) -> TokenInput:
    """A JSON list of token ids, or an object with an `ids` list."""
    where = shown or path.as_posix()
    data = read_json(path, where, "the token file")
    ids = data.get("ids") if isinstance(data, dict) else data
    if not isinstance(ids, list) or len(ids) < 2 or not all(
            type(i) is int and i >= 0 for i in ids):
        raise InputError(f"{where}: expected a JSON list of at least 2 non-negative token ids")
    return TokenInput(tuple(ids), where)
