"""Adopting an existing docs tree with `wiki runbook scan --write`: every launch block becomes a
runbook that plans what the page means, or is refused with a located reason (placeholders,
variables nothing sets, alternatives, interactive shells, several nodes, launches read from
elsewhere). Pages are small shapes modelled on community recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import load_script, make_tree, without_gpus

from wikitools.cli import main
from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks, load_runbooks
from wikitools.runbook.blocks.scan import scan_wiki

FENCE = "```"


def _wiki(tmp_path: Path, pages: dict[str, str]) -> Path:
    (tmp_path / "site" / "docs").mkdir(parents=True)
    return make_tree(tmp_path / "site", {
        "wiki.yml": "docs_dir: docs\nglossary: docs/glossary.md\n",
        **{f"docs/{name}": text for name, text in pages.items()}})


def _scan(text: str) -> tuple[list[str], list[str]]:
    result = scan_wiki([parse_page(text, "p.md")])
    return [s.fence for s in result.suggestions], [d.format() for d in result.refused]


def test_placeholders_are_refused_where_they_stand() -> None:
    fences, refused = _scan(
        "# P\n\n```bash\nvllm serve <model-path> <additional flags>\n```\n\n"
        "```sh\nvllm serve ...\n```\n\n"
        "```bash\nvllm serve /path/to/model --tensor-parallel-size 2\n```\n")
    assert fences == []
    assert refused == [
        "p.md:4:12: RB014 warning: not proposed as a runbook: the command holds a placeholder, "
        "<model-path> (and <additional flags>): write the value it stands for",
        "p.md:8:12: RB014 warning: not proposed as a runbook: the command holds a placeholder, "
        "...: write the value it stands for",
        "p.md:12:12: RB014 warning: not proposed as a runbook: the command holds a placeholder, "
        "/path/to: write the value it stands for",
    ]


def test_marked_placeholder_block_is_a_block_error() -> None:
    page = parse_page("```bash { #x .runbook-server engine=vllm }\nvllm serve <model>\n```\n",
                      "p.md")
    _runbooks, diags = extract_runbooks([page], None)
    assert [d.format() for d in diags] == [
        "p.md:2:12: RB014 error: the command holds a placeholder, <model>: write the value it "
        "stands for"]


def test_alternatives_in_one_block_are_refused() -> None:
    _fences, refused = _scan(
        "```yaml\nservices:\n  srv:\n    image: vllm/vllm-openai:v0.10.0\n"
        "    command: [\"--model\", \"org/m\", \"--tensor-parallel-size\", \"2\"]\n```\n\n"
        "```bash\n# DCP8\nDCP=8 docker compose up -d\n\n# DCP1\nDCP=1 docker compose up -d\n```\n"
        "\n```bash\nvllm serve org/a --tp 2\nvllm serve org/b --tp 4\n```\n")
    assert refused == [
        "p.md:13:1: RB014 warning: not proposed as a runbook: the block starts 2 servers (lines "
        "10, 13): alternatives to choose from, not one run; give each its own block",
        "p.md:18:1: RB014 warning: not proposed as a runbook: the block starts 2 servers (lines "
        "17, 18): alternatives to choose from, not one run; give each its own block",
    ]


def test_interactive_container_shell_is_refused() -> None:
    fences, refused = _scan(
        "```bash\ndocker run -it --rm --gpus all vllm/vllm-openai:v0.10.0 bash\n"
        "vllm serve org/m --tp 2\n```\n\n"
        "```bash\ndocker run -it --rm --entrypoint /bin/bash \\\n"
        "  --gpus all lmsysorg/sglang:v0.5\n"
        "```\n")
    assert fences == []
    assert [r.split(": not proposed as a runbook: ")[0] for r in refused] == [
        "p.md:2:1: RB014 warning", "p.md:7:1: RB014 warning"]
    assert all("interactive shell in a container" in r for r in refused)


def test_multi_node_launch_is_refused() -> None:
    _fences, refused = _scan(
        "```bash\npython3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 "
        "--node-rank 0 --dist-init-addr 10.0.0.1:5000\n```\n")
    assert refused == [
        "p.md:2:60: RB014 warning: not proposed as a runbook: a launch across several nodes "
        "(--nnodes 2): a runbook runs on one host"]


def test_unset_variable_is_refused_and_named_with_the_line_that_sets_it() -> None:
    _fences, refused = _scan(
        "Set the checkpoint first:\n\n```bash\nexport CKPT=<owner>/<checkpoint>\n```\n\n"
        "```bash\nvllm serve \"${CKPT:?}\" --max-model-len 8192\n```\n\n"
        "```bash\ndocker run -d --gpus all -v $WEIGHTS:/w vllm/vllm-openai:v0.10.0 --model /w\n"
        "```\n")
    assert refused == [
        "p.md:8:13: RB015 warning: not proposed as a runbook: CKPT is not set: the command needs "
        "it; the page sets it at line 4 to a placeholder",
        "p.md:12:29: RB015 warning: not proposed as a runbook: WEIGHTS is not set: the command "
        "needs it",
    ]


def test_image_variable_set_on_the_page_is_resolved_never_recorded_as_written(
        tmp_path: Path) -> None:
    text = ("```bash\nIMAGE=voipmonitor/vllm:v9-cu132\n```\n\n"
            "```bash\ndocker run -d --gpus all --network host \"$IMAGE\" \\\n"
            "  vllm serve moonshotai/Kimi-K2.6 --tensor-parallel-size 8\n```\n")
    fences, refused = _scan(text)
    assert refused == []
    assert fences == ["```bash { .runbook-file for=kimi-k2.6-tp8 }",
                      "```bash { #kimi-k2.6-tp8 .runbook-server engine=vllm gpus=8 }"]
    root = _wiki(tmp_path, {"k.md": text})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    runbooks, diags, _pages = load_runbooks(root)
    assert diags == []
    rb = runbooks.get("kimi-k2.6-tp8")
    assert rb.server.command.image == "voipmonitor/vllm:v9-cu132"
    assert [(f.line, f.sets) for f in rb.files] == [(1, (("IMAGE", "voipmonitor/vllm:v9-cu132"),))]


def test_plan_exits_2_while_a_needed_variable_is_unset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = _wiki(tmp_path, {"awq.md": (
        "```bash\nexport AWQ_REPO=<owner>/<repo>\n```\n\n"
        "```bash { #awq-tp1 .runbook-server engine=vllm gpus=1 }\n"
        "vllm serve \"${AWQ_REPO:?}\" --max-model-len 4096\n```\n")})
    monkeypatch.delenv("AWQ_REPO", raising=False)
    assert main(["runbook", "plan", "awq-tp1", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert ("docs/awq.md:6:13: RB015 AWQ_REPO is not set: the command needs it; the page sets "
            "it at line 2 to a placeholder") in err
    monkeypatch.setenv("AWQ_REPO", "org/awq")
    without_gpus(monkeypatch, tmp_path)
    assert main(["runbook", "plan", "awq-tp1", "--root", str(root)]) == 1
    out, err = capsys.readouterr()
    assert "RB015" not in err
    assert "verdict: refused: nvidia-smi not found" in out  # the one thing refused


def test_readiness_port_is_the_published_host_port(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path, {"p.md": (
        "```bash { #m-tp2 .runbook-server engine=vllm gpus=2 }\n"
        "docker run -d --gpus all -p 5000:8000 vllm/vllm-openai:v0.10.0 --model org/m "
        "--tensor-parallel-size 2\n```\n")})
    runbooks, _diags, _pages = load_runbooks(root)
    assert runbooks.get("m-tp2").server.port == 5000
    main(["runbook", "plan", "m-tp2", "--root", str(root)])
    out = capsys.readouterr().out
    assert "ready: http://127.0.0.1:5000/health" in out
    assert "--port 5000" not in out  # the engine still listens on 8000 inside the container


def test_port_inside_a_heredoc_launcher_decides_readiness() -> None:
    page = parse_page(
        "```bash\ncat >/tmp/run-m <<'EOF'\n#!/usr/bin/env bash\nPORT=\"${PORT:-8402}\"\n"
        "exec vllm serve org/m --port \"$PORT\" --tensor-parallel-size 4 --pipeline-parallel-size 2"
        "\nEOF\nchmod +x /tmp/run-m\n/tmp/run-m\n```\n", "p.md")
    result = scan_wiki([page])
    assert [s.fence for s in result.suggestions] == [
        "```bash { #m-tp4-pp2 .runbook-server engine=vllm gpus=8 }"]
    cmd = result.suggestions[0].command
    assert cmd is not None and cmd.port == 8402  # type: ignore[union-attr]


WRITER = ("```bash\ncat >/tmp/run-m <<'EOF'\n#!/usr/bin/env bash\nPORT=\"${PORT:-8000}\"\n"
          "exec vllm serve org/m --port \"$PORT\" --tensor-parallel-size 8 \"$@\"\nEOF\n"
          "chmod +x /tmp/run-m\n```\n\n")


def test_launcher_written_in_one_block_and_run_in_another_becomes_the_runs_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = _wiki(tmp_path, {"p.md": WRITER + "```bash\nPORT=8402 /tmp/run-m --max-num-seqs 4\n```\n"
                            "\n```bash\ncurl -s http://127.0.0.1:8402/v1/models\n```\n"})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    text = (root / "docs" / "p.md").read_text()
    assert text.split("\n")[0] == "```bash { .runbook-file for=m-tp8 }"
    assert text.split("\n")[9] == "```bash { #m-tp8 .runbook-server engine=vllm gpus=8 }"
    runbooks, diags, _pages = load_runbooks(root)
    assert diags == []
    rb = runbooks.get("m-tp8")
    assert [(f.path, f.line, [p for p, _t in f.writes]) for f in rb.files] == [
        ("", 1, ["/tmp/run-m"])]
    cmd = rb.server.command
    assert (cmd.engine, cmd.model, cmd.tp, rb.server.port) == ("vllm", "org/m", 8, 8402)
    assert cmd.flag("--max-num-seqs") == "4"  # the call's arguments reach the script's "$@"
    capsys.readouterr()
    without_gpus(monkeypatch, tmp_path)
    assert main(["runbook", "plan", "m-tp8", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "verdict: refused: nvidia-smi not found" in out  # the one thing refused
    assert "the block at docs/p.md:1 runs first: it writes /tmp/run-m" in out
    assert "    cat >/tmp/run-m <<'EOF'" in out
    assert "    PORT=8402 /tmp/run-m --max-num-seqs 4" in out
    assert "ready: http://127.0.0.1:8402/health" in out
    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 0
    before = (root / "docs" / "p.md").read_bytes()
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    assert (root / "docs" / "p.md").read_bytes() == before
    # the writer is part of the runbook: editing the script changes its hash
    (root / "docs" / "p.md").write_text(text.replace("--tensor-parallel-size 8 ",
                                                     "--tensor-parallel-size 8 --seed 1 "))
    assert load_runbooks(root)[0].get("m-tp8").blocks_hash != rb.blocks_hash


def test_a_writer_whose_runner_lists_alternatives_is_refused_with_the_runners_reason() -> None:
    _fences, refused = _scan(
        WRITER + "```bash\nPORT=1 /tmp/run-m\nPORT=2 /tmp/run-m\n```\n\n"
        "```bash\ncat /tmp/run-m\n```\n")
    assert refused == [
        "p.md:12:1: RB014 warning: not proposed as a runbook: the block starts 2 servers (lines "
        "11, 12): alternatives to choose from, not one run; give each its own block",
        "p.md:1:1: RB014 warning: not proposed as a runbook: writes /tmp/run-m, which the block "
        "at line 10 runs: the block starts 2 servers (lines 11, 12): alternatives to choose "
        "from, not one run; give each its own block",
    ]


def test_a_compose_file_written_in_one_block_and_brought_up_in_another() -> None:
    fences, refused = _scan(
        "```bash\ncat >/tmp/m.compose.yaml <<'EOF'\nservices:\n  m:\n"
        "    image: ${IMAGE:-vllm/vllm-openai:v0.10.0}\n    network_mode: host\n"
        "    command: [\"--model\", \"org/m\", \"--port\", \"${PORT:-8402}\", "
        "\"--tensor-parallel-size\", \"4\"]\nEOF\n```\n\n"
        "```bash\nPORT=8402 docker compose -f /tmp/m.compose.yaml up -d\n```\n\n"
        "```bash\ndocker compose -f /tmp/m.compose.yaml down\n```\n")
    assert refused == []  # `down` neither runs nor is refused
    assert fences == ["```bash { .runbook-file for=m-tp4 }",
                      "```bash { #m-tp4 .runbook-server engine=vllm gpus=4 }"]


def test_a_script_that_runs_bash_with_a_cat_here_document_is_read() -> None:
    fences, _refused = _scan(
        "```bash\ndocker run -d --gpus all --network host --entrypoint /bin/bash "
        "vllm/vllm-openai:v0.10.0 -lc \"$(cat <<RUN_EOF\nset -e\n"
        "exec vllm serve org/m --port 8402 --tensor-parallel-size 2\nRUN_EOF\n)\"\n```\n")
    assert fences == ["```bash { #m-tp2 .runbook-server engine=vllm gpus=2 }"]


def test_ids_come_from_model_and_shape_never_a_snapshot_hash() -> None:
    fences, _refused = _scan(
        "```bash\nvllm serve /root/.cache/huggingface/hub/models--moonshotai--Kimi-K2.6/"
        "snapshots/b5aabbfb20227ed42becbf5541dbffd213942c58 --tp 8 --quantization nvfp4\n```\n\n"
        "```bash\nvllm serve /models --served-model-name GLM-5.2 -tp 4 -dcp 2\n```\n\n"
        "```bash\nvllm serve moonshotai/Kimi-K2.6 --quantization nvfp4 -tp 8\n```\n")
    assert fences == [
        "```bash { #kimi-k2.6-nvfp4-tp8 .runbook-server engine=vllm gpus=8 }",
        "```bash { #glm-5.2-tp4-dcp2 .runbook-server engine=vllm gpus=4 }",
        "```bash { #kimi-k2.6-nvfp4-tp8-2 .runbook-server engine=vllm gpus=8 }",
    ]


def test_ids_are_unique_across_the_wiki(tmp_path: Path) -> None:
    launch = "```bash\nvllm serve org/Same-Model --tp 2\n```\n"
    root = _wiki(tmp_path, {"a.md": launch, "b.md": launch, "c.md": (
        "```bash { #same-model-tp2 .runbook-server engine=vllm gpus=2 }\n"
        "vllm serve org/Same-Model -tp 2 --max-model-len 4096\n```\n")})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    runbooks, diags, _pages = load_runbooks(root)
    assert diags == []
    assert sorted(runbooks.ids()) == ["same-model-tp2", "same-model-tp2-2", "same-model-tp2-3"]


def test_scan_lists_every_block_of_pages_that_share_line_numbers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    launch = "# P\n\n```bash\nvllm serve org/Same-Model --tp 2\n```\n"
    root = _wiki(tmp_path, {"a.md": launch, "b.md": launch, "c.md": launch})
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    listed = [line.split(": ", 1)[0] + " " + line.split("#", 1)[1].split(" ", 1)[0]
              for line in capsys.readouterr().out.splitlines()]
    assert listed == ["docs/a.md:3:1 same-model-tp2", "docs/b.md:3:1 same-model-tp2-2",
                      "docs/c.md:3:1 same-model-tp2-3"]
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    assert sorted(load_runbooks(root)[0].ids()) == ["same-model-tp2", "same-model-tp2-2",
                                                    "same-model-tp2-3"]


def test_scan_write_adds_a_results_region_and_check_passes_after(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path, {"m.md": (
        "# M\n\n```bash\nvllm serve org/m --tensor-parallel-size 2\n```\n\n"
        "```bash\nvllm bench serve --model org/m --num-prompts 16\n```\n\nAfter.\n")})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    text = (root / "docs" / "m.md").read_text()
    assert ("```bash { .runbook-client for=m-tp2 kind=serving }\n"
            "vllm bench serve --model org/m --num-prompts 16\n```\n\n"
            "<!-- wiki:results runbook=m-tp2 view=serving -->\n") in text
    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 0
    assert main(["index", "--root", str(root)]) == 0
    assert main(["check", "--root", str(root)]) == 0
    before = (root / "docs" / "m.md").read_bytes()
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    assert (root / "docs" / "m.md").read_bytes() == before
    capsys.readouterr()


def test_scan_write_keeps_display_options_bom_and_crlf(tmp_path: Path) -> None:
    text = ("\ufeff# M\r\n\r\n```bash title=\"serve.sh\" linenums=\"1\" hl_lines=\"2\"\r\n"
            "vllm serve org/m --tensor-parallel-size 2 \\\r\n  --max-model-len 8192\r\n```\r\n")
    root = _wiki(tmp_path, {"m.md": text})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    data = (root / "docs" / "m.md").read_bytes().decode("utf-8")
    assert data == text.replace(
        '```bash title="serve.sh" linenums="1" hl_lines="2"',
        '```bash { #m-tp2 .runbook-server engine=vllm gpus=2 title="serve.sh" linenums="1" '
        'hl_lines="2" }')
    runbooks, diags, _pages = load_runbooks(root)
    assert diags == [] and runbooks.ids() == ["m-tp2"]


def test_scan_of_a_page_outside_the_wiki_is_a_located_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path, {"m.md": "# M\n"})
    outside = tmp_path / "elsewhere.md"
    outside.write_text("```bash\nvllm serve org/m\n```\n")
    assert main(["runbook", "scan", str(outside), "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{outside}: not inside the wiki at {root}" in err
    assert "Traceback" not in err


def test_blocks_in_tabs_lists_admonitions_and_myst_tabs_are_marked_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path, {"t.md": (
        "# T\n\n1. Launch\n\n    === \"vLLM\"\n\n        ```shell\n"
        "        vllm serve org/m --tensor-parallel-size 2\n        ```\n\n"
        "    === \"SGLang\"\n\n        ```shell\n"
        "        python3 -m sglang.launch_server --model-path org/m --tp 2\n        ```\n\n"
        ":::::{tab-set}\n::::{tab-item} A\n```bash\nvllm serve org/q --tensor-parallel-size 4\n"
        "```\n::::\n:::::\n\n!!! note \"Admonition\"\n\n    ```bash\n    vllm serve org/r\n"
        "    ```\n")})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    assert capsys.readouterr().err.strip().endswith("4 blocks in 1 page marked")
    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 0
    runbooks, diags, _pages = load_runbooks(root)
    assert diags == []
    assert [(r.id, r.server.engine, r.server.command.tp) for r in runbooks] == [
        ("m-tp2", "vllm", 2), ("m-tp2-2", "sglang", 2), ("q-tp4", "vllm", 4),
        ("r-tp1", "vllm", None)]
    assert main(["runbook", "list", "--root", str(root)]) == 0
    assert capsys.readouterr().out.count("docs/t.md#") == 4


def test_funnel_benchmark_sorts_every_launch_block(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:

    bench = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "bench_adopt.py",
                        "bench_adopt")
    tree = tmp_path / "tree"
    (tree / "models").mkdir(parents=True)
    (tree / "models" / "m.md").write_text(
        "# M\n\n```bash\nvllm serve org/m --tensor-parallel-size 2\n```\n\n"
        "```bash\nvllm serve <model>\n```\n\n"
        "```bash\n./launch-everything.sh --serve\nvllm serve org/x & vllm serve org/y\n```\n\n"
        "```bash\nvllm serve \"$WEIGHTS\" --tensor-parallel-size 2\n```\n\n"
        "```bash\ndocker run --rm vllm/vllm-openai:v0.10.0 python3 -c 'import vllm'\n```\n")
    before = (tree / "models" / "m.md").read_bytes()
    assert bench.main([str(tree), "--list"]) == 0
    out = capsys.readouterr().out
    assert "  launch blocks         5\n" in out
    assert "  runbook               1 (20.0 %)\n" in out
    assert "  refused               4 (80.0 %)\n" in out
    assert "  silent                0 (0.0 %)\n" in out
    assert "  scan --check after    exit 0\n" in out
    assert "  other lines changed   0\n" in out
    # the issue's share: the placeholder, the alternatives and the one-off are no real launch
    assert ("  real launches         2 (launch blocks less 3 refused as not one launch: "
            "placeholder 1, alternatives 1, interactive-shell 0, no-server 1, illustration 0)\n"
            ) in out
    assert "  runbooks / real launches = 1 / 2 = 50.0 %\n" in out
    assert "  real launches refused 1, by reason:\n       1  variable-unset\n" in out
    listed = [ln.split()[:3] for ln in out.splitlines() if ln.startswith("refused ")]
    assert listed == [["refused", "excluded:alternatives", "models/m.md:11:"],
                      ["refused", "excluded:no-server", "models/m.md:20:"],
                      ["refused", "excluded:placeholder", "models/m.md:7:"],
                      ["refused", "real:variable-unset", "models/m.md:16:"]]
    assert (tree / "models" / "m.md").read_bytes() == before  # the tree itself is not written


def test_compose_file_run_only_in_prose_gets_a_server_block(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path, {"c.md": (
        "# C\n\n```yaml\nservices:\n  srv:\n    image: vllm/vllm-openai:v0.10.0\n"
        "    network_mode: host\n    command: [\"--model\", \"org/c\", \"--tensor-parallel-size\", "
        "\"2\"]\n```\n\nStart it with `docker compose up -d`, then:\n\n"
        "```bash\nvllm bench serve --model org/c --num-prompts 8\n```\n")})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    text = (root / "docs" / "c.md").read_text()
    assert ("```\n\n```bash { #c-tp2 .runbook-server engine=vllm gpus=2 }\n"
            "docker compose up -d\n```\n\nStart it with") in text
    runbooks, diags, _pages = load_runbooks(root)
    assert diags == []
    rb = runbooks.get("c-tp2")
    assert [f.path for f in rb.files] == ["compose.yaml"]
    assert (rb.server.command.model, rb.server.command.tp) == ("org/c", 2)
    assert [c.kind for c in rb.clients] == ["serving"]
    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 0
    capsys.readouterr()


def test_arguments_after_a_shell_script_reach_the_launcher_it_forwards_them_to() -> None:
    fences, refused = _scan(
        "```bash\ndocker run -d --gpus all --network=host voipmonitor/vllm:x \\\n"
        "  /bin/sh -lc 'unset NCCL_GRAPH_FILE; exec vllm serve \"$@\"' -- \\\n"
        "  /models/Kimi-K2.6 --tensor-parallel-size 8 --port 8402\n```\n")
    assert refused == []
    assert fences == ["```bash { #kimi-k2.6-tp8 .runbook-server engine=vllm gpus=8 }"]
    page = parse_page("```bash { #k .runbook-server engine=vllm gpus=8 }\n"
                      "docker run -d --gpus all --network=host voipmonitor/vllm:x /bin/sh -lc "
                      "'exec vllm serve \"$@\"' -- /models/K --tensor-parallel-size 8 --port 8402"
                      "\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    assert runbooks.get("k").server.port == 8402


def test_chat_markup_in_a_command_is_not_a_placeholder() -> None:
    fences, refused = _scan("```bash\nvllm serve org/r1 --tensor-parallel-size 2 "
                            "--reasoning-parser deepseek_r1 --override-generation-config "
                            "'{\"stop\": [\"<think>\"]}'\n```\n")
    assert refused == []
    assert fences == ["```bash { #r1-tp2 .runbook-server engine=vllm gpus=2 }"]


def test_the_variable_the_page_gives_no_value_for_is_named_first() -> None:
    _fences, refused = _scan(
        "```bash\nexport IMAGE=voipmonitor/vllm:x\n```\n\n"
        "```bash\ndocker run -d --gpus all --network host \"$IMAGE\" vllm serve \"$MODEL_DIR\" "
        "--tp 8\n```\n")
    assert refused[0] == ("p.md:6:62: RB015 warning: not proposed as a runbook: MODEL_DIR is not "
                          "set: the command needs it")


def test_port_passed_into_the_container_keeps_the_scripts_default() -> None:
    page = parse_page(
        "```bash { #g .runbook-server engine=vllm gpus=16 }\nPORT=\"${PORT:-5329}\"\n"
        "docker run -d --gpus all --network host -e PORT=\"${PORT}\" --entrypoint bash "
        "voipmonitor/vllm:x -lc '\nexec vllm serve org/m --port \"${PORT}\" "
        "--tensor-parallel-size 16\n'\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    assert runbooks.get("g").server.port == 5329


def test_scan_check_passes_on_this_wikis_own_untouched_pages(capsys) -> None:
    repo = Path(__file__).resolve().parent.parent
    assert main(["runbook", "scan", "--check", "--root", str(repo)]) == 0
    assert "would mark" not in capsys.readouterr().out


def test_a_one_off_command_in_an_engine_image_is_said_not_to_be_a_server() -> None:
    fences, refused = _scan(
        "```bash\nIMAGE=vllm/vllm-openai:v0.10.0\n\ndocker pull \"$IMAGE\"\n"
        "docker run --rm \"$IMAGE\" python -c 'import vllm; print(vllm.__version__)'\n```\n")
    assert fences == []
    assert refused == [
        "p.md:5:1: RB016 warning: not proposed as a runbook: `docker run --rm $IMAGE python -c "
        "import vllm; print(vllm.__version__)` runs a command in the container and exits: a "
        "one-off command, not a server"]


def test_a_compose_file_that_hands_an_engine_image_to_a_wrapper_is_refused() -> None:
    _fences, refused = _scan(
        "```yaml\nservices:\n  ds4:\n    image: docker:27-cli\n    environment:\n"
        "      IMAGE: ${IMAGE:-vllm/vllm-openai:v0.10.0}\n"
        "    command: [\"scripts/run-server.sh\"]\n```\n")
    assert refused == [
        "p.md:1:1: RB016 warning: not proposed as a runbook: compose file whose services start "
        "no engine the reader knows (service ds4 runs scripts/run-server.sh): the engine, model "
        "and port cannot be read from it"]


def test_a_repository_script_whose_server_the_reader_cannot_read_is_refused_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _wiki(tmp_path, {"p.md": "# P\n\n```bash\ncd docs && PORT=8402 ./start.sh\n```\n"})
    (root / "docs" / "start.sh").write_text(
        "docker run -d --gpus all --entrypoint /usr/local/bin/serve-x.sh "
        "vllm/vllm-openai:v0.10.0\n")
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "docs/p.md:4:12: RB016 warning: not proposed as a runbook: runs docs/start.sh, a file "
        "of the repository that starts an engine the reader does not understand: it starts "
        "/usr/local/bin/serve-x.sh inside the image, so the engine, model and port cannot be "
        "read from it"]


def test_a_written_launcher_that_runs_a_script_inside_the_image_is_refused_saying_so() -> None:
    _fences, refused = _scan(
        "```bash\ncat >/tmp/run-g <<'EOF'\ndocker run -d --gpus all vllm/vllm-openai:v0.10.0 "
        "bash -lc 'exec /opt/vllm/scripts/run-glm'\nEOF\nchmod +x /tmp/run-g\n```\n\n"
        "```bash\nPORT=5264 /tmp/run-g\n```\n")
    assert refused[-1] == (
        "p.md:1:1: RB018 warning: not proposed as a runbook: writes /tmp/run-g, which the block "
        "at line 8 runs: runs a launcher the block at line 1 writes, which the reader does not "
        "understand: it starts /opt/vllm/scripts/run-glm inside the image, so the engine, model "
        "and port cannot be read from the page" + _declarable("vllm/vllm-openai:v0.10.0"))


def test_template_fields_a_docs_build_fills_in_are_placeholders() -> None:
    fences, refused = _scan(
        "```bash\nexport IMAGE=quay.io/ascend/vllm-ascend:|vllm_ascend_version|\n"
        "docker run -d --gpus all $IMAGE vllm serve org/m\n```\n\n"
        "```bash\nvllm serve org/m --revision {{ revision }}\n```\n")
    assert fences == []
    assert [r.split(": ", 1)[1] for r in refused] == [
        "RB014 warning: not proposed as a runbook: the command holds a placeholder, "
        "|vllm_ascend_version|: write the value it stands for",
        "RB014 warning: not proposed as a runbook: the command holds a placeholder, "
        "{{ revision }}: write the value it stands for"]


def test_go_templates_and_regex_alternations_in_a_command_are_not_placeholders() -> None:
    fences, refused = _scan(
        "```bash\ndocker run -d --gpus all --name m vllm/vllm-openai:v0.10.0 --model org/m\n"
        "docker ps --format '{{.Names}} {{json .State}}' | grep -E 'm|n|o'\n```\n")
    assert refused == []
    assert fences == ["```bash { #m-tp1 .runbook-server engine=vllm gpus=1 }"]


# --------------------------------------------------------------------------- page variables

def _vars_page(launch_section: str = "") -> str:
    return ("# K\n\n## Launch\n\nCommon variables:\n\n```bash\nexport IMAGE=org/vllm:v1\n"
            "export PORT=5002\nMTP=1\nSPEC=(--speculative-config '{\"method\":\"mtp\"}')\n```\n\n"
            "Profiles: `DCP=1` or `DCP=8` (table in the prose is not a setting).\n\n"
            "DCP=1 + MTP=3 is the fastest profile.\n\n" + launch_section +
            "```bash\nARGS=()\nif [[ \"${MTP}\" == \"1\" ]]; then ARGS=(\"${SPEC[@]}\"); fi\n"
            "docker run -d --gpus all -p 9000:${PORT} \"$IMAGE\" \\\n"
            "  --model org/m --tensor-parallel-size 4 --port ${PORT} \"${ARGS[@]}\"\n```\n")


def test_variables_an_earlier_block_sets_flow_into_the_launch(tmp_path: Path) -> None:
    text = _vars_page()
    fences, refused = _scan(text)
    assert refused == []
    assert fences == ["```bash { .runbook-file for=m-tp4 }",
                      "```bash { #m-tp4 .runbook-server engine=vllm gpus=4 }"]
    root = _wiki(tmp_path, {"k.md": text})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 0
    page = root / "docs" / "k.md"
    written = page.read_text()
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    assert page.read_text() == written
    runbooks, diags, _pages = load_runbooks(root)
    assert diags == []
    rb = runbooks.get("m-tp4")
    assert (rb.server.command.image, rb.server.port, rb.server.command.tp) == (
        "org/vllm:v1", 9000, 4)
    assert [(f.line, [k for k, _v in f.sets]) for f in rb.files] == [
        (7, ["IMAGE", "PORT", "MTP", "SPEC"])]
    # the source block is part of the runbook: changing it changes the runbook's hash
    before = rb.blocks_hash
    page.write_text(written.replace("export PORT=5002", "export PORT=5003"))
    runbooks, _diags, _pages = load_runbooks(root)
    assert runbooks.get("m-tp4").blocks_hash != before
    assert runbooks.get("m-tp4").server.port == 9000


def test_plan_runs_the_variables_block_first(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = _wiki(tmp_path, {"k.md": _vars_page()})
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    capsys.readouterr()
    without_gpus(monkeypatch, tmp_path)
    assert main(["runbook", "plan", "m-tp4", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "verdict: refused: nvidia-smi not found" in out  # the one thing refused
    assert "the block at docs/k.md:7 runs first: it sets IMAGE, PORT, MTP, SPEC" in out
    assert out.index("export IMAGE=org/vllm:v1") < out.index("docker run")


def test_variables_set_only_after_the_launch_are_refused() -> None:
    _fences, refused = _scan(
        "# P\n\n```bash\nvllm serve org/m --port $PORT\n```\n\n```bash\nexport PORT=8001\n```\n")
    assert refused == [
        "p.md:4:25: RB015 warning: not proposed as a runbook: PORT is not set: the command "
        "needs it; the page sets it only after the block, at line 8"]


def test_variables_set_differently_in_alternative_sections_are_refused() -> None:
    _fences, refused = _scan(
        "# P\n\n## Profile A\n\n```bash\nexport DCP=1\n```\n\n## Profile B\n\n"
        "```bash\nexport DCP=8\n```\n\n## Start\n\n"
        "```bash\nvllm serve org/m -tp 8 --decode-context-parallel-size $DCP\n```\n")
    assert refused == [
        "p.md:18:55: RB015 warning: not proposed as a runbook: DCP is not set: the command "
        "needs it; the page sets it differently before the block (lines 6, 12): "
        "alternatives to choose from"]


def test_two_values_in_the_launch_section_are_alternatives_but_a_closed_one_is_not() -> None:
    _fences, refused = _scan(
        "# P\n\n## Launch\n\n```bash\nexport IMAGE=org/vllm:new\n```\n\n"
        "To compare against the baseline, use:\n\n```bash\nexport IMAGE=org/vllm:old\n```\n\n"
        "```bash\ndocker run -d --gpus all $IMAGE --model org/m -tp 2\n```\n")
    assert refused == [
        "p.md:16:26: RB015 warning: not proposed as a runbook: IMAGE is not set: the command "
        "needs it; the page sets it differently before the block (lines 6, 12): alternatives "
        "to choose from"]
    fences, refused = _scan(
        "# P\n\n## A\n\n```bash\nexport TP=2\n```\n\n```bash\nvllm serve org/a -tp $TP\n```\n"
        "\n## B\n\n```bash\nexport TP=4\n```\n\n```bash\nvllm serve org/b -tp $TP\n```\n")
    assert refused == []
    assert fences == ["```bash { .runbook-file for=a-tp2 }",
                      "```bash { #a-tp2 .runbook-server engine=vllm gpus=2 }",
                      "```bash { .runbook-file for=b-tp4 }",
                      "```bash { #b-tp4 .runbook-server engine=vllm gpus=4 }"]


def test_a_variables_section_before_the_launch_section_is_a_source() -> None:
    fences, refused = _scan(
        "# P\n\n## Variables\n\n```bash\nexport DCP=8\n```\n\n## Start\n\n"
        "```bash\nvllm serve org/m -tp 8 --decode-context-parallel-size $DCP\n```\n")
    assert refused == []
    assert fences == ["```bash { .runbook-file for=m-tp8-dcp8 }",
                      "```bash { #m-tp8-dcp8 .runbook-server engine=vllm gpus=8 }"]


def test_variables_set_in_another_content_tab_are_refused() -> None:
    _fences, refused = _scan(
        "# P\n\n=== \"Big\"\n\n    ```bash\n    export TP=8\n    ```\n\n=== \"Small\"\n\n"
        "    ```bash\n    vllm serve org/m -tp $TP\n    ```\n")
    assert refused == [
        "p.md:12:26: RB015 warning: not proposed as a runbook: TP is not set: the command "
        "needs it; the page sets it at line 6, in another content tab than the block's: "
        "alternatives to choose from"]


def test_variables_set_by_a_block_that_runs_other_commands_are_refused() -> None:
    _fences, refused = _scan(
        "# P\n\n```bash\nexport MODEL_DIR=/models/m\nhf download org/m --local-dir $MODEL_DIR\n"
        "```\n\n```bash\nvllm serve $MODEL_DIR -tp 2\n```\n")
    assert refused == [
        "p.md:9:12: RB015 warning: not proposed as a runbook: MODEL_DIR is not set: the "
        "command needs it; the page sets it at line 4 (MODEL_DIR=/models/m), in a block that "
        "also runs `hf download org/m --local-dir $MODEL_DIR`: only a block of assignments can "
        "run first"]


def test_one_variables_block_serves_several_launches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ("# P\n\n```bash\nexport IMAGE=org/vllm:v1\n```\n\n## A\n\n"
            "```bash\ndocker run -d --gpus all -p 8000:8000 $IMAGE --model org/a -tp 2\n```\n\n"
            "## B\n\n"
            "```bash\ndocker run -d --gpus all -p 8001:8000 $IMAGE --model org/b -tp 4\n```\n")
    root = _wiki(tmp_path, {"p.md": text})
    assert main(["runbook", "scan", "--root", str(root)]) == 0
    listed = [ln for ln in capsys.readouterr().out.splitlines() if ":3:1:" in ln]
    assert listed == ["docs/p.md:3:1: file (sets IMAGE); mark it: "
                      "```bash { .runbook-file for=a-tp2,b-tp4 }"]
    assert main(["runbook", "scan", "--write", "--root", str(root)]) == 0
    written = (root / "docs" / "p.md").read_text()
    assert "```bash { .runbook-file for=a-tp2,b-tp4 }\nexport IMAGE" in written
    assert main(["runbook", "scan", "--check", "--root", str(root)]) == 0
    runbooks, diags, _pages = load_runbooks(root)
    assert diags == []
    assert [(r.id, r.server.command.image, r.server.port, [f.line for f in r.files])
            for r in runbooks] == [("a-tp2", "org/vllm:v1", 8000, [3]),
                                   ("b-tp4", "org/vllm:v1", 8001, [3])]


# --------------------------------------------------------------------------- what a container runs

def test_a_script_inside_the_image_is_named_as_the_server() -> None:
    _fences, refused = _scan(
        "```bash\ndocker run -d --gpus all --network host \\\n"
        "  --entrypoint /usr/local/bin/run-glm51-vllm -e PORT=5261 org/vllm:glm\n```\n\n"
        "```bash\nexport IMAGE=org/vllm:kimi\n```\n\n"
        "```bash\ndocker run -d --gpus all --entrypoint /bin/bash -e PORT=5002 \\\n"
        "  \"${MTP_ENV[@]}\" \"$IMAGE\" \\\n"
        "  run-kimi26-vllm\n```\n\n"
        "```bash\ndocker run -d --gpus all org/vllm:x \\\n"
        "  bash -lc 'unset NCCL_GRAPH_FILE; cd /opt/vllm && exec ./serve-ds4.sh'\n```\n")
    assert refused == [
        "p.md:1:1: RB018 warning: not proposed as a runbook: the server is "
        "/usr/local/bin/run-glm51-vllm, a script inside the image: the engine, model and port "
        "cannot be read from the page" + _declarable("org/vllm:glm", "5261"),
        "p.md:10:1: RB018 warning: not proposed as a runbook: the server is run-kimi26-vllm, a "
        "script inside the image: the engine, model and port cannot be read from the page"
        + _declarable("org/vllm:kimi", "5002"),
        "p.md:16:1: RB018 warning: not proposed as a runbook: the server is ./serve-ds4.sh, a "
        "script inside the image: the engine, model and port cannot be read from the page"
        + _declarable("org/vllm:x"),
    ]


def _declarable(image: str, port: str | None = None) -> str:
    """The declaration scan proposes for a vLLM-image helper whose model and TP the page does
    not say (and whose port it says only through the container's PORT)."""
    seen = "engine=vllm" + (f", port={port}" if port else "")
    came = f"engine from the image's name {image}" + ("; port from the container's PORT"
                                                       if port else "")
    missing = "model=, tp=" + ("" if port else ", port=")
    return (f"; a declared server can stand for it: seen {seen} ({came}); missing {missing}: "
            f"mark it `bash {{ #p-tp1 .runbook-server engine=vllm model=… tp=… "
            f"port={port or '…'} }}` once they are known (the run checks each against the "
            "server)")


def test_an_idle_container_and_a_shell_without_tty_are_no_servers() -> None:
    _fences, refused = _scan(
        "```bash\ndocker run -d --gpus all -p 5000:5000 --name kld \\\n"
        "  lmsysorg/sglang:v0.5 \\\n  sleep infinity\n```\n\n"
        "```bash\ndocker run --gpus all --ipc=host \\\n  -v jit:/cache/jit \\\n"
        "  voipmonitor/sglang:cu130 bash\n```\n\n"
        "```bash\ndocker run --rm --entrypoint /bin/bash vllm/vllm-openai:v0.10.0 \\\n"
        "  -lc '/opt/venv/bin/python - <<PY\nimport vllm\nprint(vllm.__version__)\nPY'\n```\n\n"
        "```shell\ndocker run -it --network=host -v $(pwd):/work --name g "
        "vllm/vllm-openai-rocm:v0.15.1\n```\n")
    assert refused == [
        "p.md:2:1: RB016 warning: not proposed as a runbook: the container runs `sleep`, not a "
        "server: it keeps a container for later `docker exec` commands, so the block starts no "
        "server",
        "p.md:8:1: RB014 warning: not proposed as a runbook: the block opens an interactive "
        "shell in a container (docker run … IMAGE bash, to type in); what is typed in it is not "
        "part of the block",
        "p.md:14:1: RB016 warning: not proposed as a runbook: `docker run --rm --entrypoint "
        "/bin/bash vllm/vllm-openai:v0.10.0 -lc /…` runs a command in "
        "the container and exits: a one-off command, not a server",
        "p.md:22:1: RB014 warning: not proposed as a runbook: the block opens an interactive "
        "shell in a container (docker run -it IMAGE, with no command); what is typed in it is "
        "not part of the block",
    ]


def test_a_block_that_writes_and_runs_its_compose_file_is_judged_by_itself() -> None:
    _fences, refused = _scan(
        "```bash\ncat >compose.x.yml <<'EOF'\nservices:\n  x:\n    image: org/vllm:x\n"
        "    entrypoint: /bin/bash\n    command: -lc 'exec /opt/vllm/scripts/run-x'\nEOF\n\n"
        "docker compose -f compose.x.yml up -d\n```\n\nVariants:\n\n"
        "```bash\nDCP=4 docker compose -f compose.x.yml up -d\n\n"
        "DCP=8 docker compose -f compose.x.yml up -d\n```\n")
    assert refused == [
        "p.md:1:1: RB018 warning: not proposed as a runbook: the server is "
        "/opt/vllm/scripts/run-x, a script inside the image: the engine, model and port cannot "
        "be read from the page" + _declarable("org/vllm:x"),
        "p.md:18:1: RB014 warning: not proposed as a runbook: the block starts 2 servers (lines "
        "16, 18): alternatives to choose from, not one run; give each its own block",
    ]


def test_a_placeholder_an_earlier_step_sets_is_no_alternative_to_the_value_set_later() -> None:
    fences, refused = _scan(
        "# P\n\n## Weights\n\n```bash\nMODEL_PATH=/path/to/m   # inside the container\n```\n\n"
        "## Setup\n\n```bash\nexport MODEL_PATH=/models/m\n```\n\n## Serve\n\n"
        "```bash\nvllm serve \"$MODEL_PATH\" --tensor-parallel-size 2\n```\n")
    assert refused == []
    assert fences == ["```bash { .runbook-file for=m-tp2 }",
                      "```bash { #m-tp2 .runbook-server engine=vllm gpus=2 }"]


def test_an_array_of_flags_an_earlier_block_sets_decides_tp_and_port() -> None:
    fences, refused = _scan(
        "```bash\nCOMMON=(--tensor-parallel-size 8 --port 8100)\n```\n\n"
        "```bash\nvllm serve org/m \"${COMMON[@]}\"\n```\n")
    assert refused == []
    assert fences == ["```bash { .runbook-file for=m-tp8 }",
                      "```bash { #m-tp8 .runbook-server engine=vllm gpus=8 }"]
    page = parse_page("```bash { .runbook-file for=m-tp8 }\nCOMMON=(--tensor-parallel-size 8 "
                      "--port 8100)\n```\n\n```bash { #m-tp8 .runbook-server engine=vllm gpus=8 }"
                      "\nvllm serve org/m \"${COMMON[@]}\"\n```\n", "p.md")
    runbooks, diags = extract_runbooks([page], None)
    assert diags == []
    server = runbooks.get("m-tp8").server
    assert (server.command.tp, server.port) == (8, 8100)
