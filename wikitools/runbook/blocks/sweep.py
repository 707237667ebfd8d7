"""The one sweep grammar, shared by a client's `sweep=`, a server's `variants=`, `--sweep` and
`--variant`: `VAR=v1,v2,…`, several variables separated by `;` (every combination: a grid).

    CONCURRENCY=1,8,32            three points
    KV=auto,fp8;MTP=0,3           four points: (auto,0) (auto,3) (fp8,0) (fp8,3)

A value may not repeat within a variable (it would run the same point twice) and a variable
may not be named twice. Sweeps are bounded: a page states a handful of points, not thousands."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from wikitools.core.errors import UsageError

Coords = tuple[tuple[str, str], ...]  # (variable, value) of each swept variable, in sweep order

VAR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VALUE_RE = re.compile(r"[A-Za-z0-9._:+/@-]+")
MAX_POINTS = 256  # points of one sweep (the product of its value counts)


class SweepError(UsageError):
    """A sweep that does not parse; `col` is the 0-based offset in the text where it goes
    wrong (0 when the whole text is at fault)."""

    def __init__(self, message: str, col: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.col = col


@dataclass(frozen=True, slots=True)
class Sweep:
    """The variables of a sweep and their values, in the order written."""

    axes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def vars(self) -> tuple[str, ...]:
        return tuple(var for var, _ in self.axes)

    def __bool__(self) -> bool:
        return bool(self.axes)

    def __len__(self) -> int:
        """How many points: the product of the value counts (0 for no sweep)."""
        return math.prod(len(vals) for _, vals in self.axes) if self.axes else 0

    def values(self, var: str) -> tuple[str, ...]:
        return dict(self.axes).get(var, ())

    def points(self) -> tuple[Coords, ...]:
        """Each point's (variable, value) pairs, the first variable outermost; one empty point
        when nothing is swept."""
        points: list[Coords] = [()]
        for var, vals in self.axes:
            points = [(*p, (var, v)) for p in points for v in vals]
        return tuple(points)

    def text(self) -> str:
        return ";".join(f"{var}={','.join(vals)}" for var, vals in self.axes)

    def replaced(self, other: Sweep) -> Sweep:
        """This sweep with the values of each variable `other` names replaced by its values."""
        new = dict(other.axes)
        return Sweep(tuple((var, new.get(var, vals)) for var, vals in self.axes))

    def selected(self, other: Sweep) -> Sweep:
        """This sweep with each variable `other` names kept only at the values it names (in
        this sweep's order); ValueError for a variable or value this sweep does not have."""
        keep = dict(other.axes)
        for var, vals in other.axes:
            have = self.values(var)
            if not have:
                raise SweepError(f"{var} is not one of {', '.join(self.vars) or 'none'}")
            unknown = [v for v in vals if v not in have]
            if unknown:
                raise SweepError(f"{var}={unknown[0]} is not one of {var}={','.join(have)}")
        return Sweep(tuple((var, tuple(v for v in vals if v in keep.get(var, vals)))
                           for var, vals in self.axes))


def point_name(coords: Coords) -> str | None:
    """A point's name: the value of a one-variable sweep, `A=1,B=512` for a grid, None for the
    one point of no sweep."""
    if not coords:
        return None
    if len(coords) == 1:
        return coords[0][1]
    return ",".join(f"{k}={v}" for k, v in coords)


def coords_label(coords: Coords) -> str:
    """`KV=fp8, MTP=3`: every variable named (for variants, whose values alone say little)."""
    return ", ".join(f"{k}={v}" for k, v in coords)


def parse_sweep(text: str, *, max_vars: int | None = None,
                max_points: int = MAX_POINTS) -> Sweep:
    """`VAR=v1,v2` or `A=1,8;B=512,2048` as a Sweep; SweepError (with the offset of the fault)
    for anything else: a missing `=`, a bad name or value, a repeated value or variable, more
    than `max_vars` variables or more than `max_points` points. Linear in the text's length:
    the size is checked before any point is made."""
    axes: list[tuple[str, tuple[str, ...]]] = []
    at = 0
    for part in text.split(";"):
        start = at + len(part) - len(part.lstrip())
        at += len(part) + 1
        var, eq, rest = part.strip().partition("=")
        var = var.strip()
        if not eq:
            raise SweepError(f"'{part.strip()}' is not VAR=v1,v2,… (variables separated by ';')",
                             start)
        if not VAR_RE.fullmatch(var):
            raise SweepError(f"'{var}' is not a variable name", start)
        if var in dict(axes):
            raise SweepError(f"{var} is named twice", start)
        vals: list[str] = []
        pos = start + part.strip().index("=") + 1
        for raw in rest.split(","):
            value = raw.strip()
            where = pos + len(raw) - len(raw.lstrip())
            pos += len(raw) + 1
            if not value:
                raise SweepError(f"{var} has an empty value", where)
            if not VALUE_RE.fullmatch(value):
                raise SweepError(f"{var} value '{value}' has characters other than letters, "
                                 "digits and . _ : + / @ -", where)
            if value in vals:
                raise SweepError(f"{var}={value} is given twice (it would run the same point "
                                 "twice)", where)
            vals.append(value)
            if len(vals) > max_points:
                raise SweepError(f"{var} has more than {max_points} values (at most "
                                 f"{max_points} points)", where)
        axes.append((var, tuple(vals)))
    if max_vars is not None and len(axes) > max_vars:
        raise SweepError(f"{len(axes)} variables (at most {max_vars})", 0)
    sweep = Sweep(tuple(axes))
    if len(sweep) > max_points:
        raise SweepError(f"{len(sweep):,} points (at most {max_points})", 0)
    return sweep


def reads_variable(text: str, name: str) -> bool:
    """Whether shell `text` reads variable `name` (`$N`, `${N…}`, or `N` inside `$(( … ))`):
    a swept variable the command never reads makes every point run one identical command."""
    n = re.escape(name)
    pattern = rf"\$(?:\{{{n}\b|{n}\b)|\$\(\([^)]*\b{n}\b"
    return re.search(pattern, text) is not None


__all__ = ["MAX_POINTS", "Coords", "Sweep", "SweepError", "coords_label", "parse_sweep",
           "point_name", "reads_variable"]
