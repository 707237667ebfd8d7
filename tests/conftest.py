"""Shared test options: `pytest --update-goldens` rewrites golden expectations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import HAVE_ENGINE, make_tiny_model, wiki_tree  # noqa: F401 (a fixture)


@pytest.fixture(autouse=True, scope="session")
def _own_lock_state(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The lock files of the tests' runs in a folder of their own, never the user's."""
    folder = tmp_path_factory.mktemp("wiki-state")
    folder.chmod(0o700)
    os.environ["WIKI_STATE_DIR"] = str(folder)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite golden expected files from the current output (review with git diff)",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The tiny model with dummy weights, made once per session for every test that serves it
    (engine, Docker and fleet tests); None without the engine environment."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model")) if HAVE_ENGINE else None
