"""Imports point one way: no import circle anywhere in the package (an import inside a function or
under TYPE_CHECKING counts), and the runbook package is layered by stage, imports going only
from a later stage to an earlier one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parent.parent / "wikitools"
PACKAGE = TOP / "runbook"
# Earlier stages first. A module may import from its own stage and from earlier ones only.
STAGES = ("engines", "blocks", "records", "execution", "rendering", "session")


def _stage(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["wikitools", "runbook"] or len(parts) < 3:
        return None
    return parts[2]


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_flow_from_later_stages_to_earlier_ones(path: Path) -> None:
    own = _stage("wikitools.runbook." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts))
    if own not in STAGES:  # the package's own __init__
        return
    wrong = [
        f"{path.relative_to(PACKAGE)}:{line}: imports {module} ({stage} comes after {own})"
        for line, module in _imports(path)
        if (stage := _stage(module)) in STAGES and STAGES.index(stage) > STAGES.index(own)
    ]
    assert wrong == []


def test_every_stage_says_what_it_owns() -> None:
    for stage in STAGES[:-1]:
        init = PACKAGE / stage / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} has no docstring"


def test_no_stray_modules_beside_the_stages() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "session.py"]


def _module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(top: Path) -> dict[str, set[str]]:
    """Each module of the package at `top` and the modules of it that it imports anywhere (a
    `from package import name` naming a module counts as importing that module)."""
    modules = {_module_name(p, top): p for p in sorted(top.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = {module if module in modules else module.rsplit(".", 1)[0]
                 for _line, module in _imports(path)}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: the strongly connected parts of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while (w := stack.pop()) != v:
                part.append(w)
            if part:
                circles.append(sorted([v, *part]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circle_in_the_whole_package() -> None:
    assert _circles(_import_graph(TOP)) == []


def test_an_import_circle_is_found(tmp_path: Path) -> None:
    package = tmp_path / "wikitools"
    package.mkdir()
    (package / "a.py").write_text("from wikitools.b import x\n")
    (package / "b.py").write_text("def f():\n    from wikitools import a\n")
    (package / "c.py").write_text("import wikitools.a\n")
    assert _circles(_import_graph(package)) == [["wikitools.a", "wikitools.b"]]


ARCHITECTURE = TOP.parent / "ARCHITECTURE.md"


def test_the_map_is_short_and_names_only_files_that_exist() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert len(text) <= 10_000
    named = set(re.findall(r"`([\w./<>-]+\.(?:py|md|toml|j2))`", text))
    homes = (TOP.parent, TOP, PACKAGE)
    missing = sorted(n for n in named if "<" not in n
                     and not any((home / n).exists() for home in homes)
                     and not any(TOP.rglob(n)))
    assert missing == []
