"""Hostile run records on the published site: a page rendered (`wiki runbook render`) from
records whose strings carry HTML, Markdown links, attribute lists, backticks and Jinja syntax,
built with the project's real `mkdocs build --strict` and loaded in Chromium through
Playwright: no script runs, no element or attribute is injected, and the strings are shown as
text (failure box, provenance, tables, history, the measured badge)."""

from __future__ import annotations

import copy
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from fakes.site_tree import site_tree
from fakes.sweep_page import sweep_page
from harness import make_tree

from wikitools.cli import main

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RB = "hostile-rb"

RECEIPT_VIEWS = ("kld", "capacity lengths=8192", "probes", "receipt")
PAGE = sweep_page(RB, "Hostile records") + "".join(
    f"\n## {view.split()[0]}\n\n<!-- wiki:results runbook={RB} view={view} -->\n<!-- wiki:end -->\n"
    for view in RECEIPT_VIEWS)

# Each payload sets window.__pwned when it runs, or leaves an attribute naming __pwned.
SCRIPT = "<script>window.__pwned=1</script>{{ 7*7 }}"
IMAGE = "img`<img src=x onerror=window.__pwned=2>`x"
DRIVER = "<svg onload=window.__pwned=3>"
GPU = "[click](javascript:window.__pwned=4) *x*{: onclick=\"window.__pwned=5\" }"
PSTATE = "<iframe src=javascript:window.__pwned=6></iframe>"
ERROR = 'engine error: config {"name": "<img src=x onerror=window.__pwned=7>"}'
STEP = "client:`<img src=x onerror=window.__pwned=8>`"
VALUE = "<img src=x onerror=window.__pwned=9>"
TICKED = "a`<img src=x onerror=window.__pwned=10>`b"
SVG = "<svg/onload=window.__pwned=11>"


def _receipt_clients() -> list[dict[str, Any]]:
    """A KLD and a probe client whose strings are hostile (the kld, probes views)."""
    kld = {"kld_mean": 0.01, "kld_runs": VALUE, "kld_positions": 3, "kld_top_k": SVG,
           "kld_reference": TICKED, "kld_reference_sha256": "sha256:`<b onclick=__pwned>`"}
    probe = {"correct": 3, "total": 4, "failures": 1, "probe_file": VALUE}
    return [{"name": "kld", "kind": "kld", "command": "wiki kld capture",
             "points": [{"status": "ok", "metrics": kld}]},
            {"name": "probe", "kind": "probe", "command": "wiki probe",
             "points": [{"status": "ok", "metrics": probe, "result_file": TICKED},
                        {"status": "failed", "message": SCRIPT, "metrics": {}}]}]


RECEIPT = {
    "model": {"model": TICKED, "snapshot": TICKED, "from": VALUE},
    "files": [{"role": VALUE, "path": TICKED, "sha256": SVG}],
    "speculative": {"method": SCRIPT},
    "caches": [{"name": VALUE, "path": TICKED, "warm": True}],
}


