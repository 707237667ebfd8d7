"""The `wiki` command as a whole: every subcommand is documented on the contributing page, and
the module entry point runs."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from wikitools.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "wiki") -> list[str]:
    names: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                names.append(f"{prefix} {name}")
                names.extend(_subcommands(sub, f"{prefix} {name}"))
    return names


def test_every_subcommand_is_documented_on_the_contributing_page() -> None:
    page = (REPO / "wiki" / "contributing.md").read_text(encoding="utf-8")
    commands = _subcommands(build_parser())
    assert "wiki runbook run" in commands and "wiki support-bundle" in commands
    missing = [c for c in commands if c not in page]
    assert missing == []


def test_module_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "wikitools", "--help"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0
    assert "runbook" in out.stdout and "support-bundle" in out.stdout


def test_usage_errors_exit_2(capsys) -> None:
    assert main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_scripts_run_again_under_the_checkout_venv_when_dependencies_are_missing() -> None:
    if not (REPO / ".venv" / "bin" / "python").is_file():
        import pytest

        pytest.skip("no .venv in this checkout")
    # -S hides site-packages, as a system Python without the dependencies would.
    out = subprocess.run(
        [sys.executable, "-S", str(REPO / "scripts" / "generate-wiki-index.py"), "--check"],
        capture_output=True, text=True, check=False, cwd=REPO,
    )
    assert out.returncode == 0, out.stderr
    assert "INDEX.md is up to date" in out.stderr + out.stdout
