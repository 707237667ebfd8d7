"""The package is laid out by stage, and imports point one way: a module imports from its own
stage and from earlier ones only (inside `runbook/`, tests/test_architecture.py orders its
sub-stages the same way)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "wikitools"
# Earlier stages first.
STAGES = ("core", "pages", "quality", "runbook", "checks", "site", "fleet", "support", "cli",
          "__main__")
LOOSE = ["__init__.py", "__main__.py", "support.py"]


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "wikitools" and len(parts) > 1 else None


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] \
                if node.module == "wikitools" else [node.module]
            found += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return found


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"
                  or p.parent != PACKAGE)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_from_later_stages_to_earlier_ones(path: Path) -> None:
    own = path.relative_to(PACKAGE).with_suffix("").parts[0]
    assert own in STAGES, f"{path.relative_to(PACKAGE)} is in no stage of {STAGES}"
    wrong = [f"{path.relative_to(PACKAGE)}:{line}: imports {module} ({stage} comes after {own})"
             for line, module in imports(path)
             if (stage := stage_of(module)) in STAGES and STAGES.index(stage) > STAGES.index(own)]
    assert wrong == []


def test_the_top_level_holds_the_stages_and_a_handful_of_modules() -> None:
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == LOOSE
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert folders == sorted(s for s in STAGES if s not in ("support", "__main__"))
