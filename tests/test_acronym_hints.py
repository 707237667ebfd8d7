"""Acronym near misses: an unknown acronym beside a glossary term's expansion, or spelled close
to a term, gets a "did you mean"; a term written in capitals that the glossary writes in mixed
case (MOE for MoE) is reported instead of passing silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import make_tree

from wikitools.cli import main

GLOSSARY = ("# Glossary\n\n| Acronym | Meaning |\n|---|---|\n"
            "| GPU | graphics processing unit |\n| MoE | Mixture of Experts |\n"
            "| vLLM | vLLM inference engine |\n| KV | key-value |\n")


def _wiki(tmp_path: Path, body: str) -> Path:
    return make_tree(tmp_path, {"wiki/glossary.md": GLOSSARY, "wiki/a.md": f"# A\n\n{body}\n"})


def _findings(tmp_path: Path, body: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    root = _wiki(tmp_path, body)
    main(["acronyms", "--root", str(root)])
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("wiki/")]


def test_misspelled_acronym_beside_its_expansion_suggests_the_term(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _findings(tmp_path, "The MEO (Mixture of Experts) layers are routed.", capsys) == [
        'wiki/a.md:3:5: ACR002 error: unknown acronym "MEO": did you mean "MoE"? (or add a row '
        "for it to wiki/glossary.md)"]


def test_misspelled_acronym_after_its_expansion_suggests_the_term(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = _findings(tmp_path, "A Mixture of Experts (MEO) model.", capsys)
    assert found == ['wiki/a.md:3:23: ACR002 error: unknown acronym "MEO": did you mean "MoE"? '
                     "(or add a row for it to wiki/glossary.md)"]


def test_unknown_acronym_with_a_terms_letters_transposed_suggests_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = _findings(tmp_path, "The MoE (Mixture of Experts) model; its MEO layers.", capsys)
    assert found == ['wiki/a.md:3:41: ACR002 error: unknown acronym "MEO": did you mean "MoE"? '
                     "(or add a row for it to wiki/glossary.md)"]


def test_unknown_acronym_one_letter_from_a_term_is_not_guessed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # CPU is not a misspelt GPU: a one-letter change is as often another acronym
    found = _findings(tmp_path, "The GPU (graphics processing unit) and the CPU.", capsys)
    assert found == ['wiki/a.md:3:44: ACR002 error: unknown acronym "CPU": add a row for it to '
                     "wiki/glossary.md"]


def test_unknown_acronym_far_from_every_term_has_no_hint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _findings(tmp_path, "The ZQXJ board.", capsys) == [
        'wiki/a.md:3:5: ACR002 error: unknown acronym "ZQXJ": add a row for it to '
        "wiki/glossary.md"]


def test_case_variant_of_a_glossary_term_is_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = _findings(tmp_path, "The MOE (Mixture of Experts) layers; MOE again. MoE is fine.",
                      capsys)
    assert found == ['wiki/a.md:3:5: ACR004 error: "MOE" is written "MoE" (as in '
                     "wiki/glossary.md)"]
