"""The runbook package is layered by stage; imports only go from a later stage to an earlier one."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

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


MAX_LINES = 500


def test_no_module_is_over_500_lines() -> None:
    too_long = {
        str(p.relative_to(PACKAGE.parent.parent)): n
        for p in sorted(PACKAGE.parent.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert too_long == {}


def _module_map() -> Any:
    path = PACKAGE.parent.parent / "scripts" / "module-map.py"
    spec = importlib.util.spec_from_file_location("module_map", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_map_in_architecture_md_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert _module_map().main(["--check"]) == 0, capsys.readouterr().err


def test_the_module_map_check_fails_on_a_stale_map(tmp_path: Path) -> None:
    mapper = _module_map()
    (tmp_path / "wikitools").mkdir()
    (tmp_path / "wikitools" / "a.py").write_text('"""Module a. More."""\n', encoding="utf-8")
    (tmp_path / "ARCHITECTURE.md").write_text(
        f"# map\n\n{mapper.START}\nold\n{mapper.END}\n", encoding="utf-8")
    assert mapper.main(["--check", "--root", str(tmp_path)]) == 1
    assert mapper.main(["--root", str(tmp_path)]) == 0
    text = (tmp_path / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert "| `a.py` | 1 | Module a. |" in text
    assert mapper.main(["--check", "--root", str(tmp_path)]) == 0
