"""What `scan` proposes for a container launch whose program the reader does not know (a helper
script inside the image): a declared server (`engine= model= tp= port=`) with every value it can
see — the engine from the image's name, the rest from the container's environment — and the
values it cannot, named."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.command import parse_server_command
from wikitools.runbook.engines.shell import resolve
from wikitools.runbook.engines.types import EngineCommand

ORDER = ("engine", "model", "tp", "port")
DECLARE_CODE = "RB018"


@dataclass(frozen=True, slots=True)
class Proposal:
    command: EngineCommand  # with the seen model and TP filled in
    values: tuple[tuple[str, str], ...]  # (attribute, value) seen, in ORDER
    missing: tuple[str, ...]  # attributes it could not see, in ORDER
    sources: tuple[str, ...]  # where each seen value came from, for the message

    def attrs(self) -> str:
        """`engine=vllm model=GLM-5 tp=8 port=5264 gpus=8`, a `…` for each missing value."""
        seen = dict(self.values)
        parts = [f"{k}={seen.get(k, '…')}" for k in ORDER]
        tp = seen.get("tp")
        return " ".join(parts + ([f"gpus={tp}"] if tp else []))


def _from_env(env: Mapping[str, str], names: tuple[str, ...], scope: dict[str, str],
              ) -> tuple[str, str] | None:
    for name in names:
        if name in env:
            own = {k: v for k, v in scope.items() if k != name}  # PORT="${PORT:-5002}"
            value = resolve(env[name], own).strip("'\"")
            if value and "$" not in value:
                return name, value
    return None


def declared_proposal(text: str, files: Mapping[str, str], values: Mapping[str, str],
                      ) -> Proposal | None:
    """The declaration a container launch of `text` could carry; None when the block starts no
    container whose program the reader does not know."""
    probe = next(iter(engines.ENGINES))
    cmd = parse_server_command(text, dict(values), files, declared=probe)
    if cmd.engine is None or not cmd.docker or "(declared" not in (cmd.launcher or ""):
        return None
    seen: list[tuple[str, str]] = []
    sources: list[str] = []
    eng = engines.engine_for_image(cmd.image)
    if eng is not None:
        seen.append(("engine", eng.name))
        sources.append(f"engine from the image's name {cmd.image}")
    env = dict(cmd.docker_env)
    scope = {**values, **env}
    for key in ("model", "tp", "port"):
        hit = _from_env(env, engines.DECLARATION_ENV[key], scope)
        if hit is None or (key != "model" and not re.fullmatch(r"[1-9]\d{0,4}", hit[1])):
            continue
        seen.append((key, hit[1]))
        sources.append(f"{key} from the container's {hit[0]}")
    if "port" not in dict(seen) and cmd.published_port:
        seen.append(("port", str(cmd.published_port)))
        sources.append("port from its published port")
    found = dict(seen)
    cmd = replace(cmd, engine=found.get("engine"), model=found.get("model"),
                  tp=int(found["tp"]) if "tp" in found else None)
    return Proposal(cmd, tuple((k, found[k]) for k in ORDER if k in found),
                    tuple(k for k in ORDER if k not in found), tuple(sources))


def as_declared(cmd: EngineCommand, shown: EngineCommand, others: Collection[str],
                ) -> EngineCommand | None:
    """A `docker compose up` of the page's compose file whose helper a declared server stands
    for: the model and TP proposed from the file; None when it runs another file (`others`:
    those of the repository or written by the page's blocks)."""
    use = cmd.container
    if not cmd.engine or use is None or use.kind != "compose" or use.compose_file in others:
        return None
    return replace(cmd, model=shown.model, tp=shown.tp)


def declare_message(proposal: Proposal, why: str, rid: str) -> str:
    """Why scan did not mark a launch a declared server could stand for: what it saw, what is
    missing, and the attribute list to write once the missing values are known."""
    seen = ", ".join(f"{k}={v}" for k, v in proposal.values) or "nothing"
    came = f" ({'; '.join(proposal.sources)})" if proposal.sources else ""
    missing = ", ".join(f"{k}=" for k in proposal.missing)
    return (f"{why}; a declared server can stand for it: seen {seen}{came}; missing {missing}: "
            f"mark it `bash {{ #{rid} .runbook-server {proposal.attrs()} }}` once they are "
            "known (the run checks each against the server)")


__all__ = ["DECLARE_CODE", "Proposal", "as_declared", "declare_message", "declared_proposal"]
