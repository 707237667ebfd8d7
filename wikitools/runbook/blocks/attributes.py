"""A runbook block's attribute values, read with located RB003 and RB004 diagnostics: the
block being read (`Ctx`) and the readers of its options, numbers, `env=` and sweeps."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from wikitools.core.diagnostics import Diagnostic, did_you_mean
from wikitools.pages.parse import CodeBlock, Page
from wikitools.runbook.blocks.literals import name_problem
from wikitools.runbook.blocks.refusals import Refusal
from wikitools.runbook.blocks.sweep import Sweep, SweepError, parse_sweep
from wikitools.runbook.engines.shell import ShellSyntaxError, tokenize

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(slots=True)
class Ctx:
    """One runbook block being read: its page, where diagnostics go, and whether any was an
    error."""

    page: Page
    block: CodeBlock
    diags: list[Diagnostic]
    failed: bool = False

    @property
    def fence_line(self) -> str:
        lines = self.page.text.split("\n")
        return lines[self.block.line - 1] if self.block.line - 1 < len(lines) else ""

    def col_of(self, needle: str) -> int:
        line = self.fence_line
        at = line.find(needle, self.block.col - 1)
        return at + 1 if at >= 0 else self.block.col

    def refuse(self, refusals: Iterable[Refusal]) -> bool:
        """Each refusal as an error at its place; whether there was any."""
        found = list(refusals)
        for r in found:
            self.error(r.code, r.message, r.col, r.line)
        return bool(found)

    def error(self, code: str, message: str, col: int | None = None, line: int | None = None
              ) -> None:
        self.failed = True
        self.diags.append(Diagnostic(self.page.path, line or self.block.line,
                                     col or self.block.col, code, message))


def number(ctx: Ctx, key: str, value: str, col: int, *, integer: bool = False,
           minimum: float = 0, allow_zero: bool = True) -> float | None:
    pattern = r"\d+" if integer else r"\d+(\.\d+)?"
    if not re.fullmatch(pattern, value) or (not allow_zero and float(value) == 0) or float(
        value
    ) < minimum:
        kind = "a whole number" if integer else "a number"
        extra = " above 0" if not allow_zero else ""
        ctx.error("RB004", f"bad value for {key}: '{value}' (expected {kind}{extra})", col)
        return None
    return float(value)


def parse_env(ctx: Ctx, value: str, col: int) -> tuple[tuple[str, str], ...]:
    try:
        parts = [w.value for w in tokenize(value) if not w.op]
    except ShellSyntaxError as exc:
        ctx.error("RB004", f"bad value for env: {exc}", col)
        return ()
    out: list[tuple[str, str]] = []
    for part in parts:
        name, eq, val = part.partition("=")
        why = (f"'{part}' is not NAME=VALUE" if not eq or not ENV_NAME_RE.fullmatch(name)
               else name_problem(name))
        if why:
            ctx.error("RB004", f"bad value for env: {why}", col)
            continue
        out.append((name, val))
    return tuple(out)


def options(ctx: Ctx, allowed: tuple[str, ...], role: str) -> dict[str, tuple[str, int]]:
    seen: dict[str, tuple[str, int]] = {}
    for key, value, col in ctx.block.attrs.options:
        if key not in allowed:
            ctx.error("RB003", f"unknown attribute '{key}' on a {role} block"
                      f"{did_you_mean(key, allowed)}", col)
            continue
        if key in seen:
            ctx.error("RB003", f"attribute '{key}' given twice", col)
            continue
        seen[key] = (value, col)
    return seen


def sweep_value(ctx: Ctx, key: str, value: str, col: int, max_vars: int | None) -> Sweep:
    """A `sweep=` or `variants=` value in the one sweep grammar; Sweep() after an RB004 located
    at the fault inside the value."""
    try:
        sweep = parse_sweep(value, max_vars=max_vars)
    except SweepError as exc:
        line = ctx.fence_line
        at = line.find(value, col - 1 + len(key)) if value else -1
        where = at + 1 + exc.col if at >= 0 else col
        ctx.error("RB004", f"bad value for {key}: {exc.message}", where)
        return Sweep()
    problems = [p for p in map(name_problem, sweep.vars) if p]
    for problem in problems:
        ctx.error("RB004", f"bad value for {key}: {problem}", col)
    return Sweep() if problems else sweep


__all__ = ["ENV_NAME_RE", "Ctx", "number", "options", "parse_env", "sweep_value"]
