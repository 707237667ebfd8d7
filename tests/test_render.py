"""Rendering results regions from records, `wiki runbook render`, and `wiki runbook run`
end to end against the fake engine (a `vllm` test double on PATH)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace

import pytest
from harness import FAKE_BIN, apply, free_port, make_wiki, record, render

from wikitools.cli import main
from wikitools.runbook.records.record import write_record


def note(kind: str, title: str) -> str:
    """The start of a titled note as the tools write it into a GitHub-read wiki."""
    return f"> [!{kind}]\n> **{title}**\n"


def test_not_yet_measured(tmp_path):
    root = make_wiki(tmp_path)
    text = apply(root)
    assert text.count(note("NOTE", "Not yet measured")) == 2
    assert "wiki runbook run wiki/fake.md#fake-rb" in text
    assert render(root) == ([], [])  # idempotent


def test_serving_table_and_provenance(tmp_path):
    root = make_wiki(tmp_path)
    rec = record(root)
    text = apply(root)
    assert ("| 1 | 13.62 | 435.8 | 2,189.9 | 39.5 | 137.4 | 7.37 | 9.41 | 7.37 | 9.96 | 16/16 |"
            in text)
    assert "| 8 | – | 1,234.5 | – |" in text
    assert ("Measured 2026-11-30 on 1 × NVIDIA RTX PRO 6000 Blackwell Workstation Edition, "
            "sm120 (compute capability 12.0), driver 580.95.05, CUDA 13.0; vLLM 0.26.0.") in text
    assert f"Record: `runbooks/fake-rb/{rec.run_id}.json`." in text
    assert "KV cache 1,274,576 tokens" in text
    assert "Pipeline check" not in text and "Stale" not in text
    assert render(root) == ([], [])


def test_dummy_weights_are_marked(tmp_path):
    root = make_wiki(tmp_path)
    record(root, command="vllm serve m --load-format dummy",
           host={"gpus": [], "gpu_count": 0, "cpu_only": True})
    text = apply(root)
    assert note("WARNING", "Pipeline check, not a measurement") in text
    assert "dummy weights (`--load-format dummy`) on a CPU-only host" in text
    assert "on a CPU-only host (no GPU)" in text


def test_random_weights_on_gpus_are_labelled_as_shape_speed(tmp_path):
    root = make_wiki(tmp_path)
    record(root, command="vllm serve m --load-format dummy")
    text = apply(root)
    assert "Pipeline check" not in text
    assert note("NOTE", "Random weights") in text
    assert "speed for this\n> model's shape; they say nothing about the quality" in text


def test_failed_latest_run_shows_failure_and_last_good_table(tmp_path):
    root = make_wiki(tmp_path)
    record(root)
    record(root, started="2026-11-30T12:00:00Z", status="failed", failed_step="ready",
           message="server exited with code 1 during start-up: CUDA out of memory")
    text = apply(root)
    assert note("CAUTION", "Latest run failed") in text
    assert "failed at step\n> `ready`: server exited with code 1" in text
    assert "The table below is from the last successful run." in text
    assert "| 1 | 13.62 |" in text
    # history: newest first, the failure with its step
    hist = text.split("## History")[1]
    assert hist.index("| failed |") < hist.index("| ok |")
    assert "failed at `ready`" in hist
    assert "best output 1,234.5 tok/s (bench at C=8)" in hist


def test_preflight_refusals_do_not_replace_the_table(tmp_path):
    root = make_wiki(tmp_path)
    record(root)
    record(root, started="2026-11-30T12:00:00Z", status="failed", failed_step="preflight",
           message="no GPU")
    text = apply(root)
    assert "Latest run failed" not in text.split("## History")[0]


def test_stale_record_warns(tmp_path):
    root = make_wiki(tmp_path)
    record(root, blocks="sha256:" + "1" * 64)
    changes, diags = render(root)
    assert [(d.line, d.code) for d in diags] == [(15, "RGN003")]
    assert diags[0].severity.name == "WARNING"
    assert note("WARNING", "Stale") in changes[0].new


def test_hand_edit_is_reported_and_kept(tmp_path):
    root = make_wiki(tmp_path)
    record(root)
    text = apply(root).replace("| 1 | 13.62 |", "| 1 | 99.99 |")
    (root / "wiki/fake.md").write_text(text)
    changes, diags = render(root)
    assert [(d.line, d.code) for d in diags] == [(15, "RGN002")]
    assert changes == []
    # Deleting sum= hands the region back to the renderer: it is regenerated.
    first_end = text.index("<!-- wiki:end sum=")
    sum_end = text.index(" -->", first_end)
    (root / "wiki/fake.md").write_text(text[:first_end] + "<!-- wiki:end" + text[sum_end:])
    assert "| 1 | 13.62 |" in apply(root)


def test_render_changes_only_region_bytes_of_crlf_and_bom_page(tmp_path):
    root = make_wiki(tmp_path)
    record(root)
    path = root / "wiki/fake.md"
    lf = path.read_text()
    crlf = ("\ufeff" + lf.replace("\n", "\r\n")).encode("utf-8")
    path.write_bytes(crlf)
    assert main(["runbook", "render", "--root", str(root)]) == 0
    got = path.read_bytes()
    assert got.startswith("\ufeff---\r\n".encode())
    assert b"\n" not in got.replace(b"\r\n", b"")  # every line still ends in CRLF
    # Outside the regions every byte is as it was.
    before, after = crlf.decode(), got.decode()
    head = before.index("<!-- wiki:results")
    assert after[:head] == before[:head]
    assert after.endswith(before[before.rindex("<!-- wiki:end -->") + len("<!-- wiki:end -->"):])
    assert "| 1 | 13.62 |" in after
    # Rendering again changes nothing, and the check agrees.
    assert main(["runbook", "render", "--root", str(root), "--check"]) == 0
    assert main(["runbook", "render", "--root", str(root)]) == 0
    assert path.read_bytes() == got


def test_hand_edit_advice_is_true(tmp_path):
    root = make_wiki(tmp_path)
    record(root)
    path = root / "wiki/fake.md"
    text = apply(root)
    note = "Measured on a noisy host; see the discussion."
    edited = text.replace("| 1 | 13.62 |", "| 1 | 99.99 |", 1).replace(
        "| 1 | 13.62 |", "| 1 | 13.62 |\n" + note, 1)
    path.write_text(edited)
    _changes, diags = render(root)
    (diag,) = diags
    assert diag.code == "RGN002"
    assert "move hand-written text outside the markers" in diag.message
    assert "delete 'sum=…'" in diag.message
    # Follow the advice: the note goes below the region, `sum=` is deleted.
    edited = edited.replace(note + "\n", "")
    end = edited.index("<!-- wiki:end sum=")
    close = edited.index("-->", end) + 3
    edited = edited[:end] + "<!-- wiki:end -->\n\n" + note + edited[close:]
    path.write_text(edited)
    after = apply(root)
    assert render(root) == ([], [])  # no RGN002, nothing left to change
    assert "| 1 | 13.62 |" in after and "99.99" not in after
    assert note in after and after.index(note) > after.index("<!-- wiki:end sum=")


def test_unknown_runbook_and_check_mode(tmp_path):
    root = make_wiki(tmp_path)
    path = root / "wiki/fake.md"
    path.write_text(path.read_text() + "\n<!-- wiki:results runbook=fake-rbb -->\n"
                    "<!-- wiki:end -->\n")
    _changes, diags = render(root, check=True)
    got = sorted((d.line, d.code) for d in diags)
    assert got == [(15, "RGN004"), (20, "RGN004"), (23, "RB009")]
    assert "did you mean 'fake-rb'?" in next(d for d in diags if d.code == "RB009").message


def test_cli_render_check_and_write(tmp_path, capsys):
    root = make_wiki(tmp_path)
    record(root)
    before = (root / "wiki/fake.md").read_text()
    assert main(["runbook", "render", "--root", str(root), "--check", "--diff"]) == 1
    out, err = capsys.readouterr()
    assert "RGN004" in out and "+| 1 | 435.8 | 39.5 | 7.37 |" in out
    assert "would change: wiki/fake.md" in err
    assert (root / "wiki/fake.md").read_text() == before
    assert main(["runbook", "render", "--root", str(root)]) == 0
    assert main(["runbook", "render", "--root", str(root), "--check"]) == 0


def test_render_of_100_records(tmp_path):
    root = make_wiki(tmp_path)
    base = record(root)
    for i in range(99):
        rec = replace(base, run_id=f"20261201T{i:06d}Z-{base.blocks_hash[7:15]}",
                      started_at=f"2026-12-01T00:{i // 60:02d}:{i % 60:02d}Z")
        write_record(root, rec)
    changes, diags = render(root)
    pages = [c for c in changes if c.path.endswith(".md")]
    assert diags == [] and len(pages) == 1
    assert all(c.path.startswith("wiki/charts/fake-") for c in changes if c not in pages)
    assert pages[0].new.count("| ok |") == 100


# --------------------------------------------------------------------------- wiki runbook run


@pytest.fixture
def fake_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_SERVER_ARGS", raising=False)
    monkeypatch.delenv("FAKE_BENCH_ARGS", raising=False)


def test_cli_run_end_to_end(tmp_path, capsys, fake_path):
    port = free_port()
    root = make_wiki(tmp_path, port)
    assert main(["runbook", "run", "wiki/fake.md#fake-rb", "--root", str(root), "--yes",
                 "--sweep", "C=1,3"]) == 0, capsys.readouterr()
    out, _err = capsys.readouterr()
    (path,) = (root / "runbooks" / "fake-rb").glob("*.json")
    data = json.loads(path.read_text())
    assert data["status"] == "ok"
    assert [p["value"] for p in data["clients"][0]["points"]] == ["1", "3"]
    for p in data["clients"][0]["points"]:
        raw = json.loads((root / p["result_file"]).read_text())
        assert p["metrics"]["output_throughput"] == raw["output_throughput"]
    assert f"record: runbooks/fake-rb/{path.name}" in out
    # every point: an unrecorded warm-up run, then three measured runs, each one kept
    client = data["clients"][0]
    assert (client["repeats"], client["warmup"], client["sweep_vars"]) == (3, True, ["C"])
    assert [len(p["samples"]) for p in client["points"]] == [3, 3]
    assert [s["name"] for s in data["steps"] if s["name"].startswith("client:bench[1]")] == [
        "client:bench[1] warm-up", "client:bench[1] run 1/3", "client:bench[1] run 2/3",
        "client:bench[1] run 3/3"]
    text = (root / "wiki/fake.md").read_text()
    assert "| 3 | 30.37 |" in text  # the full table: medians
    # how many runs, how long each; the fake's runs last well under the 10 s minimum, so the
    # headline shows no band for them
    lengths = [s["metrics"]["duration"] for p in client["points"] for s in p["samples"]]
    assert re.search(r"median of 3 runs of \d+\.\d(–\d+\.\d)? s each after an unrecorded "
                     "warm-up run", text)
    assert f"{min(lengths):.1f}" in text and all(d < 10 for d in lengths)
    assert "| 1 | " in text and " too short |" in text and "their points show no ±" in text
    assert client["points"][0]["metrics"]["min_duration_s"] == 10.0
    assert main(["runbook", "render", "--root", str(root), "--check"]) == 0
    # the same run again: compared with the first, nothing moved beyond the spread
    assert main(["runbook", "run", "wiki/fake.md#fake-rb", "--root", str(root), "--yes",
                 "--sweep", "C=1,3", "--repeats", "1", "--no-warmup"]) == 0
    out, _err = capsys.readouterr()
    assert f"compared with runbooks/fake-rb/{path.name} (" in out
    assert "  no number moved beyond the spread at the 2 point(s) both runs measured" in out
    newest = max((root / "runbooks" / "fake-rb").glob("*.json"))
    again = json.loads(newest.read_text())["clients"][0]
    assert (again["repeats"], again["warmup"]) == (1, False)
    assert [len(p["samples"]) for p in again["points"]] == [1, 1]


def test_cli_run_failure_exit_1_and_usage_exit_2(tmp_path, capsys, fake_path, monkeypatch):
    port = free_port()
    root = make_wiki(tmp_path, port)
    assert main(["runbook", "run", "fake-rb", "--root", str(root), "--yes",
                 "--sweep", "X=1"]) == 2
    assert "sweeps C" in capsys.readouterr().err
    monkeypatch.setenv("FAKE_SERVER_ARGS", "--exit-code 4")
    assert main(["runbook", "run", "fake-rb", "--root", str(root), "--yes"]) == 1
    out, err = capsys.readouterr()
    assert "FAILED at ready: server exited with code 4" in out
    assert "fake start-up failure" in err
    text = (root / "wiki/fake.md").read_text()
    assert note("CAUTION", "Latest run failed") in text


def test_arch_filter(tmp_path):
    root = make_wiki(tmp_path)
    path = root / "wiki/fake.md"
    path.write_text(path.read_text() + "\n<!-- wiki:results runbook=fake-rb arch=sm90 -->\n"
                    "<!-- wiki:end -->\n")
    record(root)  # an sm120 record
    text = apply(root)
    tail = text.split("## History")[1]
    assert "No run of runbook `fake-rb` on sm90 has been recorded yet." in tail
    assert "| 1 | 13.62 |" in text.split("## History")[0]


GRID_PAGE = """---
title: Fake grid
---

