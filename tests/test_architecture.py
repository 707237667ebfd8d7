"""The runbook package is layered by stage; imports only go from a later stage to an earlier one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "wikitools" / "runbook"
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
