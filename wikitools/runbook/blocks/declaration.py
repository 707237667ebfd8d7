"""Declared servers: a server block that says what it serves (`engine=vllm model=GLM-5 tp=8
port=5264`), for a launch whose server the page cannot show (a helper script inside the image,
a compose service that runs one). The declaration stands in for what the reader could not read;
where the reader does read the command, the two must agree. A run checks the declaration
against the server itself (`execution/declared_check.py`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from wikitools.runbook.engines import catalog as engines
from wikitools.runbook.engines.types import EngineCommand

DECLARATION_ATTRS = ("model", "tp")
_MODEL = re.compile(r"[^\s{}\"'<>]+")

Error = Callable[[str, str, int], None]  # (code, message, column)


@dataclass(frozen=True, slots=True)
class Declaration:
    """What a server block says it serves; checked against the server after readiness."""

    engine: str
    model: str
    tp: int | None = None  # None: not declared (not checked)
    stands_in: bool = False  # the reader could not read the command: the declaration is all

    def pairs(self) -> tuple[tuple[str, str], ...]:
        out = [("engine", self.engine), ("model", self.model)]
        return tuple(out + ([("tp", str(self.tp))] if self.tp is not None else []))


def declared_engine(opts: Mapping[str, tuple[str, int]]) -> str | None:
    """The engine a block declares it serves: its engine= when it also declares model=."""
    if "model" not in opts or "engine" not in opts:
        return None
    value = opts["engine"][0]
    return value if value in engines.ENGINES else None


def served_names(cmd: EngineCommand) -> list[str]:
    """The names the server answers to in /v1/models, as the command sets them; none when
    a variable decides it (the run checks the declaration against the server then)."""
    named = cmd.flag("--served-model-name") or cmd.model
    return [named] if named and "$" not in named else []


def read_declaration(opts: Mapping[str, tuple[str, int]], cmd: EngineCommand, error: Error,
                     ) -> tuple[EngineCommand, Declaration | None]:
    """(the command with the declared model and TP where the reader found none, the
    declaration) of a block's model=/tp= attributes; a declared value that the command itself
    contradicts, or a bad one, is an error at the attribute."""
    if "model" not in opts and "tp" not in opts:
        return cmd, None
    if "model" not in opts:
        error("RB004", "tp= declares what the server serves: declare its model= too",
              opts["tp"][1])
        return cmd, None
    model, col = opts["model"]
    if not _MODEL.fullmatch(model):
        error("RB004", f"bad value for model: '{model}' (the model id /v1/models answers)", col)
        return cmd, None
    engine = declared_engine(opts)
    if engine is None:
        if "engine" not in opts:
            error("RB004", f"model= declares what the server serves: declare its engine= "
                  f"too ({engines.engine_names()})", col)
        return cmd, None
    names = served_names(cmd)
    if names and model not in names:
        error("RB010", f"model={model} but the command serves {names[0]}", col)
    tp = None
    if "tp" in opts:
        value, tp_col = opts["tp"]
        if not re.fullmatch(r"[1-9]\d{0,3}", value):
            error("RB004", f"bad value for tp: '{value}' (expected a whole number above 0)",
                  tp_col)
            return cmd, None
        tp = int(value)
        if cmd.tp is not None and cmd.tp != tp:
            error("RB010", f"tp={tp} but the command sets tensor parallel size {cmd.tp}", tp_col)
    stands_in = cmd.model is None
    if stands_in:
        cmd = replace(cmd, model=model, tp=cmd.tp if cmd.tp is not None else tp)
    return cmd, Declaration(engine, model, tp, stands_in)


__all__ = ["DECLARATION_ATTRS", "Declaration", "declared_engine", "read_declaration",
           "served_names"]
