"""A declared server checked against the server itself once it is ready: the model against
the ids `/v1/models` answers with, the engine against the log lines only that engine prints,
the TP size against the line where the engine states it (facts of `engines.catalog`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from wikitools.runbook.blocks.declaration import Declaration
from wikitools.runbook.engines import catalog as engines


def served_models(answer: Any) -> list[str] | None:
    """The model ids of a `/v1/models` answer; None when it is not that list."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id") is not None]


def engines_in_log(lines: Sequence[str]) -> list[str]:
    """The engines whose own log lines appear in a server log, in catalog order."""
    return [e.name for e in engines.ENGINES.values() if e.identity_log and any(
        re.search(rx, line) for rx in e.identity_log for line in lines)]


def tp_in_log(engine: str, lines: Sequence[str]) -> int | None:
    """The tensor-parallel size the engine states in its log (the last time it does)."""
    eng = engines.engine(engine)
    if eng is None or eng.tp_log is None:
        return None
    sizes = [int(m[1]) for line in lines if (m := re.search(eng.tp_log, line))]
    return sizes[-1] if sizes else None


def declaration_problems(declared: Declaration, lines: Sequence[str],
                         models: list[str] | None) -> list[str]:
    """Each way the server differs from its declaration, as "declared X, the server serves Y"."""
    out: list[str] = []
    if models is None:
        out.append(f"declared model={declared.model}, /v1/models did not answer with a list of "
                   "models")
    elif declared.model not in models:
        out.append(f"declared model={declared.model}, the server serves "
                   f"{', '.join(models) or 'no model'}")
    seen = engines_in_log(lines)
    name = engines.display_name(declared.engine)
    if declared.engine not in seen:
        out.append(f"declared engine={declared.engine}, the server is "
                   f"{', '.join(engines.display_name(e) for e in seen)}" if seen else
                   f"declared engine={declared.engine}, the server's log has none of {name}'s "
                   "start-up lines")
    tp = tp_in_log(declared.engine, lines) if declared.engine in seen else None
    if declared.tp is not None and declared.engine in seen and tp != declared.tp:
        out.append(f"declared tp={declared.tp}, the server serves tp={tp}" if tp is not None
                   else f"declared tp={declared.tp}, the server's log does not state its "
                   "tensor-parallel size")
    return out


__all__ = ["declaration_problems", "engines_in_log", "served_models", "tp_in_log"]
