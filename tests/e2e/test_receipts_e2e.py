"""Receipts end to end on the real vLLM CPU engine: `wiki runbook run` of tests/e2e/tree's
receipts page (a tiny model with saved random weights) captures KLD, runs the correctness probes,
records the engine's KV capacity and the receipt, and renders the kld, capacity, probes and
receipt views. Two server variants (FP16 and FP32), one start each."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ENGINE_BIN, MAKE_MODEL, REPO, Run, free_port, needs_engine

TREE = Path(__file__).resolve().parent / "tree"
pytestmark = list(needs_engine)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "wiki-root"
    shutil.copytree(TREE, root)
    return root


@pytest.fixture(scope="module")
def random_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rw-model")
    subprocess.run([str(ENGINE_BIN / "python"), str(MAKE_MODEL), str(out), "--preset", "tiny",
                    "--random-weights", "0.5"], check=True, capture_output=True, timeout=300)
    return out


def _sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _region(text: str, view: str) -> str:
    m = re.search(rf"<!-- wiki:results runbook=cpu-receipts view={view}[^>]*-->\n(.*?)"
                  r"<!-- wiki:end[^>]*-->", text, re.S)
    assert m, f"no {view} region"
    return m[1]


def test_kld_capacity_probes_and_receipt_end_to_end(tree: Path, random_model: Path) -> None:
    probes = tree / "benchmarks/probes/basic.jsonl"
    probes.parent.mkdir(parents=True)
    probes.write_bytes((REPO / "benchmarks/probes/basic.jsonl").read_bytes())
    port = free_port()
    # The clients call `wiki`: this checkout's, after the engine's bin directory.
    path = os.pathsep.join((str(ENGINE_BIN), os.environ.get("PATH", ""),
                            str(Path(sys.executable).parent)))
    run = Run(tree, "cpu-receipts", port=port, model=random_model,
              args=["--port", str(port), "--repeats", "2", "--no-warmup"],
              env={"RW_MODEL": str(random_model)})
    run.env["PATH"] = path
    try:
        rc = run(timeout=1200)
        assert rc == 0, run.output
        rec = run.record()
    finally:
        run.cleanup()
    run.assert_nothing_left()
    assert rec["schema_version"] == 3 and rec["status"] == "ok"
    fp16, fp32 = rec["variants"]
    assert [fp16["coords"], fp32["coords"]] == [[["DTYPE", "float16"]], [["DTYPE", "float32"]]]
    # each variant its own real engine, the first stopped before the second started
    assert [v["engine"]["version"][:6] for v in (fp16, fp32)] == ["0.32.0", "0.32.0"]
    names = [s["name"] for s in rec["steps"]]
    assert names.index("[DTYPE=float16] teardown") < names.index("[DTYPE=float32] start")
    assert all(s["status"] == "ok" for s in rec["steps"]), rec["steps"]
    kb = {c["name"]: c for c in fp16["clients"]}
    kf = {c["name"]: c for c in fp32["clients"]}

    # KLD: the first FP16 capture is the reference (kept under runbooks/, named by its hash);
    # FP16's second capture against it is exactly 0 on a deterministic engine, FP32's are not.
    (kpoint,) = kb["kld"]["points"]
    m = kpoint["metrics"]
    ref = tree / m["kld_reference"]
    assert ref.is_file() and _sha(ref) == m["kld_reference_sha256"]
    assert m["kld_reference"] == f"runbooks/cpu-receipts/kld/{_sha(ref)[7:23]}.json"
    assert m["kld_runs"] == 1 and m["kld_positions"] == 47 and m["kld_top_k"] == -1
    assert m["kld_mean"] == 0.0 and m["kld_top1_agreement"] == 1.0
    first, second = kpoint["samples"]
    assert first["metrics"]["kld_reference_run"] is True and second["metrics"]["kld_mean"] == 0
    capture = json.loads(ref.read_text())
    assert len(capture["positions"]) == 47 and capture["input_source"] == "seed:0:48:3-512"
    assert len(capture["positions"][0]) == 512  # the whole vocabulary
    (fpoint,) = kf["kld"]["points"]
    fm = fpoint["metrics"]
    assert fm["kld_reference_sha256"] == m["kld_reference_sha256"]
    assert fm["kld_runs"] == 2 and fm["kld_mean"] > 1e-4 and fm["kld_run_sd"] is not None
    assert all(s["metrics"]["kld_mean"] > 0 for s in fpoint["samples"])
    # The self-check: FP16's second capture is byte for byte the reference (the same settings:
    # nothing to flag); FP32's differ, as a different dtype must.
    assert m["kld_identical_runs"] == 1 and "kld_not_exercised" not in m
    assert fm["kld_identical_runs"] == 0 and "kld_not_exercised" not in fm

    # Probes: random weights answer nothing right, and every failure is kept.
    for variant in (kb, kf):
        pm = variant["probes"]["points"][0]["metrics"]
        assert pm["total"] == 8 and pm["concurrency"] == 4
        result = json.loads((tree / variant["probes"]["points"][0]["samples"][0]["result_file"])
                            .read_text())
        assert len(result["failures"]) == pm["failures"] == 8 - pm["correct"]
        assert all({"prompt", "answer", "expected"} <= set(f) for f in result["failures"])

    # Capacity from the engine's own log line: the same KV memory holds half as many FP32
    # tokens (the KV cache takes the model's dtype).
    kv_fp16, kv_fp32 = fp16["markers"]["kv_cache_tokens"], fp32["markers"]["kv_cache_tokens"]
    assert kv_fp16 == 2 * kv_fp32 > 0
    assert fp16["markers"]["max_concurrency_tokens"] == 512

    # Receipt: the probe file and the model's files with their real hashes, the reference,
    # the cache folders.
    files = {f["path"]: f for f in rec["receipt"]["files"]}
    probe_file = files["benchmarks/probes/basic.jsonl"]
    assert probe_file == {"path": "benchmarks/probes/basic.jsonl", "role": "read",
                          "sha256": _sha(tree / "benchmarks/probes/basic.jsonl")}
    weights = files[f"{random_model}/model.safetensors"]
    assert weights["sha256"] == _sha(random_model / "model.safetensors")
    assert files[m["kld_reference"]]["role"] == "kld reference"
    assert rec["receipt"]["model"] == {"model": str(random_model), "snapshot": None,
                                       "from": "local folder: its files are hashed"}
    assert {c["name"] for c in rec["receipt"]["caches"]} >= {"vllm torch.compile", "triton"}
    # One set of compile and kernel caches for the run, new with it: the first start found
    # every one empty; each start says what it found.
    shared = tree / rec["artifacts_dir"] / "caches"
    assert all(c["shared"] and c["path"].startswith(shared.resolve().as_posix())
               for c in rec["receipt"]["caches"])
    first, later = (v["markers"]["caches_warm_at_start"] for v in rec["variants"])
    assert set(first) == set(later) >= {"vllm torch.compile", "triton"}
    assert not any(first.values())
    assert later["torchinductor"] is True  # the CPU kernels the first start compiled

    page = (tree / "wiki/receipts.md").read_text()
    kld_rows = [ln for ln in _region(page, "kld").splitlines() if ln.startswith("| DTYPE=")]
    assert kld_rows[0] == "| DTYPE=float16 | 0 | – | 0 | 1 | 47 | all | 100.0 % |"
    assert kld_rows[1].startswith("| DTYPE=float32 | ") and len(kld_rows) == 2
    assert "correct at c4" in _region(page, "probes")
    cap = _region(page, "capacity")
    assert f"{kv_fp16:,}" in cap and f"{kv_fp32:,}" in cap and "no (max model length 512)" in cap
    assert _sha(tree / "benchmarks/probes/basic.jsonl") in _region(page, "receipt")
    assert "- start of `DTYPE=float16`: cold (every cache empty), ready in " in (
        _region(page, "receipt"))
