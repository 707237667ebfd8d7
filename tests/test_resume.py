"""`wiki runbook run --resume`: a run of server variants that stopped part-way is continued by
a run that measures only what it lacks. Against the fake vLLM and the real `wiki kld capture`:
the second variant's server fails on the first run, the resumed run measures it, and its record
holds both variants, the first taken over (named with its run), the second's KLD scored against
the reference the first run kept, the earlier record pinned in the receipt."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from harness import free_port, make_tree

from wikitools.cli import main
from wikitools.core.errors import UsageError
from wikitools.runbook.records.record import Record, read_record
from wikitools.runbook.records.resume import check_same_gpus

FAKE_BIN = Path(__file__).parent / "fakes" / "bin"
WIKI_BIN = Path(sys.executable).parent

PAGE = """---
title: Resumed variants
---

# Resumed variants

```bash {{ #res-var .runbook-server engine=vllm gpus=0 stop_timeout=3 variants="KV=1000,2000" }}
vllm serve ./model --port {port} --kv-tokens "${{KV:-100}}" \\
  $([ "${{KV:-100}}" = 2000 ] && [ -n "${{FAIL_SECOND:-}}" ] && echo --exit-code 3)
```

```bash {{ .runbook-client for=res-var name=bench timeout=30 }}
vllm bench serve --model ./model --num-prompts 4 --max-concurrency 1
```

```bash {{ .runbook-client for=res-var name=kld kind=kld timeout=60 }}
wiki kld capture --model ./model --seed 0 --positions 64 --id-range 3-100 --top-k 8
```

