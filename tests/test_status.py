"""Measured badges and the status vocabulary: only run records on SM120 make a page `measured`,
`reviewed` needs its date and never sits on a runbook page, and a hub's status is derived."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import make_tree, record

from wikitools.cli import main
from wikitools.core.config import load_config
from wikitools.pages.load import load_pages
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.rendering.measured import badge, measurements
from wikitools.site.chips import measured_line

PAGE = """---
title: Fake
status: {status}
---

# Fake

```{{ .bash #fake-rb .runbook-server engine=vllm gpus=1 arch={arch} }}
vllm serve fake-model
```

```{{ .bash .runbook-client for=fake-rb name=bench sweep="C=1,2" }}
vllm bench serve --model fake-model --max-concurrency "${{C:-1}}"
```
"""

H200 = {"gpus": [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0"}],
        "gpu_count": 1, "cpu_only": False}


def tree(root: Path, status: str = "measured", arch: str = "sm120") -> Path:
    return make_tree(root, {"wiki/fake.md": PAGE.format(status=status, arch=arch)})


def lint(root: Path, capsys) -> tuple[int, str]:
    code = main(["lint", "--root", str(root)])
    return code, capsys.readouterr().out


def per_page(root: Path):
    config = load_config(root)
    runbooks, _ = extract_runbooks(load_pages(config), config.root)
    return config, runbooks, measurements(runbooks, root)["wiki/fake.md"]


def test_a_page_with_no_sm120_record_cannot_be_measured(tmp_path, capsys):
    root = tree(tmp_path)
    code, out = lint(root, capsys)
    assert code == 1
    assert out.strip() == ("wiki/fake.md:3:9: FM006 error: page is marked 'measured' but runbook "
                           "'fake-rb' has no successful record on sm120; use status "
                           "'unverified' until one is committed")
    assert badge(per_page(root)[2]) == ("none", "Not measured on SM120: no run recorded")


def test_a_record_on_other_hardware_is_said_but_does_not_count(tmp_path, capsys):
    root = tree(tmp_path, arch="sm90,sm120")
    record(root, host=H200)
    code, out = lint(root, capsys)
    assert code == 1 and "(measured only on sm90)" in out
    assert badge(per_page(root)[2]) == (
        "other", "Measured only on SM90 (2026-11-30, vLLM 0.26.0); not yet on SM120")


def test_a_successful_sm120_record_makes_measured_honest(tmp_path, capsys):
    root = tree(tmp_path)
    record(root)  # the test helper's host is an RTX PRO 6000, compute capability 12.0
    assert lint(root, capsys)[0] == 0
    assert badge(per_page(root)[2]) == ("target", "Measured on SM120: 2026-11-30, vLLM 0.26.0")


@pytest.mark.parametrize("status", ["unverified", "experimental"])
def test_other_statuses_are_not_checked(tmp_path, capsys, status):
    assert lint(tree(tmp_path, status=status), capsys)[0] == 0


def test_failed_and_cpu_records_do_not_count(tmp_path):
    root = tree(tmp_path)
    rec = record(root, status="failed", failed_step="ready", message="x")
    record(root, started="2026-12-01T10:00:00Z",
           host={"gpus": [], "gpu_count": 0, "cpu_only": True})
    assert rec.status == "failed"
    assert badge(per_page(root)[2])[0] == "none"


def test_badge_line_for_the_site(tmp_path):
    """The line the MkDocs plugin puts under the status chip, from the records at build time."""
    root = tree(tmp_path, arch="sm90,sm120")
    assert measured_line(per_page(root)[2]) == (
        '<p class="wiki-measured-line" data-search-exclude=""><span class="wiki-measured-badge '
        'wiki-measured-badge--none">Not measured on SM120: no run recorded</span></p>\n')
    record(root, host=H200)
    line = measured_line(per_page(root)[2])
    assert "wiki-measured-badge--other" in line and "Measured only on SM90" in line
    assert measured_line([]) == ""


def test_reviewed_is_refused_on_a_page_with_runbooks(tmp_path, capsys):
    root = tree(tmp_path, status="reviewed")
    text = (root / "wiki/fake.md").read_text().replace("status: reviewed\n",
                                                        "status: reviewed\nreviewed: 2026-12-01\n")
    (root / "wiki/fake.md").write_text(text)
    code, out = lint(root, capsys)
    assert code == 1
    assert out.strip() == ("wiki/fake.md:3:9: FM006 error: page holds runbooks, so its status "
                           "comes from their run records, not from a review of its prose: use "
                           "'unverified'")
    record(root)
    assert "use 'measured'" in lint(root, capsys)[1]


def _prose(status: str, extra: str = "") -> str:
    return f"---\ntitle: P\nstatus: {status}\n{extra}---\n\n# P\n"


def _write(root: Path, files: dict[str, str]) -> Path:
    return make_tree(root, {"wiki.yml": "docs_dir: wiki\n", **files})


def test_reviewed_needs_a_date_and_measured_needs_runbooks(tmp_path, capsys):
    root = _write(tmp_path, {
        "wiki/a.md": _prose("reviewed"),
        "wiki/b.md": _prose("reviewed", "reviewed: last week\n"),
        "wiki/c.md": _prose("measured"),
        "wiki/d.md": _prose("reviewed", "reviewed: 2026-12-01\n"),
    })
    code, out = lint(root, capsys)
    assert code == 1
    assert [line.split(" error: ")[0] for line in out.splitlines()] == [
        "wiki/a.md:3:9: FM007", "wiki/b.md:4:11: FM007", "wiki/c.md:3:9: FM006"]
    assert "no run record can prove it" in out


def test_current_is_retired_with_a_hint(tmp_path, capsys):
    code, out = lint(_write(tmp_path, {"wiki/a.md": _prose("current")}), capsys)
    assert code == 1
    assert "unknown status 'current'" in out and "'reviewed: YYYY-MM-DD'" in out


HUB = "---\ntitle: H\nstatus: {status}\nhub: true\nfamily: fam\n---\n\n# H\n"


def _member(status: str) -> str:
    extra = "reviewed: 2026-12-01\n" if status == "reviewed" else ""
    return f"---\ntitle: M\nstatus: {status}\n{extra}family: fam\n---\n\n# M\n"


@pytest.mark.parametrize(("members", "derived"), [
    (("reviewed", "unverified", "historical"), "unverified"),
    (("reviewed", "experimental"), "experimental"),
    (("historical", "historical"), "historical"),
])
def test_a_hub_takes_the_least_proven_status_of_its_pages(tmp_path, capsys, members, derived):
    files = {f"wiki/fam/m{i}.md": _member(s) for i, s in enumerate(members)}
    root = _write(tmp_path, {"wiki/fam/index.md": HUB.format(status="measured"), **files})
    code, out = lint(root, capsys)
    assert code == 1
    assert out.startswith(f"wiki/fam/index.md:3:9: FM008 error: a hub's status comes from its "
                          f"pages: 'status: {derived}'")
    (root / "wiki/fam/index.md").write_text(HUB.format(status=derived))
    assert lint(root, capsys)[0] == 0


def test_a_hub_cannot_be_measured_while_a_page_is_not(tmp_path, capsys):
    root = tree(tmp_path, status="unverified")
    (root / "wiki/hub.md").write_text(HUB.format(status="measured"))
    text = (root / "wiki/fake.md").read_text().replace("status: unverified\n",
                                                        "status: unverified\nfamily: fam\n")
    (root / "wiki/fake.md").write_text(text)
    code, out = lint(root, capsys)
    assert code == 1 and "FM008" in out and "'status: unverified'" in out
    record(root)  # an SM120 record: the page may now be measured, and so may its hub
    (root / "wiki/fake.md").write_text(text.replace("status: unverified", "status: measured"))
    assert lint(root, capsys)[0] == 0


def test_a_hub_with_its_own_unrun_runbook_stays_below_its_reviewed_pages(tmp_path, capsys):
    """The hub's own runbook has no record, so the hub is unverified although its one other
    page is reviewed; it still may not claim more than that page."""
    root = tree(tmp_path, status="unverified")
    text = (root / "wiki/fake.md").read_text().replace(
        "status: unverified\n", "status: unverified\nhub: true\nfamily: fam\n")
    (root / "wiki/fake.md").write_text(text)
    (root / "wiki/m.md").write_text(_member("reviewed"))
    assert lint(root, capsys)[0] == 0
    (root / "wiki/fake.md").write_text(text.replace("status: unverified", "status: measured"))
    code, out = lint(root, capsys)
    assert code == 1 and "FM008" in out and "'status: reviewed'" in out
