"""The acronym checker: golden trees under tests/golden/acronyms (input/ → expected.txt with
stdout, stderr and the exit status of `wiki acronyms`), plus policy and baseline tests."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from wikitools.checks.acronyms import Matcher, check_pages, find_uses
from wikitools.checks.baseline import apply_baseline, load_baseline, render_baseline
from wikitools.cli import main
from wikitools.core.errors import ConfigError
from wikitools.pages.glossary import Entry, Glossary
from wikitools.pages.parse import parse_page

GOLDEN = Path(__file__).parent / "golden" / "acronyms"
CASES = sorted(p for p in GOLDEN.iterdir() if (p / "input").is_dir())


def run_case(case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    root = tmp_path / "tree"
    shutil.copytree(case / "input", root)
    args_file = case / "args"
    args = args_file.read_text(encoding="utf-8").split() if args_file.is_file() else []
    args = [str(root / a) if a.endswith(".json") else a for a in args]
    rc = main(["acronyms", "--root", str(root), *args])
    out, err = capsys.readouterr()
    err = err.replace(str(root) + "/", "")
    return f"{out}--- stderr\n{err}--- exit {rc}\n"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(
    case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], update_goldens: bool
) -> None:
    actual = run_case(case, tmp_path, capsys)
    expected_file = case / "expected.txt"
    if update_goldens or not expected_file.exists():
        expected_file.write_text(actual, encoding="utf-8")
    assert actual == expected_file.read_text(encoding="utf-8")


def test_golden_cases_exist() -> None:
    names = {c.name for c in CASES}
    assert {"expanded", "compound", "case-variants", "ignored", "contexts", "unknown"} <= names
    assert {"baseline", "root-glossary", "bad-glossary", "no-warnings", "strict"} <= names


# --------------------------------------------------------------------------- unit level


def glossary(*rows: tuple[str, str]) -> Glossary:
    return Glossary(
        "wiki/glossary.md", [Entry(t, x, "", i + 1, 3) for i, (t, x) in enumerate(rows)]
    )


GLOSSARY = glossary(
    ("MoE", "Mixture of Experts"),
    ("KV", "Key-Value"),
    ("TP", "Tensor Parallelism"),
    ("DCP", "Decode Context Parallelism"),
    ("NVFP4", "NVIDIA 4-bit floating point"),
    ("FP4", "4-bit floating point"),
    ("vLLM", "vLLM inference engine"),
)


def codes(text: str, g: Glossary = GLOSSARY) -> list[str]:
    page = parse_page(text, "wiki/p.md")
    return [
        f"{d.line}:{d.col} {d.code} {d.message.split(chr(34))[1]}" for d in check_pages([page], g)
    ]


def test_column_is_where_the_term_starts() -> None:
    assert codes("# T\n\nThe  cache uses KV.\n") == ["3:17 ACR001 KV"]
    assert codes("# T\n\n- item with **TP8** here\n") == ["3:15 ACR001 TP"]
    assert codes("# T\n\nÜber-fast DCP.\n") == ["3:11 ACR001 DCP"]


def test_message_names_term_and_expansion() -> None:
    page = parse_page("# T\n\nThe MoE model.\n", "wiki/p.md")
    (diag,) = check_pages([page], GLOSSARY)
    assert diag.format() == (
        'wiki/p.md:3:5: ACR001 error: first use of "MoE" is not expanded: write '
        '"Mixture of Experts (MoE)" or "MoE (Mixture of Experts)"'
    )


def test_only_first_use_per_term_is_reported() -> None:
    assert codes("# T\n\nMoE one.\n\nMoE two and MoE three.\n") == ["3:1 ACR001 MoE"]


def test_name_entries_need_no_expansion() -> None:
    assert codes("# T\n\nServe it with vLLM.\n") == []


def test_expansion_in_any_context_before_counts() -> None:
    assert codes("# Key-Value (KV) caches\n\nThe KV cache.\n") == []
    assert codes("| a |\n|---|\n| Tensor Parallelism (TP) |\n\nTP2.\n") == []


def test_heading_table_link_uses_are_labels() -> None:
    text = '# MoE\n\n| KV |\n|---|\n| x |\n\n[TP page](tp.md)\n\n!!! note "DCP"\n    Body.\n'
    assert codes(text) == []


def test_expansion_after_use_is_too_late() -> None:
    assert codes("# T\n\nMoE first. Mixture of Experts (MoE).\n") == ["3:1 ACR001 MoE"]


@pytest.mark.parametrize(
    "text",
    [
        "Mixture of Experts (MoE)",
        "mixture-of-experts (MoE)",
        "Mixture Of Experts (MoE)",
        "Mixtures of Expert (MoEs)",
        "MoE (Mixture of Experts)",
        "MoE (a mixture of experts design)",
        "MoE (*Mixture of Experts*)",
        "**Mixture of Experts** (MoE)",
        "Mixture of\nExperts (MoE)",
        "key value (KV)",
        "Key Value (KV)",
    ],
)
def test_expansion_forms_accepted(text: str) -> None:
    assert codes(f"# T\n\n{text} is fine.\n") == []


@pytest.mark.parametrize(
    "text", ["Mixture (MoE)", "Experts Mixture (MoE)", "MoE, Mixture of Experts"]
)
def test_expansion_forms_rejected(text: str) -> None:
    assert codes(f"# T\n\n{text} here.\n") == ["3:" + str(text.index("MoE") + 1) + " ACR001 MoE"]


@pytest.mark.parametrize(
    "text",
    ["Mixture of Expert\u017f (MoE)", "MoE (mixture of expert\u017f)", "\u212aey-Value (KV)"],
)
def test_letters_that_fold_to_ascii_letters_expand_as_ascii_ones(text: str) -> None:
    # ſ (long s) and K (Kelvin sign) are s and k when case is ignored
    assert codes(f"# T\n\n{text} is fine.\n") == []


def test_ascii_expansion_patterns_agree_with_the_ignore_case_ones() -> None:
    matcher = Matcher(GLOSSARY)
    texts = [
        "Mixture of Experts (MoE)", "a mixture-of-experts (", "MIXTURE OF EXPERTS [", "xMixture of "
        "Experts (", "Key Value (", "KEY_VALUE (", "(KV) (key-value)", "(key value cache)",
        "NVIDIA 4-bit floating-point (", "(the Tensor Parallelism)", "Tensor Parallelisms (",
        "(decode context parallel)", "Decode-Context Parallelisms (", "[ an nvidia 4 bit floats",
    ]
    for entry in GLOSSARY.entries:
        ascii_before, ascii_after = matcher.expansion_patterns(entry)
        before, after = matcher.expansion_patterns(entry, folds=True)
        assert before.flags & re.IGNORECASE and not ascii_before.flags & re.IGNORECASE
        for text in texts:
            assert bool(ascii_before.search(text)) == bool(before.search(text)), (entry, text)
            for tail in (text, "X " + text[::-1], "TP " + text):
                assert bool(ascii_after.match(tail)) == bool(after.match(tail)), (entry, tail)


def test_unknown_policy() -> None:
    found = codes("# T\n\nGPU, GPUs, H200, GB202, A3B, NOTE, 96 GB, II, SM_COUNT, XML.\n")
    assert found == ["3:1 ACR002 GPU", "3:57 ACR002 XML"]


def test_unknown_reported_in_labels_too() -> None:
    assert codes("# The GPU\n\nBody.\n") == ["1:7 ACR002 GPU"]


def test_glossary_page_index_and_generated_pages_skipped() -> None:
    pages = [
        parse_page("MoE GPU\n", "wiki/glossary.md"),
        parse_page("MoE GPU\n", "INDEX.md"),
        parse_page("<!-- generated by wiki index -->\nMoE GPU\n", "wiki/x.md"),
        parse_page("---\ngenerated: true\n---\nMoE GPU\n", "wiki/y.md"),
    ]
    assert check_pages(pages, GLOSSARY) == []


def test_longest_term_wins() -> None:
    matcher = Matcher(GLOSSARY)
    page = parse_page("NVFP4 and FP4.\n", "p.md")
    assert [u.entry.term for u in find_uses(page, matcher) if u.entry] == ["NVFP4", "FP4"]


# --------------------------------------------------------------------------- baseline


def test_baseline_is_keyed_by_term_not_line() -> None:
    before = check_pages([parse_page("# T\n\nMoE and GPU.\n", "wiki/a.md")], GLOSSARY)
    after = check_pages(
        [parse_page("# T\n\nNew line.\n\nMore.\n\nMoE and GPU.\n", "wiki/a.md")], GLOSSARY
    )
    assert render_baseline(before) == render_baseline(after)
    data = json.loads(render_baseline(before))
    assert data["findings"] == [
        {"code": "ACR001", "count": 1, "path": "wiki/a.md", "term": "MoE"},
        {"code": "ACR002", "count": 1, "path": "wiki/a.md", "term": "GPU"},
    ]


def test_write_then_use_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "w"
    shutil.copytree(GOLDEN / "baseline" / "input", root)
    target = root / "new-baseline.json"
    assert main(["acronyms", "--root", str(root), "--write-baseline", str(target)]) == 0
    first = target.read_bytes()
    assert main(["acronyms", "--root", str(root), "--write-baseline", str(target)]) == 0
    assert target.read_bytes() == first  # deterministic, unchanged
    capsys.readouterr()
    assert main(["acronyms", "--root", str(root), "--baseline", str(target)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "3 in the baseline" in err
    page = root / "wiki" / "old.md"
    page.write_text(
        "# Old page\n\nInserted line.\n\n" + page.read_text().split("\n", 2)[2] + "GPU\n"
    )
    assert main(["acronyms", "--root", str(root), "--baseline", str(target)]) == 1
    out, _ = capsys.readouterr()
    assert out == (
        'wiki/old.md:6:1: ACR002 error: unknown acronym "GPU": add a row for it to '
        "wiki/glossary.md\n"
    )


def test_unknown_acronym_is_an_error_as_the_contributing_guide_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "w"
    (root / "wiki").mkdir(parents=True)
    (root / "wiki" / "glossary.md").write_text(
        "# G\n\n| Acronym | Meaning |\n|---|---|\n| TP | tensor parallelism |\n"
    )
    (root / "wiki" / "a.md").write_text("# A\n\nThe NCCL library.\n")
    assert main(["acronyms", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert 'ACR002 error: unknown acronym "NCCL": add a row' in out
    contributing = (Path(__file__).parent.parent / "wiki" / "contributing.md").read_text()
    assert "A new acronym gets a\n   glossary row in the same change." in contributing


def test_baseline_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="baseline not found"):
        load_baseline(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    with pytest.raises(ConfigError, match="not a baseline file"):
        load_baseline(bad)


def test_apply_baseline_counts() -> None:
    diags = check_pages(
        [parse_page("# T\n\nMoE\n", "a.md"), parse_page("# T\n\nKV\n", "b.md")], GLOSSARY
    )
    fresh, suppressed, gone = apply_baseline(
        diags, load_counts({("a.md", "ACR001", "MoE"): 1, ("c.md", "ACR001", "TP"): 1})
    )
    assert [d.path for d in fresh] == ["b.md"]
    assert (suppressed, gone) == (1, 1)


def load_counts(d: dict[tuple[str, str, str], int]):  # type: ignore[no-untyped-def]
    from collections import Counter

    return Counter(d)


# --------------------------------------------------------------------------- CLI


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acronyms", "--root", str(tmp_path / "missing")]) == 2
    assert main(["acronyms", "--bogus"]) == 2
    (tmp_path / "wiki").mkdir()
    assert main(["acronyms", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "glossary not found" in err
    assert "Traceback" not in err


def test_script_runs_standalone(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "w"
    shutil.copytree(GOLDEN / "root-glossary" / "input", root)
    script = Path(__file__).parent.parent / "scripts" / "check-acronyms.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--root", str(root)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("README.md:1:3: ACR002")
    assert "models/kimi.md:3:3: ACR001" in proc.stdout


# --------------------------------------------------------------------------- speed


def test_generated_results_regions_are_not_checked() -> None:
    text = (
        "# T\n\n<!-- wiki:results runbook=x view=serving -->\n\nMeasured with TP on NVFP4.\n\n"
        "<!-- wiki:end -->\n\nLater, TP appears in prose.\n"
    )
    assert codes(text) == ["9:8 ACR001 TP"]