<!-- wiki:results runbook=res-var view=serving client=bench -->
<!-- wiki:end -->
"""

RUN = ["runbook", "run", "res-var", "--yes", "--repeats", "2", "--no-warmup"]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{WIKI_BIN}{os.pathsep}"
                       f"{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_SERVER_ARGS", raising=False)
    make_tree(tmp_path, {"wiki/v.md": PAGE.format(port=free_port())})
    (tmp_path / "model").mkdir()
    return tmp_path


def _records(root: Path) -> list[Path]:
    return sorted((root / "runbooks/res-var").glob("*.json"))


def _first_run(root: Path, monkeypatch, capsys) -> Record:
    monkeypatch.setenv("FAIL_SECOND", "1")
    assert main([*RUN, "--root", str(root)]) == 1
    monkeypatch.delenv("FAIL_SECOND")
    capsys.readouterr()
    (path,) = _records(root)
    record = read_record(path)
    assert [(v.name, v.status) for v in record.variants] == [("KV=1000", "ok"),
                                                             ("KV=2000", "failed")]
    return record


def test_a_resumed_run_measures_what_the_earlier_one_lacks_and_keeps_the_rest(
        tree: Path, monkeypatch, capsys) -> None:
    first = _first_run(tree, monkeypatch, capsys)
    first_bytes = _records(tree)[0].read_bytes()
    # the page shows what the failed run finished, and how to finish the rest
    page = (tree / "wiki/v.md").read_text()
    assert ("The table below shows the variants it finished (`KV=1000`); `wiki runbook run` "
            "with\n> `--resume` measures the others") in page
    assert "\n| 1000 |" in page and "\n| 2000 |" not in page

    assert main(["runbook", "plan", "res-var", "--resume", "--root", str(tree)]) == 0
    out = capsys.readouterr().out
    where = f"runbooks/res-var/{first.run_id}.json"
    assert f"resumes {where}: takes over the variants it finished (KV=1000)" in out
    assert "variant KV=2000" in out and "variant KV=1000" not in out

    # no option repeated: the earlier run's repeats and warm-up
    assert main(["runbook", "run", "res-var", "--yes", "--resume", "--root", str(tree)]) == 0
    capsys.readouterr()
    earlier, later = _records(tree)
    assert earlier.read_bytes() == first_bytes  # the earlier record is left as it was
    record = read_record(later)
    assert record.status == "ok" and record.failed_step is None
    kept, new = record.variants
    assert (kept.name, kept.measured_in) == ("KV=1000", first.run_id)
    assert kept.clients == first.variants[0].clients and kept.markers == first.variants[0].markers
    assert (new.name, new.status, new.measured_in) == ("KV=2000", "ok", None)
    assert new.markers["kv_cache_tokens"] == 2000
    # only the missing variant ran: its steps, none of the first variant's
    steps = [s.name for s in record.steps]
    assert "[KV=2000] start" in steps and not any(s.startswith("[KV=1000]") for s in steps)
    # its server started in the compile caches of the run resumed: warm
    assert new.markers["caches_warm_at_start"]["vllm torch.compile"] is True
    (compiled,) = [c for c in record.receipt["caches"] if c["name"] == "vllm torch.compile"]
    assert f"/{first.run_id}/caches/" in compiled["path"]
    # the new variant's captures scored against the reference the first run kept
    ref = first.variants[0].client("kld").points[0].metrics["kld_reference"]
    scored = new.client("kld").points[0].metrics
    assert scored["kld_reference"] == ref and (tree / ref).is_file()
    assert scored["kld_runs"] == 2 and "kld_problem" not in scored
    # the receipt pins the earlier record
    assert record.receipt["resumed_from"] == {
        "run_id": first.run_id, "path": where,
        "sha256": "sha256:" + hashlib.sha256(first_bytes).hexdigest()}
    page = (tree / "wiki/v.md").read_text()
    assert (f"- `KV=1000` (measured in run `{first.run_id}`, resumed): vLLM 0.0.0+fake"
            in page)
    assert f"runbooks/res-var/{record.run_id}.json" in page

    # nothing is left: refused, nothing started, nothing written
    assert main([*RUN, "--resume", "--root", str(tree)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"--resume: runbooks/res-var/{record.run_id}.json finished every variant; "
        "nothing is left to run")
    assert len(_records(tree)) == 2


def test_a_run_is_resumed_only_with_the_same_blocks_and_the_same_runs(
        tree: Path, monkeypatch, capsys) -> None:
    first = _first_run(tree, monkeypatch, capsys)
    where = f"runbooks/res-var/{first.run_id}.json"
    assert main([*RUN[:-3], "--repeats", "3", "--no-warmup", "--resume", first.run_id,
                 "--root", str(tree)]) == 2
    assert (f"--resume: {where} ran client 'bench' 2 time(s) without a warm-up run; this run "
            "would run it 3 time(s) without a warm-up run: give the same --repeats and "
            "--no-warmup") in capsys.readouterr().err
    assert main([*RUN, "--resume", "20990101T000000.000Z-00000000", "--root", str(tree)]) == 2
    assert ("--resume 20990101T000000.000Z-00000000: runbook 'res-var' has no such record"
            in capsys.readouterr().err)
    page = tree / "wiki/v.md"
    page.write_text(page.read_text().replace("--num-prompts 4", "--num-prompts 6"))
    assert main([*RUN, "--resume", "--root", str(tree)]) == 2
    err = capsys.readouterr().err
    assert f"--resume: {where} was made from other blocks ({first.blocks_hash[7:15]}; " in err
    assert len(_records(tree)) == 1


def test_a_run_is_resumed_only_on_the_gpus_it_measured_on() -> None:
    record = Record(runbook="r", page="wiki/v.md", blocks_hash="sha256:00",
                    run_id="20261204T201230.971Z-f43c20b5-d48bbd7a",
                    started_at="2026-12-04T20:12:30Z", finished_at="2026-12-04T20:21:20Z",
                    status="failed", host={"gpus": [{"name": "NVIDIA H200"}]})
    check_same_gpus(record, ["NVIDIA H200"])
    with pytest.raises(UsageError) as exc:
        check_same_gpus(record, ["NVIDIA H100 80GB HBM3"])
    assert str(exc.value) == ("--resume: runbooks/r/20261204T201230.971Z-f43c20b5-d48bbd7a.json "
                              "was measured on 1 × NVIDIA H200; this host has "
                              "1 × NVIDIA H100 80GB HBM3")
    data = json.loads(json.dumps(record.to_dict()))
    assert Record.from_dict(data) == record


def test_a_run_of_some_variants_is_resumed_with_the_others(tree: Path, capsys) -> None:
    assert main([*RUN, "--variant", "KV=2000", "--root", str(tree)]) == 0, capsys.readouterr()
    (path,) = _records(tree)
    first = read_record(path)
    assert first.ok and [v.name for v in first.variants] == ["KV=2000"]
    assert main([*RUN, "--resume", "--root", str(tree)]) == 0, capsys.readouterr()
    record = read_record(_records(tree)[1])
    assert [(v.name, v.measured_in) for v in record.variants] == [
        ("KV=1000", None), ("KV=2000", first.run_id)]  # the block's order
    # the reference is the one the first run kept (its first variant's), not a new one
    ref = first.variants[0].client("kld").points[0].metrics["kld_reference"]
    assert record.variants[0].client("kld").points[0].metrics["kld_reference"] == ref
