"""YAML from pages is loaded with its aliases bounded: an alias bomb ("billion laughs") in an
ordinary ```yaml block with `services:` or in front matter is reported at once as a located
error, and lint, check and scan finish instead of running for minutes."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from harness import MKDOCS, make_tree

from wikitools.core.yamlload import MAX_NODES, AliasBomb, load_yaml

LEVELS = "abcdefghi"


def bomb(prefix: str = "") -> str:
    """Nine levels of nine aliases: 9**9 (387 million) strings once expanded."""
    lines = [f'{prefix}a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in itertools.pairwise(LEVELS):
        lines.append(f"{prefix}{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


COMPOSE = ("```yaml\n" + bomb("x-") + "services:\n  server:\n    image: vllm/vllm-openai\n"
           "    command: *i\n    environment: *i\n```\n")


def test_alias_bomb_is_refused_by_the_loader() -> None:
    with pytest.raises(AliasBomb) as info:
        load_yaml(bomb())
    assert isinstance(info.value, yaml.YAMLError)
    assert info.value.problem_mark is not None
    # a few shared anchors (a compose file's `<<: *defaults`) still load
    assert load_yaml("x: &x {a: 1}\ny: *x\nz: {<<: *x, b: 2}\n") == {
        "x": {"a": 1}, "y": {"a": 1}, "z": {"a": 1, "b": 2}}
    assert MAX_NODES >= 10_000


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path, {
        **MKDOCS,
        "wiki/compose.md": ("---\ntitle: Compose\nstatus: experimental\n---\n# Compose\n\n"
                            + COMPOSE),
        "wiki/front.md": "---\ntitle: Front\n" + bomb() + "---\n# Front\n"})


@pytest.mark.parametrize(("argv", "rc"), [(["lint"], 1), (["check"], 1),
                                          (["runbook", "scan"], 0)])
def test_alias_bomb_in_a_page_does_not_hang_lint_check_or_scan(tree: Path, argv: list[str],
                                                                rc: int) -> None:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "wikitools", *argv, "--root", str(tree)],
                          capture_output=True, text=True, timeout=60, check=False)
    took = time.monotonic() - started
    assert took < 30, took
    assert "Traceback" not in proc.stderr and proc.returncode == rc, proc.stderr
    out = proc.stdout + proc.stderr
    if argv != ["runbook", "scan"]:
        assert "wiki/front.md:" in out and "aliases expand past" in out, out
