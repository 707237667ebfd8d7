"""KLD scoring of records, receipts (file hashes, model snapshot, cache folders) and the kld,
capacity and trust views, on records built here: no server needed."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from wikitools.quality import capture as cap
from wikitools.runbook.engines.command import parse_server_command
from wikitools.runbook.execution import receipt
from wikitools.runbook.execution.receipt import model_snapshot, snapshot
from wikitools.runbook.records.kld_scores import keep_references, score_record
from wikitools.runbook.records.record import ClientResult, Point, Record, Sample, write_record
from wikitools.runbook.rendering import receipts, serving
from wikitools.runbook.rendering.escape import md_text


def _write_capture(path: Path, probs: list[float], top_k: int = 3) -> str:
    c = cap.Capture("m", "vllm", top_k, "sha256:in", "seed:0",
                    (tuple((i, math.log(p)) for i, p in enumerate(probs)),))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cap.dumps(c))
    return path.as_posix()


def _record(root: Path, runbook: str, runs: list[list[float]], reference: str | None = None,
            status: str = "ok") -> Record:
    samples = []
    for i, probs in enumerate(runs, start=1):
        rel = f".artifacts/{runbook}/run/kld-r{i}.json"
        _write_capture(root / rel, probs)
        samples.append(Sample("ok", {"positions": 1, "top_k": 3}, 0.1, rel))
    point = Point(None, "ok", {"positions": 1, "top_k": 3}, samples[0].result_file,
                  samples=tuple(samples))
    run_id = "20261201T000000Z-" + hashlib.sha256(runbook.encode()).hexdigest()[:8]
    rec = Record(runbook, "wiki/x.md", "sha256:b", run_id,
                 "2026-12-01T00:00:00Z", "2026-12-01T00:01:00Z", status,
                 clients=(ClientResult("kld", "kld", "wiki kld capture", None, (point,)),))
    scored = score_record(rec, root, lambda _name: reference)
    keep_references(root, scored)  # as a run does just before it writes the record
    return scored


def test_the_first_capture_becomes_the_stored_reference_and_later_runs_score_against_it(
        tmp_path: Path) -> None:
    rec = _record(tmp_path, "ref-runbook", [[0.7, 0.2, 0.1], [0.7, 0.2, 0.1], [0.6, 0.3, 0.1]])
    m = rec.clients[0].points[0].metrics
    stored = tmp_path / m["kld_reference"]
    digest = "sha256:" + hashlib.sha256(stored.read_bytes()).hexdigest()
    assert m["kld_reference"] == f"runbooks/ref-runbook/kld/{digest[7:23]}.json"
    assert m["kld_reference_sha256"] == digest
    third = 0.7 * math.log(0.7 / 0.6) + 0.2 * math.log(0.2 / 0.3)
    assert m["kld_runs"] == 2 and m["kld_mean"] == pytest.approx(third / 2)
    assert m["kld_run_sd"] == pytest.approx(math.sqrt((third ** 2) / 2))
    samples = rec.clients[0].points[0].samples
    assert samples[0].metrics["kld_reference_run"] is True
    assert [s.metrics.get("kld_mean") for s in samples[1:]] == [0.0, pytest.approx(third)]


def test_a_reference_from_another_runbook_scores_every_run(tmp_path: Path) -> None:
    ref = _record(tmp_path, "bf16-runbook", [[0.7, 0.2, 0.1]])
    write_record(tmp_path, ref)
    other = _record(tmp_path, "fp8-runbook", [[0.6, 0.3, 0.1]], reference="bf16-runbook")
    m = other.clients[0].points[0].metrics
    assert m["kld_reference"] == ref.clients[0].points[0].metrics["kld_reference"]
    assert m["kld_runs"] == 1 and m["kld_mean"] > 0
    assert not (tmp_path / "runbooks/fp8-runbook/kld").exists()
    missing = _record(tmp_path, "x-runbook", [[0.6, 0.3, 0.1]], reference="runbooks/none.json")
    assert "no such capture" in missing.clients[0].points[0].metrics["kld_problem"]


def test_a_single_run_is_the_reference_with_nothing_to_compare(tmp_path: Path) -> None:
    m = _record(tmp_path, "one-run", [[0.5, 0.3, 0.2]]).clients[0].points[0].metrics
    assert "kld_mean" not in m and "no other run" in m["kld_note"]
    cfg = receipts.Config("one-run", _record(tmp_path, "one-run", [[0.5, 0.3, 0.2]]))
    (row,), _refs = receipts.kld_rows([cfg])
    assert row[1] == "the reference run; no other run to compare with it"


def test_kld_rows_and_capacity_fits(tmp_path: Path) -> None:
    rec = _record(tmp_path, "ref-runbook", [[0.7, 0.2, 0.1], [0.6, 0.3, 0.1]])
    (row,), refs = receipts.kld_rows([receipts.Config("auto", rec)])
    assert row[0] == "auto" and row[4:7] == ["1", "1", "3"] and row[7] == "100.0 %"
    assert refs and "runbooks/ref-runbook/kld/" in refs[0]
    capacity = replace(rec, markers={"kv_cache_tokens": 100_000, "kv_cache_gib": 3.0,
                                     "model_load_gib": 2.3, "max_concurrency": 0.76,
                                     "max_concurrency_tokens": 131072, "max_model_len": 131072},
                       server={"command": "vllm serve m --kv-cache-dtype fp8 "
                                          "--gpu-memory-utilization 0.3"})
    (crow,) = receipts.capacity_rows([receipts.Config("fp8", capacity)], [8192, 131072, 262144])
    assert crow[1:7] == ["fp8", "0.3", "2.30", "3.00", "100,000", "0.76× at 131,072"]
    assert crow[7:] == ["yes", "no (KV cache holds 100,000)", "no (max model length 131,072)"]


def test_receipt_hashes_files_and_names_the_model_snapshot(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model/config.json").write_text("{}")
    (tmp_path / "probe.jsonl").write_text("x")
    got = snapshot(tmp_path, ["model", "probe.jsonl", "absent.json"])
    assert got == {"model/config.json": "sha256:" + hashlib.sha256(b"{}").hexdigest(),
                   "probe.jsonl": "sha256:" + hashlib.sha256(b"x").hexdigest()}

    def snap(text: str) -> dict[str, object]:
        return model_snapshot(parse_server_command(text), tmp_path, {"M": "org/from-env"})

    assert snap("vllm serve org/name --revision abc123")["snapshot"] == "abc123"
    assert snap("vllm serve /hf/models--o--n/snapshots/0123abcd/")["snapshot"] == "0123abcd"
    assert snap("vllm serve org/name") == {"model": "org/name", "snapshot": "main",
                                           "from": "no --revision: the default branch"}
    assert snap('vllm serve "${M:-org/default}"')["model"] == "org/from-env"
    assert snap("vllm serve model")["snapshot"] is None  # a folder of the wiki root


def test_speculative_throughput_stands_beside_its_acceptance_or_is_untrusted() -> None:
    points = (Point("1", "ok", {"output_throughput": 100.0, "spec_decode_acceptance": 0.5},
                    samples=(Sample("ok", {"output_throughput": 100.0}),)),
              Point("8", "ok", {"output_throughput": 300.0},
                    samples=(Sample("ok", {"output_throughput": 300.0}),)))
    client = ClientResult("throughput", "serving", "vllm bench serve", "C", points)
    table = serving.short_table(client, speculative=True)
    assert table["header"][1:3] == ["output tok/s", "spec acceptance"]
    assert table["rows"][0][1:3] == ["100.0", "50.0 %"]
    assert table["rows"][1][1:3] == ["300.0 untrusted", "none captured"]
    # counters read, and the drafter made no draft at all: said so, not "none captured"
    none_drafted = replace(points[1], metrics={**points[1].metrics,
                                               "spec_decode_acceptance": None,
                                               "spec_decode_draft_tokens_delta": 0})
    zero = serving.short_table(replace(client, points=(none_drafted,)), speculative=True)
    assert zero["rows"][0][1:3] == ["300.0 untrusted", "0 drafts"]
    assert "spec acceptance" not in serving.short_table(client)["header"]
    assert json.dumps(table)  # plain data for the template


def test_each_server_variant_is_a_row_read_from_its_own_engine_facts(tmp_path: Path) -> None:
    from wikitools.runbook.records.record import VariantResult

    command = 'vllm serve m --kv-cache-dtype "${KV:-auto}" --gpu-memory-utilization 0.5'
    variants = tuple(
        VariantResult(coords=(("KV", kv),), server={"command": command},
                      markers={"kv_cache_tokens": tokens, "max_model_len": 4096,
                               **({"cache_config": {"cache_dtype": kv}} if kv == "fp8" else {})})
        for kv, tokens in (("auto", 1000), ("fp8", 2000)))
    rec = Record("r", "wiki/x.md", "sha256:b", "20261201T000000Z-00000000",
                 "2026-12-01T00:00:00Z", "2026-12-01T00:01:00Z", "ok", variants=variants)
    cfgs = receipts.configs([rec], {}, ())
    assert [c.label for c in cfgs] == ["KV=auto", "KV=fp8"]
    rows = receipts.capacity_rows(cfgs, [1500])
    assert [r[1:3] for r in rows] == [["auto", "0.5"], ["fp8", "0.5"]]
    assert [r[-1] for r in rows] == ["no (KV cache holds 1,000)", "yes"]


def _variant_record(root: Path, command: str, captures: dict[str, list[list[float]]],
                    var: str = "KV") -> Record:
    """A record of server variants (`var` = each key of `captures`), each with a kld client
    whose runs wrote the given captures; scored as a run scores it."""
    from wikitools.runbook.records.record import VariantResult

    variants = []
    for value, runs in captures.items():
        samples = []
        for i, probs in enumerate(runs, start=1):
            rel = f".artifacts/v/run/{var}_{value}/kld-r{i}.json"
            _write_capture(root / rel, probs)
            samples.append(Sample("ok", {"positions": 1, "top_k": 3}, 0.1, rel))
        point = Point(None, "ok", {"positions": 1, "top_k": 3}, samples[0].result_file,
                      samples=tuple(samples))
        variants.append(VariantResult(
            coords=((var, value),), server={"command": command},
            clients=(ClientResult("kld", "kld", "wiki kld capture", None, (point,)),)))
    rec = Record("v", "wiki/x.md", "sha256:b", "20261201T000000Z-00000000",
                 "2026-12-01T00:00:00Z", "2026-12-01T00:01:00Z", "ok", variants=tuple(variants))
    return score_record(rec, root, lambda _name: None)


def test_a_kv_format_variant_captured_byte_for_byte_as_the_reference_is_not_exercised(
        tmp_path: Path) -> None:
    same = [0.7, 0.2, 0.1]
    rec = _variant_record(tmp_path, 'vllm serve m --kv-cache-dtype "${KV:-auto}"',
                          {"auto": [same, same], "fp8": [same, same]})
    auto, fp8 = (v.clients[0].points[0].metrics for v in rec.variants)
    assert auto["kld_mean"] == 0 and "kld_not_exercised" not in auto  # the same settings
    assert fp8["kld_mean"] == 0 and fp8["kld_identical_runs"] == 2
    assert fp8["kld_not_exercised"] == (
        "not exercised: the capture equals the reference, although KV cache format fp8 (the "
        "reference: auto) must change the outputs")
    rows, _refs = receipts.kld_rows(receipts.configs([rec], {}, ()))
    assert rows[0][:2] == ["KV=auto", "0"]
    assert rows[1][:3] == ["KV=fp8", md_text(fp8["kld_not_exercised"]), "–"]
    # Scoring wrote nothing: the reference is kept only when the record is written.
    assert not (tmp_path / "runbooks").exists()
    assert keep_references(tmp_path, rec) == [auto["kld_reference"]]
    assert (tmp_path / auto["kld_reference"]).is_file()


def test_a_variant_that_changes_the_outputs_scores_a_number(tmp_path: Path) -> None:
    rec = _variant_record(tmp_path, 'vllm serve m --dtype "${DTYPE:-bfloat16}"',
                          {"bfloat16": [[0.7, 0.2, 0.1]], "float32": [[0.6, 0.3, 0.1]]},
                          var="DTYPE")
    fp32 = rec.variants[1].clients[0].points[0].metrics
    assert fp32["kld_mean"] > 0 and fp32["kld_identical_runs"] == 0
    assert "kld_not_exercised" not in fp32
    # settings that cannot change the outputs (the memory fraction) never flag a 0
    mem = _variant_record(tmp_path, 'vllm serve m --gpu-memory-utilization "${MEM:-0.5}"',
                          {"0.5": [[0.7, 0.2, 0.1]], "0.3": [[0.7, 0.2, 0.1]]}, var="MEM")
    assert "kld_not_exercised" not in mem.variants[1].clients[0].points[0].metrics


def test_the_receipt_counts_the_result_files_it_hashed() -> None:
    from wikitools.runbook.records.record import read_record

    rec = read_record(Path(__file__).resolve().parents[1] / "runbooks/sm90-llama1b-kv-variants"
                      / "20261201T153245.030Z-31e021aa-f9cac659.json")
    hashed = [f["path"] for f in rec.receipt["files"] if f["path"].startswith(".artifacts/")]
    results = [p for p in hashed if not p.endswith(".log")]
    assert len(results) == 24 and len(hashed) == 52  # the run's result files, and its logs
    line = next(ln for ln in receipts.receipt_lines(rec) if "of the run under" in ln)
    assert line.startswith("- 24 result files and 28 other files of the run under ")


def _timed(durations: list[float], least: float | None) -> ClientResult:
    extra = {"min_duration_s": least} if least is not None else {}
    samples = tuple(Sample("ok", {"output_throughput": 100.0 + i, "duration": d, **extra})
                    for i, d in enumerate(durations))
    point = Point("32", "ok", {"output_throughput": 101.0, "duration": sorted(durations)[1],
                               **extra}, samples=samples)
    return ClientResult("throughput", "serving", "vllm bench serve", "C", (point,),
                        repeats=len(durations))


def test_a_band_needs_runs_of_the_minimum_length_and_says_how_many_and_how_long() -> None:
    steady = _timed([35.0, 36.0, 34.0], 30.0)
    assert serving.short_table(steady)["rows"][0][1] == "101.0 ±1.0\u202f%"
    note = serving.repeats_note(steady)
    assert "median of 3 runs of 34.0–36.0 s each;" in note
    assert "too short" not in note and "range, not a band" not in note
    # the block asked for 40 s: the same runs are too short, and the headline shows no band
    strict = _timed([35.0, 36.0, 34.0], 40.0)
    assert serving.short_table(strict)["rows"][0][1] == "101.0 too short"
    assert "32 (35.0 s, under 40 s)" in serving.repeats_note(strict)
    # a record from before the rule: the default minimum, 10 s
    assert serving.short_table(_timed([4.2, 4.0, 3.9], None))["rows"][0][1] == "101.0 too short"
    assert "Two runs make a range, not a band: 3 or more" in serving.repeats_note(
        _timed([35.0, 36.0], 30.0))


def test_receipt_does_not_hash_a_sparse_1_tib_model_file(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model/config.json").write_text("{}")
    with (tmp_path / "model/weights.bin").open("wb") as f:
        f.truncate(2**40)  # sparse: no disk used, but reading it would take minutes
    code = ("import json, sys; from pathlib import Path; "
            "from wikitools.runbook.execution.receipt import snapshot; "
            "print(json.dumps(snapshot(Path(sys.argv[1]), ['model'])))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=True)  # a deadline: it used to hash on
    got = json.loads(done.stdout)
    assert got["model/config.json"] == "sha256:" + hashlib.sha256(b"{}").hexdigest()
    assert got["model/weights.bin"] == ("not hashed: 1,024.0 GiB, over the 16.0 GiB a file may "
                                        "have to be hashed for the receipt")


def test_receipt_hashing_stops_when_its_time_is_spent(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model/a.bin").write_bytes(b"x" * 10)
    monkeypatch.setattr(receipt, "HASH_BUDGET_S", -1.0)  # already spent when hashing starts
    assert snapshot(tmp_path, ["model"]) == {
        "model/a.bin": "not hashed: 10 bytes; the -1 s the receipt may spend hashing ran out"}


def test_a_file_not_hashed_is_shown_so_in_the_receipt(tmp_path: Path) -> None:
    rec = _record(tmp_path, "nh", [[0.5, 0.3, 0.2]])
    entry = receipt._entry("model/w.bin", "not hashed: 2.0 GiB, over the limit", None)
    assert entry == {"path": "model/w.bin", "sha256": None, "role": "read",
                     "not_hashed": "2.0 GiB, over the limit"}
    lines = receipts.receipt_lines(replace(rec, receipt={"files": [entry]}))
    assert "- read: `model/w.bin` not hashed (2.0 GiB, over the limit)" in lines
