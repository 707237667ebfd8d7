"""Measured badges and the FM006 lint derive what a page claims from its run records."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_render import record

from wikitools.cli import main
from wikitools.config import load_config, load_pages
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.rendering.status import badge, measurements
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


def tree(root: Path, status: str = "current", arch: str = "sm120") -> Path:
    (root / "wiki").mkdir(parents=True, exist_ok=True)
    (root / "wiki" / "fake.md").write_text(PAGE.format(status=status, arch=arch))
    (root / "wiki.yml").write_text("docs_dir: wiki\n")
    return root


def lint(root: Path, capsys) -> tuple[int, str]:
    code = main(["lint", "--root", str(root)])
    return code, capsys.readouterr().out


def per_page(root: Path):
    config = load_config(root)
    runbooks, _ = extract_runbooks(load_pages(config))
    return config, runbooks, measurements(runbooks, root)["wiki/fake.md"]


def test_current_page_without_a_record_on_its_target_is_flagged(tmp_path, capsys):
    root = tree(tmp_path)
    code, out = lint(root, capsys)
    assert code == 1
    assert out.strip() == ("wiki/fake.md:3:9: FM006 error: page is marked 'current' but runbook "
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


def test_a_successful_sm120_record_makes_current_honest(tmp_path, capsys):
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
        '<p class="wiki-measured-line"><span class="wiki-measured-badge '
        'wiki-measured-badge--none">Not measured on SM120: no run recorded</span></p>\n')
    record(root, host=H200)
    line = measured_line(per_page(root)[2])
    assert "wiki-measured-badge--other" in line and "Measured only on SM90" in line
    assert measured_line([]) == ""