# Fake grid

```{{ .bash #fake-grid .runbook-server engine=vllm gpus=0 ready_timeout=30 stop_timeout=3 }}
vllm serve fake-model --port {port}
```

```{{ .bash .runbook-client for=fake-grid name=grid sweep="C=1,2;N=4,8" timeout=30 }}
vllm bench serve --model fake-model --num-prompts "${{N:-4}}" --max-concurrency "${{C:-1}}"
```

<!-- wiki:results runbook=fake-grid view=serving -->
<!-- wiki:end -->
"""


def test_cli_run_grid_sweep_end_to_end(tmp_path, capsys, fake_path):
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "grid.md").write_text(GRID_PAGE.format(port=free_port()))
    assert main(["runbook", "run", "fake-grid", "--root", str(tmp_path), "--yes",
                 "--repeats", "1", "--no-warmup"]) == 0, capsys.readouterr()
    (path,) = (tmp_path / "runbooks" / "fake-grid").glob("*.json")
    client = json.loads(path.read_text())["clients"][0]
    assert client["sweep_vars"] == ["C", "N"]
    assert [(p["value"], p["coords"]) for p in client["points"]] == [
        ("C=1,N=4", {"C": "1", "N": "4"}), ("C=1,N=8", {"C": "1", "N": "8"}),
        ("C=2,N=4", {"C": "2", "N": "4"}), ("C=2,N=8", {"C": "2", "N": "8"})]
    for p in client["points"]:  # both variables reached the client
        raw = json.loads((tmp_path / p["result_file"]).read_text())
        assert (raw["max_concurrency"], raw["num_prompts"]) == (
            int(p["coords"]["C"]), int(p["coords"]["N"]))
    text = (tmp_path / "wiki" / "grid.md").read_text()
    assert "| C \\\\ N | 4 | 8 |" in text and "Output throughput (tok/s)" in text
