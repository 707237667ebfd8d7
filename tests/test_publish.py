"""Publishing: `make publish` (`mkdocs gh-deploy`) against a local bare repository as the
remote. The gh-pages branch holds the built site; a second publish, from a fresh clone, is a
fast-forward (the remote refuses anything else). The GitHub Pages workflow runs the same
checks and a strict build before it deploys."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from harness import make_tree

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"

PAGE = "---\ntitle: Home\nstatus: experimental\n---\n# Home\n\nTensor Parallelism (TP) here.\n"
GLOSSARY = "# Glossary\n\n| Term | Expansion |\n|---|---|\n| TP | Tensor Parallelism |\n"


def _git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.strip()


def _project(dest: Path) -> Path:
    """This repository's Makefile, site configuration and theme, with a two-page wiki."""
    dest.mkdir()
    for name in ("Makefile", "mkdocs.yml", "wiki.yml", "pyproject.toml"):
        shutil.copy2(ROOT / name, dest / name)
    os.utime(dest / "pyproject.toml", (0, 0))  # older than the installed stamp: no reinstall
    shutil.copytree(ROOT / "overrides", dest / "overrides")
    shutil.copytree(ROOT / "wiki" / "assets", dest / "wiki" / "assets")
    (dest / "runbooks").mkdir()
    return make_tree(dest, {"wiki/index.md": PAGE + "\nSee the [glossary](glossary.md).\n",
                            "wiki/glossary.md": GLOSSARY})


def _publish(cwd: Path, remote: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    return subprocess.run(
        ["make", "--no-print-directory", f"VENV={VENV}", "-o", f"{VENV}/.installed",
         "publish", f"PUBLISH_REMOTE={remote}"],
        cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=300)


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None,
                    reason="make and git are needed")
@pytest.mark.skipif(not (VENV / "bin" / "mkdocs").is_file(), reason="no .venv in this checkout")
def _committed(tmp_path: Path, files: dict[str, str] | None = None) -> tuple[Path, Path]:
    """(project, remote): the project with its index made and `files` added, committed, and
    a bare repository as its remote `origin` that refuses anything but a fast-forward."""
    remote = tmp_path / "remote.git"
    _git(tmp_path, "init", "--quiet", "--bare", str(remote))
    _git(remote, "config", "receive.denyNonFastForwards", "true")
    project = _project(tmp_path / "project")
    assert subprocess.run([str(VENV / "bin" / "wiki"), "index"], cwd=project,
                          capture_output=True, check=False).returncode == 0
    make_tree(project, dict(files or {}))
    _git(project, "init", "--quiet", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "--quiet", "-m", "wiki")
    _git(project, "remote", "add", "origin", str(remote))
    return project, remote


def test_make_publish_to_a_bare_remote_fast_forwards(tmp_path: Path) -> None:
    project, remote = _committed(tmp_path)
    _git(project, "push", "--quiet", "origin", "main")

    first = _publish(project, "origin")
    assert first.returncode == 0, first.stdout + first.stderr
    tip = _git(remote, "rev-parse", "gh-pages")
    files = _git(remote, "ls-tree", "-r", "--name-only", "gh-pages").splitlines()
    for name in ("index.html", "404.html", ".nojekyll", "sitemap.xml", "glossary/index.html",
                 "assets/stylesheets/wiki.css", "assets/stylesheets/wikitools.css"):
        assert name in files, name
    home = _git(remote, "show", "gh-pages:index.html")
    assert '<abbr title="Tensor Parallelism">TP</abbr>' in home  # the plugin ran
    assert 'class="wiki-status wiki-status--experimental"' in home

    # A change published from a fresh clone, which has no gh-pages branch of its own.
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "--quiet", "-b", "main", str(remote), str(clone))
    page = clone / "wiki" / "index.md"
    page.write_text(page.read_text() + "\nA second paragraph.\n")
    _git(clone, "commit", "--quiet", "-am", "second")
    second = _publish(clone, "origin")
    assert second.returncode == 0, second.stdout + second.stderr
    new_tip = _git(remote, "rev-parse", "gh-pages")
    assert new_tip != tip
    assert _git(remote, "rev-parse", "gh-pages^") == tip  # one commit on top: a fast-forward
    assert "A second paragraph." in _git(remote, "show", "gh-pages:index.html")


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None,
                    reason="make and git are needed")
@pytest.mark.skipif(not (VENV / "bin" / "mkdocs").is_file(), reason="no .venv in this checkout")
def test_make_publish_refuses_a_secret_in_a_file_the_site_would_publish(tmp_path: Path) -> None:
    token = "hf_" + "Ab3" * 8
    project, remote = _committed(tmp_path, {"wiki/logs/server.log":
                                            f"INFO start\nHF_TOKEN={token}\n"})

    done = _publish(project, "origin")
    assert done.returncode != 0
    assert "wiki/logs/server.log:2:10: SEC001 error: a secret" in done.stdout, done.stdout
    assert token not in done.stdout + done.stderr
    assert _git(remote, "branch", "--list", "gh-pages") == ""  # nothing was deployed


def test_pages_workflow_checks_builds_strictly_and_deploys() -> None:
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    build = flow["jobs"]["build"]["steps"]
    runs = [s["run"].split("#")[0].strip() for s in build if "run" in s]
    assert runs == ["pip install -e .", "wiki check", "mkdocs build --strict --site-dir site"]
    uses = [s["uses"].split("@")[0] for s in build if "uses" in s]
    assert uses == ["actions/checkout", "actions/setup-python", "actions/configure-pages",
                    "actions/upload-pages-artifact"]
    deploy = flow["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["steps"][0]["uses"].startswith("actions/deploy-pages@")