def _records() -> list[dict[str, Any]]:
    metrics = {"output_throughput": 100.5, "median_tpot_ms": 9.5, "median_ttft_ms": 20.0,
               "completed": 4, "num_prompts": 4, "backend": VALUE}
    ok = {
        "schema_version": 2, "runbook": RB, "run_id": "20261130T100000Z-abcdef12",
        "page": "wiki/hostile.md", "blocks_hash": "sha256:abcdef12",
        "started_at": "2026-11-30T10:00:00Z", "finished_at": "2026-11-30T10:05:00Z",
        "status": "ok",
        "host": {"gpus": [{"name": GPU, "compute_capability": "12.0", "index": 0}],
                 "gpu_count": 1, "driver": DRIVER, "cuda": "13.0"},
        "engine": {"name": "vllm", "version": SCRIPT, "image": IMAGE,
                   "image_digest": "sha256:`<b>`"},
        "markers": {"attention_backend": VALUE, "moe_backend": GPU, "kv_cache_dtype": SVG},
        "server": {"command": f"vllm serve m --gpu-memory-utilization {SVG}"},
        "receipt": RECEIPT,
        "gpu_state": {"before": {"gpus": [{"index": 0, "pstate": PSTATE,
                                           "temperature_c": VALUE}],
                                 "processes": [{"gpu": 0, "pid": 1, "name": VALUE}]}},
        "steps": [{"name": "preflight", "status": "ok"}],
        "clients": [{"name": "throughput", "kind": "serving", "command": "vllm bench serve",
                     "sweep_var": "CONCURRENCY",
                     "points": [{"value": "1", "coords": {"CONCURRENCY": "1"},
                                 "status": "ok", "metrics": metrics},
                                {"value": VALUE, "coords": {"CONCURRENCY": VALUE},
                                 "status": "ok", "metrics": metrics}]},
                    *_receipt_clients()],
    }
    failed = copy.deepcopy(ok)
    failed.update(run_id="20261201T100000Z-abcdef12", started_at="2026-12-01T10:00:00Z",
                  finished_at="2026-12-01T10:01:00Z", status="failed", failed_step=STEP,
                  message=ERROR, clients=[])
    failed["server"] = {"log_tail": [ERROR]}
    return [ok, failed]


def _tree(tmp: Path) -> Path:
    return make_tree(site_tree(tmp), {
        "wiki/hostile.md": PAGE,
        **{f"runbooks/{RB}/{rec['run_id']}.json": json.dumps(rec, indent=2)
           for rec in _records()},
    })


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


PROBE = """() => {
  const found = [];
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      const link = /^(href|src|action|formaction|xlink:href)$/i.test(attr.name);
      if (attr.value.includes('__pwned') || (link && /^javascript:/i.test(attr.value.trim())))
        found.push(el.tagName + ' ' + attr.name + '=' + attr.value);
    }
  }
  for (const s of document.scripts) {
    if (s.textContent.includes('__pwned')) found.push('SCRIPT ' + s.textContent);
  }
  return {pwned: window.__pwned === undefined ? null : window.__pwned, found,
          text: document.querySelector('article').innerText};
}"""


def test_page_rendered_from_hostile_records_runs_no_script_in_a_browser(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (scripts/setup-browser.sh)")
    tree = _tree(tmp_path)
    assert main(["runbook", "render", "--root", str(tree)]) == 0
    page_text = (tree / "wiki" / "hostile.md").read_text()
    assert "Latest run failed" in page_text and "| date | run |" in page_text

    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", DISABLE_MKDOCS_2_WARNING="true")
    build = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict",
                            "--site-dir", str(site)], cwd=tree, env=env, capture_output=True,
                           text=True, timeout=300, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    built = (site / "hostile" / "index.html").read_text()
    # every hostile string reached the page as text: no tag of the built page holds one
    assert re.findall(r"<[^>]*__pwned[^>]*>?", built) == []
    assert "<script>window" not in built and "<svg/onload" not in built

    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/hostile/",
                      wait_until="load")
            page.wait_for_timeout(500)  # onload/onerror handlers of injected elements
            got = page.evaluate(PROBE)
            browser.close()
    finally:
        server.shutdown()
    assert got["pwned"] is None, got
    assert got["found"] == [], got["found"]
    text = got["text"]
    for heading in ("mean KLD", "KV format", "probe file", "image: img`<img src=x onerror"):
        assert heading in text, (heading, text)  # the receipt views were rendered
    for shown in ("<script>window.__pwned=1</script>{{ 7*7 }}", "driver <svg onload",
                  "[click](javascript:window.__pwned=4)", '"<img src=x onerror=window.__pwned=7>"',
                  "<img src=x onerror=window.__pwned=8>", "<iframe src=javascript:",
                  TICKED, SVG, "sha256:`<b onclick=__pwned>`"):
        assert shown in text, (shown, text)
